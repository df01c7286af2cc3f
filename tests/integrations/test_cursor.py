"""Cursor's hooks end to end, fed through the real ``turnback hook cursor``.

There is no headless Cursor to run here (its agent runs inside the editor), so
no session could be recorded from the real program: the events replayed are
payloads/cursor_*.json, written from Cursor's hooks documentation
(https://cursor.com/docs/hooks; the file names its source). Each event is one
``turnback hook cursor`` process, as Cursor runs it. The test does each
shell command's effect right after its beforeShellExecution and each edit
right *before* its afterFileEdit (Cursor sends nothing before an edit), and
everything the user does afterwards goes through the real CLI.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import Result, run_cli, tree_state

PAYLOADS = Path(__file__).resolve().parents[1] / "realclients" / "payloads"


def payloads(name: str, project: Path) -> list[dict[str, Any]]:
    text = (PAYLOADS / f"cursor_{name}.json").read_text().replace("$PROJECT", str(project))
    recorded = json.loads(text)
    assert recorded["source"].startswith("Cursor has no headless CLI here"), recorded["source"]
    return list(recorded["events"])


def send(home: Path, project: Path, event: dict[str, Any]) -> Result:
    result = run_cli(home, "hook", "cursor", stdin=json.dumps(event).encode(), cwd=project)
    assert result.rc == 0 and result.err == "", result
    return result


def edits(project: Path) -> list[Callable[[], object]]:
    """What each afterFileEdit reports, done before it is sent, in order."""
    return [
        lambda: (project / "b.txt").write_bytes(b"b1\nB2\nb3\n"),
        lambda: (project / "new.txt").write_bytes(b"hello\n"),
        lambda: (project / "new.txt").write_bytes(b"hello again\n"),
    ]


def shell(project: Path) -> None:
    (project / "c.txt").write_bytes(b"c\n")
    (project / "d.txt").unlink()


def test_a_cursor_session_is_recorded_call_by_call_and_undone_byte_for_byte(home: Path, project: Path) -> None:
    (project / "b.txt").write_bytes(b"b1\nb2\nb3\n")
    (project / "d.txt").write_bytes(b"doomed\n")
    start = tree_state(project)
    todo = iter(edits(project))
    outputs = []
    for event in payloads("happy_path", project):
        name = event["hook_event_name"]
        if name == "afterFileEdit":
            next(todo)()
        if name == "beforeSubmitPrompt" and event["prompt"] == "second":
            after_one = tree_state(project)
            (project / "user.txt").write_bytes(b"mine\n")  # the user, between turns: never the agent's
        result = send(home, project, event)
        outputs.append((name, result.out))
        if name == "beforeShellExecution" and event["command"].startswith("printf"):
            shell(project)
        # "rm -rf build" gets no afterShellExecution (the user denied it): it ran nothing
    assert [out for name, out in outputs if name == "beforeSubmitPrompt"] == ['{"continue": true}\n'] * 2
    assert all(out == "" for name, out in outputs if name != "beforeSubmitPrompt"), outputs

    log = run_cli(home, "log", "--json", cwd=project)
    assert log.rc == 0, log
    turns = sorted(log.json()["turns"], key=lambda t: t["number"])
    assert [(t["message"], t["status"]) for t in turns] == [("first", "ended"), ("second", "ended")]
    calls = turns[0]["calls"]
    assert [(c["tool"], c["status"]) for c in calls] == [
        ("edit_file", "done"),
        ("edit_file", "done"),
        ("exec", "done"),
        ("exec", "failed"),
    ], calls
    assert [sorted(change["path"] for change in c["changes"]) for c in calls] == [
        ["b.txt"],
        ["new.txt"],
        ["c.txt", "d.txt"],
        [],
    ]
    assert [[ch["path"] for ch in c["changes"]] for c in turns[1]["calls"]] == [["new.txt"]]
    shown = run_cli(home, "show", calls[3]["id"], cwd=project)
    assert "Cursor sent no afterShellExecution (denied, or cut short)" in shown.out, shown.out
    assert not any(c["cut_short"] for t in turns for c in t["calls"])

    assert run_cli(home, "undo", "--yes", cwd=project).rc == 0
    assert tree_state(project) == {**after_one, **{k: v for k, v in tree_state(project).items() if k == "user.txt"}}
    assert run_cli(home, "undo", "--yes", cwd=project).rc == 0
    state = tree_state(project)
    assert state.pop("user.txt")[1] == b"mine\n"  # the user's file stays, untouched
    assert state == start


def test_an_edit_no_scan_saw_before_is_recorded_as_not_covered_and_undo_leaves_it(home: Path, project: Path) -> None:
    (project / "x.txt").write_bytes(b"edited by the agent\n")
    event = {
        "conversation_id": "c-late",
        "generation_id": "g-1",
        "hook_event_name": "afterFileEdit",
        "workspace_roots": [str(project)],
        "file_path": str(project / "x.txt"),
        "edits": [{"old_string": "old", "new_string": "edited by the agent"}],
    }
    send(home, project, event)  # hooks installed mid-turn: no prompt, so no scan before this edit
    (turn,) = run_cli(home, "log", "--json", cwd=project).json()["turns"]
    (call,) = turn["calls"]
    (change,) = call["changes"]
    assert change["path"] == "x.txt"
    shown = run_cli(home, "show", call["id"], cwd=project)
    assert (
        "no copy of what x.txt held before: the agent sends no event before an edit, and no scan had seen the file"
    ) in shown.out, shown.out
    run_cli(home, "undo", "--yes", cwd=project)
    assert (project / "x.txt").read_bytes() == b"edited by the agent\n"


def test_an_edit_outside_the_project_is_recorded_as_not_covered(home: Path, project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"edited by the agent\n")
    first, prompt = payloads("happy_path", project)[:2]
    send(home, project, first)
    send(home, project, prompt)
    send(home, project, {**prompt, "hook_event_name": "afterFileEdit", "file_path": str(outside), "edits": []})
    send(home, project, {**prompt, "hook_event_name": "stop", "status": "completed", "loop_count": 0})
    (turn,) = run_cli(home, "log", "--json", cwd=project).json()["turns"]
    (call,) = turn["calls"]
    assert [change["path"] for change in call["changes"]] == [str(outside)]
    shown = run_cli(home, "show", call["id"], cwd=project).out
    assert f"no copy of what {outside} held before" in shown, shown
    run_cli(home, "undo", "--yes", cwd=project)
    assert outside.read_bytes() == b"edited by the agent\n"


USER_HOOKS = {
    "version": 1,
    "hooks": {
        "beforeShellExecution": [{"command": "./hooks/guard.sh"}],
        "afterFileEdit": [{"command": "bun run hooks/format.ts"}],
    },
}


def test_install_cursor_keeps_the_users_hooks_and_uninstall_takes_exactly_its_own(home: Path, project: Path) -> None:
    hooks = project / ".cursor" / "hooks.json"
    hooks.parent.mkdir()
    hooks.write_text(json.dumps(USER_HOOKS))
    installed = run_cli(home, "install", "cursor", cwd=project)
    assert installed.rc == 0, installed
    assert installed.lines == [
        f"installed turnback's hooks in {hooks}: sessionStart, beforeSubmitPrompt, beforeShellExecution, "
        "afterShellExecution, afterFileEdit, stop, sessionEnd",
        "Cursor sends no event before an edit: an edit is undone to what turnback's last scan saw (each prompt, "
        "shell command and edit scans the project)",
    ], installed
    merged = json.loads(hooks.read_text())
    assert merged["version"] == 1
    assert merged["hooks"]["beforeShellExecution"][0] == USER_HOOKS["hooks"]["beforeShellExecution"][0]
    ours = {
        event: [h for h in entries if h["command"].endswith("hook cursor")]
        for event, entries in merged["hooks"].items()
    }
    assert {event: len(entries) for event, entries in ours.items()} == {
        "sessionStart": 1,
        "beforeSubmitPrompt": 1,
        "beforeShellExecution": 1,
        "afterShellExecution": 1,
        "afterFileEdit": 1,
        "stop": 1,
        "sessionEnd": 1,
    }
    assert run_cli(home, "install", "cursor", cwd=project).rc == 0
    assert json.loads(hooks.read_text()) == merged  # installing twice adds nothing

    removed = run_cli(home, "uninstall", "cursor", cwd=project)
    assert removed.rc == 0, removed
    assert json.loads(hooks.read_text()) == USER_HOOKS
    assert run_cli(home, "uninstall", "cursor", cwd=project).rc == 1


def test_a_cursor_event_of_another_kind_or_broken_input_does_nothing(home: Path, project: Path) -> None:
    for stdin in (
        b"not json",
        b"[]",
        json.dumps({"hook_event_name": "beforeReadFile", "file_path": "a.txt"}).encode(),
        json.dumps({"hook_event_name": "afterAgentResponse", "text": "hi"}).encode(),
    ):
        result = run_cli(home, "hook", "cursor", stdin=stdin, cwd=project)
        assert result.rc == 0 and result.out == "", result
    assert not home.exists() or not (home / "store.db").exists()


def test_turnbacks_own_trouble_never_blocks_cursor(home: Path, project: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the store should be\n")
    event = {
        "conversation_id": "c-1",
        "hook_event_name": "beforeSubmitPrompt",
        "workspace_roots": [str(project)],
        "prompt": "go",
    }
    result = run_cli(blocked, "hook", "cursor", stdin=json.dumps(event).encode(), cwd=project)
    assert result.rc == 0 and result.out == "", result
    (line,) = result.err.splitlines()
    assert line == f"turnback: hook failed: Not a directory: {blocked / 'config.toml'}; the agent goes on", result.err


def test_cursor_events_after_the_first_go_through_the_relay_and_record_the_same(home: Path, project: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import cli_env
    from tests.integrations.test_codex import CODEX_PROBE
    from tests.integrations.test_hook_relay import stop_relay, wait_for_relay

    probe = CODEX_PROBE.replace("'hook', 'codex'", "'hook', 'cursor'")
    (project / "b.txt").write_bytes(b"b1\nb2\nb3\n")
    start = tree_state(project)
    events = payloads("happy_path", project)
    first, prompt, edit = events[:3]
    stop = next(event for event in events if event["hook_event_name"] == "stop")
    try:
        send(home, project, first)  # no relay yet: this hook does the work and starts one
        wait_for_relay(home)
        for event in (prompt, edit, stop):
            if event["hook_event_name"] == "afterFileEdit":
                (project / "b.txt").write_bytes(b"b1\nB2\nb3\n")
            ran = subprocess.run(
                [sys.executable, "-c", probe],
                input=json.dumps(event).encode(),
                capture_output=True,
                cwd=project,
                env=cli_env(home),
                timeout=60,
            )
            assert ran.stderr.decode().split() == ["0"], ran  # handed over: the hook imported none of the engine
        (turn,) = run_cli(home, "log", "--json", cwd=project).json()["turns"]
        assert [change["path"] for call in turn["calls"] for change in call["changes"]] == ["b.txt"]
        assert run_cli(home, "undo", "--yes", cwd=project).rc == 0
        assert tree_state(project) == start
    finally:
        stop_relay(home)


def test_a_stop_the_user_aborted_ends_the_running_command_as_interrupted(home: Path, project: Path) -> None:
    start = tree_state(project)
    first, prompt = payloads("happy_path", project)[:2]
    shell_event = {**prompt, "hook_event_name": "beforeShellExecution", "command": "sleep 60 > int.txt"}
    for event in (first, prompt, shell_event):
        send(home, project, event)
    (project / "int.txt").write_bytes(b"")
    send(home, project, {**prompt, "hook_event_name": "stop", "status": "aborted", "loop_count": 0})
    (turn,) = run_cli(home, "log", "--json", cwd=project).json()["turns"]
    (call,) = turn["calls"]
    assert (turn["status"], call["status"]) == ("ended", "failed"), turn
    assert [change["path"] for change in call["changes"]] == ["int.txt"]
    assert "interrupted" in run_cli(home, "show", call["id"], cwd=project).out
    assert run_cli(home, "undo", "--yes", cwd=project).rc == 0
    assert tree_state(project) == start

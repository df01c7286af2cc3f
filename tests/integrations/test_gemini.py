"""Gemini CLI's hooks end to end, replaying what the real Gemini CLI 0.61 sent (payloads/gemini_*.json).

Each event is one ``turnback hook gemini`` process; the test does each
tool's effect itself right after its BeforeTool, as Gemini CLI does.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import Result, run_cli, tree_state

PAYLOADS = Path(__file__).resolve().parents[1] / "realclients" / "payloads"


def payloads(name: str, project: Path, home: Path) -> list[dict[str, Any]]:
    text = (PAYLOADS / f"gemini_{name}.json").read_text()
    text = text.replace("$PROJECT", str(project)).replace("$HOME", str(home.parent))
    return list(json.loads(text))


def send(home: Path, project: Path, event: dict[str, Any], env: dict[str, str] | None = None) -> Result:
    result = run_cli(home, "hook", "gemini", stdin=json.dumps(event).encode(), cwd=project, env=env)
    assert result.rc == 0 and result.err == "", result
    return result


def effects(project: Path) -> list[Callable[[], object]]:
    """Each BeforeTool's effect, in order (the missed replace changes nothing)."""

    def shell() -> None:
        (project / "c.txt").write_bytes(b"c\n")
        (project / "d.txt").unlink()

    return [
        lambda: (project / "a.txt").write_bytes(b"alpha\n"),
        lambda: (project / "b.txt").write_bytes(b"b1\nB2\nb3\n"),
        lambda: None,
        shell,
        lambda: (project / "a.txt").write_bytes(b"gamma\n"),
    ]


def test_the_real_gemini_session_replayed_is_recorded_and_undone_byte_for_byte(home: Path, project: Path) -> None:
    (project / "b.txt").write_bytes(b"b1\nb2\nb3\n")
    (project / "d.txt").write_bytes(b"doomed\n")
    start = tree_state(project)
    todo = iter(effects(project))
    states = []
    secret = {"GEMINI_API_KEY": "AIza-secret-key-never-kept"}  # Gemini CLI gives it to every hook
    for event in payloads("happy_path", project, home):
        result = send(home, project, event, env=secret)
        name = event["hook_event_name"]
        if name == "BeforeTool":
            next(todo)()
        elif name == "AfterAgent":
            states.append(tree_state(project))
            assert result.out == "" or set(json.loads(result.out)) == {"systemMessage"}, result
    first_summary = run_cli(home, "log", "--json", cwd=project).json()["turns"]
    turns = sorted(first_summary, key=lambda t: t["number"])
    assert [(t["message"], t["status"]) for t in turns] == [("first", "ended"), ("second", "ended")]
    calls = turns[0]["calls"]
    assert [(c["tool"], c["status"]) for c in calls] == [
        ("write_file", "done"),
        ("replace", "done"),
        ("replace", "failed"),
        ("exec", "done"),
    ], calls
    assert [sorted(change["path"] for change in c["changes"]) for c in calls] == [
        ["a.txt"],
        ["b.txt"],
        [],
        ["c.txt", "d.txt"],
    ]
    assert not any(c["cut_short"] for t in turns for c in t["calls"])
    assert b"AIza-secret-key-never-kept" not in b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())

    assert run_cli(home, "undo", "--yes", cwd=project).rc == 0
    assert tree_state(project) == states[0]
    assert run_cli(home, "undo", "--yes", cwd=project).rc == 0
    assert tree_state(project) == start


def test_the_same_call_twice_pairs_with_its_after_tool_in_order(home: Path, project: Path) -> None:
    session = {"session_id": "s-twice", "cwd": str(project), "transcript_path": str(project.parent / "t.json")}
    tool = {"tool_name": "write_file", "tool_input": {"file_path": "x.txt", "content": "x\n"}}
    send(home, project, {**session, "hook_event_name": "BeforeAgent", "prompt": "twice"})
    for _ in range(2):
        send(home, project, {**session, **tool, "hook_event_name": "BeforeTool"})
    (project / "x.txt").write_bytes(b"x\n")
    for _ in range(2):
        send(home, project, {**session, **tool, "hook_event_name": "AfterTool", "tool_response": {"llmContent": "ok"}})
    send(home, project, {**session, "hook_event_name": "AfterAgent", "prompt": "twice", "prompt_response": "done"})
    (turn,) = run_cli(home, "log", "--json", cwd=project).json()["turns"]
    assert [c["status"] for c in turn["calls"]] == ["done", "done"], turn
    assert not any(c["cut_short"] for c in turn["calls"])


def test_install_gemini_keeps_other_settings_and_uninstall_takes_exactly_its_own(home: Path, project: Path) -> None:
    settings = project / ".gemini" / "settings.json"
    settings.parent.mkdir()
    mine = {
        "model": {"name": "gemini-pro"},
        "hooks": {"BeforeTool": [{"hooks": [{"type": "command", "command": "guard"}]}]},
    }
    settings.write_text(json.dumps(mine))
    installed = run_cli(home, "install", "gemini", cwd=project)
    assert installed.rc == 0, installed
    assert installed.lines[1] == (
        f"Gemini CLI runs a project's hooks only in a trusted folder: start gemini in {project} and trust it when "
        "it asks (or /permissions)"
    )
    merged = json.loads(settings.read_text())
    assert merged["model"] == mine["model"] and merged["hooks"]["BeforeTool"][0] == mine["hooks"]["BeforeTool"][0]
    ours = {
        event: [
            (g.get("matcher"), h["timeout"]) for g in groups for h in g["hooks"] if h["command"].endswith("hook gemini")
        ]
        for event, groups in merged["hooks"].items()
    }
    tools = "write_file|replace|run_shell_command"
    assert ours == {
        "SessionStart": [(None, 60000)],
        "BeforeAgent": [(None, 60000)],
        "BeforeTool": [(tools, 60000)],
        "AfterTool": [(tools, 60000)],
        "AfterAgent": [(None, 60000)],
        "SessionEnd": [(None, 60000)],
    }
    assert run_cli(home, "uninstall", "gemini", cwd=project).rc == 0
    assert json.loads(settings.read_text()) == mine


def test_events_before_every_model_call_are_ignored_without_the_store(home: Path, project: Path) -> None:
    for name in ("BeforeModel", "BeforeToolSelection", "AfterModel", "PreCompress"):
        result = run_cli(home, "hook", "gemini", stdin=json.dumps({"hook_event_name": name}).encode(), cwd=project)
        assert (result.rc, result.out, result.err) == (0, "", ""), result
    assert not home.exists() or not any(home.iterdir())


# Runs the hook as the child of a process that stands for Gemini CLI: with a terminal on its stdin (an
# interactive run) or not (a headless one, as ``gemini -p``).
AS_GEMINI = (
    "import os, subprocess, sys\n"
    "event = sys.stdin.buffer.read()\n"
    "if sys.argv[1] == 'terminal':\n"
    "    master, terminal = os.openpty()\n"
    "    os.dup2(terminal, 0)\n"
    "sys.exit(subprocess.run(sys.argv[2:], input=event).returncode)\n"
)
UNCOVERED = (
    "turnback cannot keep a copy of big.bin (1.5 MiB, over store.max_mib (1 MiB)), so this change could not be undone."
)


def test_a_write_over_the_cap_asks_the_user_in_an_interactive_run_and_is_refused_in_a_headless_one(
    home: Path, project: Path
) -> None:
    """Gemini CLI's BeforeTool takes "ask", and asks the user, showing why (the call is then not covered); a
    headless run would wait for that answer for good, so there the call is refused with the reason."""
    assert run_cli(home, "config", "set", "store.max_mib", "1", cwd=project).rc == 0
    big = project / "big.bin"
    big.write_bytes(os.urandom(3 << 19))  # 1.5 MiB: over the cap, so turnback cannot keep a copy
    session = {"session_id": "s-big", "cwd": str(project), "transcript_path": str(project.parent / "t.json")}
    tool = {"tool_name": "write_file", "tool_input": {"file_path": "big.bin", "content": "small\n"}}

    def before_tool(run: str) -> Any:
        event = json.dumps({**session, **tool, "hook_event_name": "BeforeTool"}).encode()
        result = run_cli(
            home, "hook", "gemini", stdin=event, cwd=project, prefix=[sys.executable, "-c", AS_GEMINI, run]
        )
        assert result.rc == 0 and result.err == "", result
        return json.loads(result.out)

    send(home, project, {**session, "hook_event_name": "BeforeAgent", "prompt": "shrink it"})
    refused = UNCOVERED + (
        " It refused this call: nothing was changed. To let it through, raise the cap (turnback config set "
        "store.max_mib MIB) and try again, or make the change yourself."
    )
    assert before_tool("headless") == {"decision": "deny", "reason": refused}
    asked = UNCOVERED + " Allow it only if you need no way back."
    assert before_tool("terminal") == {"decision": "ask", "reason": asked, "systemMessage": asked}
    big.write_bytes(b"small\n")  # the user allowed it
    send(home, project, {**session, **tool, "hook_event_name": "AfterTool", "tool_response": {"llmContent": "ok"}})
    (turn,) = run_cli(home, "log", "--json", cwd=project).json()["turns"]
    (call,) = turn["calls"]  # the refused call never ran: only the one the user allowed
    shown = run_cli(home, "show", call["id"], cwd=project).out
    assert "modified big.bin (not covered: 1.5 MiB, over store.max_mib (1 MiB))" in shown, shown


def test_a_write_into_the_store_is_denied_even_where_the_user_could_be_asked(home: Path, project: Path) -> None:
    """A path turnback's own file tools refuse is no question for the user: denied in both runs, saying why."""
    session = {"session_id": "s-store", "cwd": str(project), "transcript_path": str(project.parent / "t.json")}
    send(home, project, {**session, "hook_event_name": "BeforeAgent", "prompt": "write in the store"})
    target = home / "notes.txt"
    tool = {"tool_name": "write_file", "tool_input": {"file_path": str(target), "content": "x\n"}}
    event = json.dumps({**session, **tool, "hook_event_name": "BeforeTool"}).encode()
    reason = (
        f"turnback refused this call: {target} is inside turnback's store, which the agent's tools never touch. "
        "Nothing was changed. turnback could not record this write or take it back."
    )
    for run in ("terminal", "headless"):
        result = run_cli(
            home, "hook", "gemini", stdin=event, cwd=project, prefix=[sys.executable, "-c", AS_GEMINI, run]
        )
        assert result.rc == 0 and result.err == "", result
        assert json.loads(result.out) == {"decision": "deny", "reason": reason}, run
    assert not target.exists()
    (turn,) = run_cli(home, "log", "--json", cwd=project).json()["turns"]
    assert turn["calls"] == []


def test_status_says_the_gemini_hooks_have_not_run_until_a_hook_of_theirs_did(home: Path, project: Path) -> None:
    settings = project / ".gemini" / "settings.json"
    assert run_cli(home, "install", "gemini", cwd=project).rc == 0
    assert run_cli(home, "session", "new", "--title", "Gemini CLI", cwd=project).rc == 0
    status = run_cli(home, "status", cwd=project)
    assert status.lines[0] == (
        f"the Gemini CLI hooks in {settings} have not run yet: start gemini in the project and trust the folder "
        "when it asks (or /permissions)"
    ), status
    assert [n["code"] for n in run_cli(home, "status", "--json", cwd=project).json()["notes"]] == [
        "agent_gemini_hooks_not_fired"
    ]
    send(home, project, payloads("happy_path", project, home)[0])  # SessionStart: a hook ran
    assert "have not run yet" not in run_cli(home, "status", cwd=project).out

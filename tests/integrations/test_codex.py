"""Codex CLI's hooks end to end, replaying what the real Codex 0.171 sent (tests/realclients/payloads/codex_*.json).

Each event is one ``turnback hook codex`` process, as Codex runs it; the
test does each tool's effect itself right after its PreToolUse (as Codex
does), and everything the user does afterwards goes through the real CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import Result, cli_env, run_cli, tree_state

PAYLOADS = Path(__file__).resolve().parents[1] / "realclients" / "payloads"


def payloads(name: str, project: Path, home: Path) -> list[dict[str, Any]]:
    text = (PAYLOADS / f"codex_{name}.json").read_text()
    text = text.replace("$PROJECT", str(project)).replace("$HOME", str(home.parent))
    return list(json.loads(text))


def send(home: Path, project: Path, event: dict[str, Any]) -> Result:
    result = run_cli(home, "hook", "codex", stdin=json.dumps(event).encode(), cwd=project)
    assert result.rc == 0 and result.err == "", result
    return result


def replay(
    home: Path, project: Path, events: list[dict[str, Any]], effects: dict[str, Callable[[], object]]
) -> list[Result]:
    """Send every event; after a PreToolUse, do that call's effect (by its tool_use_id)."""
    results = []
    for event in events:
        results.append(send(home, project, event))
        if event["hook_event_name"] == "PreToolUse":
            effects.get(event["tool_use_id"], lambda: None)()
    return results


def happy_path_project(project: Path) -> None:
    (project / "b.txt").write_bytes(b"b1\nb2\nb3\n")
    (project / "d.txt").write_bytes(b"doomed\n")
    (project / "e.txt").write_bytes(b"e\n")
    (project / "m.txt").write_bytes(b"m1\n")


def happy_path_effects(project: Path) -> dict[str, Callable[[], object]]:
    def shell() -> None:
        (project / "c.txt").write_bytes(b"c\n")
        (project / "d.txt").unlink()

    def patch() -> None:
        (project / "new.txt").write_bytes(b"hello\n")
        (project / "b.txt").write_bytes(b"b1\nB2\nb3\n")
        (project / "e.txt").unlink()
        (project / "m.txt").rename(project / "moved.txt")
        (project / "moved.txt").write_bytes(b"M1\n")

    return {
        "call_2": shell,
        "call_4": patch,
        # call_6: the patch fails (no PostToolUse): nothing changes
        "call_8": lambda: (project / "viashell.txt").write_bytes(b"s\n"),  # apply_patch through the shell
        "call_12": lambda: (project / "new.txt").write_bytes(b"hello again\n"),
    }


def test_the_real_codex_session_replayed_is_recorded_call_by_call_and_undone_byte_for_byte(
    home: Path, project: Path
) -> None:
    happy_path_project(project)
    start = tree_state(project)
    events = payloads("happy_path", project, home)
    second = next(i for i, e in enumerate(events) if e["hook_event_name"] == "SessionStart" and i > 0)
    one = replay(home, project, events[:second], happy_path_effects(project))
    after_one = tree_state(project)
    stop = next(r for r, e in zip(one, events, strict=True) if e["hook_event_name"] == "Stop")
    assert json.loads(stop.out) == {"systemMessage": "8 files changed, +5 -4"}
    replay(home, project, events[second:], happy_path_effects(project))

    log = run_cli(home, "log", "--json", cwd=project)
    assert log.rc == 0, log
    turns = sorted(log.json()["turns"], key=lambda t: t["number"])
    assert [(t["message"], t["status"]) for t in turns] == [("first", "ended"), ("second", "ended")]
    calls = turns[0]["calls"]
    assert [c["tool"] for c in calls] == ["exec", "apply_patch", "apply_patch", "exec"], calls
    files = [sorted(change["path"] for change in c["changes"]) for c in calls]
    assert files == [
        ["c.txt", "d.txt"],
        ["b.txt", "e.txt", "m.txt", "moved.txt", "new.txt"],
        [],
        ["viashell.txt"],
    ], files
    assert [c["status"] for c in calls] == ["done", "done", "failed", "done"], calls
    shown = run_cli(home, "show", calls[2]["id"], cwd=project)
    assert "the patch failed: Codex sent no PostToolUse" in shown.out, shown.out
    assert not any(c["cut_short"] for t in turns for c in t["calls"])

    assert run_cli(home, "undo", "--yes", cwd=project).rc == 0
    assert tree_state(project) == after_one
    assert run_cli(home, "undo", "--yes", cwd=project).rc == 0
    assert tree_state(project) == start


def test_an_interrupt_ends_the_turn_and_its_command(home: Path, project: Path) -> None:
    start = tree_state(project)
    effects = {"call_2": lambda: (project / "int.txt").write_bytes(b"i\n")}
    replay(home, project, payloads("interrupt", project, home), effects)
    log = run_cli(home, "log", "--json", cwd=project)
    (turn,) = log.json()["turns"]
    (call,) = turn["calls"]
    assert (turn["status"], call["status"]) == ("ended", "failed"), turn
    assert [change["path"] for change in call["changes"]] == ["int.txt"]
    assert "interrupted" in run_cli(home, "show", call["id"], cwd=project).out
    assert run_cli(home, "undo", "--yes", cwd=project).rc == 0
    assert tree_state(project) == start


USER_HOOKS = {
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-guard", "timeout": 5}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-me"}]}],
    }
}


def test_install_codex_keeps_the_users_hooks_and_uninstall_takes_exactly_its_own(home: Path, project: Path) -> None:
    hooks = project / ".codex" / "hooks.json"
    hooks.parent.mkdir()
    hooks.write_text(json.dumps(USER_HOOKS))
    installed = run_cli(home, "install", "codex", cwd=project)
    assert installed.rc == 0, installed
    assert installed.lines[1].startswith("Codex runs them only once you trust them: start codex in "), installed
    merged = json.loads(hooks.read_text())["hooks"]
    assert merged["PreToolUse"][0] == USER_HOOKS["hooks"]["PreToolUse"][0]
    assert merged["Stop"][0] == USER_HOOKS["hooks"]["Stop"][0]
    ours = {
        event: [
            (g.get("matcher"), h["timeout"]) for g in groups for h in g["hooks"] if h["command"].endswith("hook codex")
        ]
        for event, groups in merged.items()
    }
    assert ours == {
        "SessionStart": [(None, 60)],
        "UserPromptSubmit": [(None, 60)],
        "PreToolUse": [("Bash|apply_patch", 60)],
        "PostToolUse": [("Bash|apply_patch", 60)],
        "Interrupt": [(None, 3)],
        "PreCompact": [(None, 60)],
        "PostCompact": [(None, 60)],
        "Stop": [(None, 60)],
        "SessionEnd": [(None, 3)],
    }
    again = run_cli(home, "install", "codex", cwd=project)
    assert again.rc == 0 and json.loads(hooks.read_text())["hooks"] == merged  # installing twice adds nothing

    status = run_cli(home, "status", cwd=project)
    assert status.lines[0] == (
        f'the Codex hooks in {hooks} have not run yet: trust them in Codex (/hooks, then "Trust all and continue")'
    ), status

    removed = run_cli(home, "uninstall", "codex", cwd=project)
    assert removed.rc == 0, removed
    assert json.loads(hooks.read_text()) == USER_HOOKS
    assert run_cli(home, "uninstall", "codex", cwd=project).rc == 1


def test_a_hook_event_codex_sends_for_other_tools_or_broken_input_does_nothing(home: Path, project: Path) -> None:
    for stdin in (
        b"not json",
        b"[]",
        json.dumps({"hook_event_name": "PermissionRequest", "tool_name": "Bash"}).encode(),
    ):
        result = run_cli(home, "hook", "codex", stdin=stdin, cwd=project)
        assert result.rc == 0 and result.out == "", result
    assert not (home / "store.db").exists() or run_cli(home, "sessions", cwd=project).out.count("Codex") == 0


CODEX_PROBE = (
    "import sys\n"
    "sys.argv = ['turnback', 'hook', 'codex']\n"
    "from turnback.cli import entry\n"
    "rc = entry()\n"
    "heavy = ('turnback.engine', 'turnback.store', 'sqlite3', 'cryptography', 'zstandard')\n"
    "print(rc, *[name for name in heavy if name in sys.modules], file=sys.stderr)\n"
)


def test_codex_events_after_the_first_go_through_the_relay_and_record_the_same(home: Path, project: Path) -> None:
    from tests.integrations.test_hook_relay import stop_relay, wait_for_relay

    start = tree_state(project)
    first, *rest = payloads("interrupt", project, home)
    try:
        send(home, project, first)  # no relay yet: this hook does the work and starts one
        wait_for_relay(home)
        for event in rest:
            ran = subprocess.run(
                [sys.executable, "-c", CODEX_PROBE],
                input=json.dumps(event).encode(),
                capture_output=True,
                cwd=project,
                env=cli_env(home),
                timeout=60,
            )
            assert ran.stderr.decode().split() == ["0"], ran  # handed over: the hook imported none of the engine
            if event["hook_event_name"] == "PreToolUse":
                (project / "int.txt").write_bytes(b"i\n")
        (turn,) = run_cli(home, "log", "--json", cwd=project).json()["turns"]
        assert [change["path"] for call in turn["calls"] for change in call["changes"]] == ["int.txt"]
        assert run_cli(home, "undo", "--yes", cwd=project).rc == 0
        assert tree_state(project) == start
    finally:
        stop_relay(home)


def patch_in_a_turn(home: Path, project: Path) -> dict[str, Any]:
    """The real session's start and prompt sent; its apply_patch event, to send changed."""
    events = payloads("happy_path", project, home)
    send(home, project, events[0])
    send(home, project, events[1])
    return next(e for e in events if e.get("tool_name") == "apply_patch")


def test_a_patch_over_the_cap_is_refused_with_the_reason_and_leaves_no_call(home: Path, project: Path) -> None:
    """Codex takes no "ask" from a PreToolUse hook: the patch is denied, saying why and how to let it through."""
    assert run_cli(home, "config", "set", "store.max_mib", "1", cwd=project).rc == 0
    big = project / "big.bin"
    big.write_bytes(os.urandom(3 << 19))  # 1.5 MiB: over the cap, so turnback cannot keep a copy
    patch = patch_in_a_turn(home, project)
    over = {**patch, "tool_use_id": "call_big"}
    over["tool_input"] = {"command": "*** Begin Patch\n*** Delete File: big.bin\n*** End Patch\n"}
    output = json.loads(send(home, project, over).out)["hookSpecificOutput"]
    assert output["hookEventName"] == "PreToolUse" and output["permissionDecision"] == "deny", output
    assert output["permissionDecisionReason"] == (
        "turnback cannot keep a copy of big.bin (1.5 MiB, over store.max_mib (1 MiB)), so this change could not be "
        "undone. It refused this call: nothing was changed. To let it through, raise the cap (turnback config set "
        "store.max_mib MIB) and try again, or make the change yourself."
    )
    small = {**patch, "tool_use_id": "call_small"}
    small["tool_input"] = {"command": "*** Begin Patch\n*** Add File: small.txt\n+s\n*** End Patch\n"}
    assert send(home, project, small).out == ""  # a patch turnback can keep a copy for goes ahead
    (turn,) = run_cli(home, "log", "--json", cwd=project).json()["turns"]
    assert [c["tool"] for c in turn["calls"]] == ["apply_patch"], turn  # the refused one never ran


def test_a_patch_into_a_git_folder_is_denied_saying_why_and_leaves_no_call(home: Path, project: Path) -> None:
    (project / ".git").mkdir(exist_ok=True)
    patch = patch_in_a_turn(home, project)
    into_git = {**patch, "tool_use_id": "call_git"}
    into_git["tool_input"] = {"command": "*** Begin Patch\n*** Add File: .git/hooks/pre-commit\n+x\n*** End Patch\n"}
    output = json.loads(send(home, project, into_git).out)["hookSpecificOutput"]
    assert output == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": (
            "turnback refused this call: .git/hooks/pre-commit is inside a .git folder, which turnback never "
            "writes. Nothing was changed. turnback could not record this write or take it back."
        ),
    }, output
    assert run_cli(home, "log", "--json", cwd=project).json()["turns"][0]["calls"] == []


def test_status_says_the_codex_hooks_have_not_run_until_a_hook_of_theirs_did(home: Path, project: Path) -> None:
    hooks = project / ".codex" / "hooks.json"
    assert run_cli(home, "install", "codex", cwd=project).rc == 0
    line = f'the Codex hooks in {hooks} have not run yet: trust them in Codex (/hooks, then "Trust all and continue")'
    # A session merely titled "Codex" is no sign the hooks run: only the mark a hook leaves is.
    assert run_cli(home, "session", "new", "--title", "Codex", cwd=project).rc == 0
    assert run_cli(home, "status", cwd=project).lines[0] == line
    shown = run_cli(home, "status", "--json", cwd=project).json()["notes"]
    assert shown == [{"code": "status_codex_hooks_not_fired", "params": {"path": str(hooks)}, "message": line}]
    send(home, project, payloads("happy_path", project, home)[0])  # SessionStart: a hook ran
    status = run_cli(home, "status", cwd=project)
    assert status.rc == 0 and "have not run yet" not in status.out, status
    assert run_cli(home, "status", "--json", cwd=project).json()["notes"] == []

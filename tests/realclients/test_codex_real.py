"""The real Codex CLI (npm ``@openai/codex``, its native binary) with turnback's hooks, offline.

Each test scripts the model's replies (fakeresponses on 127.0.0.1), lets
Codex run its real tools (``exec_command``, ``apply_patch``) in a temp
project, then runs the real ``turnback undo`` and asserts on the bytes on
disk. The hook payloads Codex sent are kept in payloads/codex_*.json
(``TURNBACK_RECORD_PAYLOADS=1``) and replayed by
tests/integrations/test_codex.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

from tests.conftest import run_cli, tree_state
from tests.realclients.codexcli import RealCodex
from tests.realclients.conftest import kill_commands_of
from tests.realclients.fakeresponses import Patch, Say, Shell

PAYLOADS = Path(__file__).resolve().parent / "payloads"


def record(codex: RealCodex, name: str) -> list[dict[str, Any]]:
    """The hook payloads of this run; written to payloads/codex_NAME.json, temp paths and ids scrubbed."""
    events = codex.events()
    if os.environ.get("TURNBACK_RECORD_PAYLOADS") == "1":
        text = json.dumps(events, indent=2)
        text = text.replace(str(codex.project), "$PROJECT").replace(str(codex.project.parent), "$HOME")
        found: dict[str, str] = {}
        for label, key in (("SESSION", "session_id"), ("TURN", "turn_id")):
            for event in events:
                value = event.get(key)
                if isinstance(value, str) and value and value not in found:
                    found[value] = f"${label}_{sum(v.startswith(f'${label}_') for v in found.values()) + 1}"
        for value, placeholder in found.items():
            text = text.replace(value, placeholder)
        text = re.sub(r"rollout-[0-9T-]+-", "rollout-$TIME-", text)
        (PAYLOADS / f"codex_{name}.json").write_text(text + "\n")
    return events


def test_install_says_how_to_trust_and_untrusted_hooks_never_run(codex: RealCodex, project: Path) -> None:
    told = codex.install_output.lines
    events = "SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Interrupt, PreCompact, PostCompact, Stop, "
    events += "SessionEnd"
    assert told[0] == f"installed turnback's hooks in {codex.hooks_file}: {events}"
    assert told[1] == (
        f"Codex runs them only once you trust them: start codex in {project}, type /hooks and choose "
        '"Trust all and continue" (for a project\'s hooks, trust the folder when Codex asks)'
    )
    status = run_cli(codex.home, "status", cwd=project)
    assert status.lines[0] == (
        f"the Codex hooks in {codex.hooks_file} have not run yet: trust them in Codex "
        '(/hooks, then "Trust all and continue")'
    ), status
    assert codex.hooks() == []  # an untrusted folder's .codex/ is not even read
    codex.trust_folder()
    assert {hook["trustStatus"] for hook in codex.hooks()} == {"untrusted"}
    codex.api.script[:] = [Shell("printf 'x\\n' > untrusted.txt"), Say("done")]
    assert codex.exec("go").rc == 0
    assert (project / "untrusted.txt").read_bytes() == b"x\n"
    assert codex.events() == []  # Codex skipped every hook without a word
    codex.trust_hooks()
    assert {hook["trustStatus"] for hook in codex.hooks()} == {"trusted"}
    codex.api.script[:] = [Say("hello")]
    assert codex.exec("again").rc == 0
    assert "SessionStart" in codex.names()
    status = run_cli(codex.home, "status", cwd=project)
    assert status.rc == 0 and "have not run yet" not in status.out, status


def test_two_turns_of_shell_and_apply_patch_are_undone_byte_for_byte(codex: RealCodex, project: Path) -> None:
    (project / "b.txt").write_bytes(b"b1\nb2\nb3\n")
    (project / "d.txt").write_bytes(b"doomed\n")
    (project / "e.txt").write_bytes(b"e\n")
    (project / "m.txt").write_bytes(b"m1\n")
    codex.trust()
    start = tree_state(project)
    codex.api.script[:] = [
        Shell("printf 'c\\n' > c.txt && rm d.txt"),
        Patch(
            "*** Begin Patch\n*** Add File: new.txt\n+hello\n*** Update File: b.txt\n@@\n-b2\n+B2\n"
            "*** Delete File: e.txt\n*** Update File: m.txt\n*** Move to: moved.txt\n@@\n-m1\n+M1\n*** End Patch\n"
        ),
        Patch("*** Begin Patch\n*** Update File: b.txt\n@@\n-not there\n+x\n*** End Patch\n"),  # fails
        Shell("apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: viashell.txt\n+s\n*** End Patch\nEOF"),
        Say("Turn one done."),
    ]
    first = codex.exec("first")
    assert first.rc == 0, first
    items = [m["item"] for m in first.messages if m.get("type") == "item.completed"]
    assert [item for item in items if item["type"] == "error"] == [], items  # no hook's output was refused
    assert (project / "c.txt").read_bytes() == b"c\n" and not (project / "d.txt").exists()
    assert (project / "new.txt").read_bytes() == b"hello\n"
    assert (project / "b.txt").read_bytes() == b"b1\nB2\nb3\n"
    assert not (project / "e.txt").exists() and not (project / "m.txt").exists()
    assert (project / "moved.txt").read_bytes() == b"M1\n"
    assert (project / "viashell.txt").read_bytes() == b"s\n"
    after_one = tree_state(project)

    codex.api.script[:] = [
        Patch("*** Begin Patch\n*** Update File: new.txt\n@@\n-hello\n+hello again\n*** End Patch\n"),
        Say("Turn two done."),
    ]
    second = codex.exec("second", resume=first.thread_id())
    assert second.rc == 0, second
    assert (project / "new.txt").read_bytes() == b"hello again\n"
    events = record(codex, "happy_path")
    names = [e["hook_event_name"] for e in events]
    assert [n for n in names if n in ("UserPromptSubmit", "Stop")] == ["UserPromptSubmit", "Stop"] * 2
    posts = [e for e in events if e["hook_event_name"] == "PostToolUse"]
    assert all(isinstance(e["tool_response"], str) for e in posts)  # no exit code anywhere
    assert len(posts) == 3  # the failed patch and the patch through the shell got none

    log = run_cli(codex.home, "log", "--json", cwd=project)
    assert log.rc == 0, log
    turns = log.json()["turns"]
    assert len(turns) == 2
    undone = run_cli(codex.home, "undo", "--yes", cwd=project)
    assert undone.rc == 0, undone
    assert tree_state(project) == after_one
    undone = run_cli(codex.home, "undo", "--yes", cwd=project)
    assert undone.rc == 0, undone
    assert tree_state(project) == start


def test_an_interrupted_command_is_recorded_and_undone(codex: RealCodex, project: Path) -> None:
    codex.trust()
    start = tree_state(project)
    codex.api.script[:] = [Shell("printf 'i\\n' > int.txt && sleep 60"), Say("never")]
    proc = codex.start("run it")
    try:
        deadline = time.monotonic() + 60
        while not (project / "int.txt").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the command never ran"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        kill_commands_of("sleep 60")
    events = record(codex, "interrupt")
    names = [e["hook_event_name"] for e in events]
    assert "Interrupt" in names and "PostToolUse" not in names and "Stop" not in names, names
    log = run_cli(codex.home, "log", "--json", cwd=project)
    assert log.rc == 0, log
    (turn,) = log.json()["turns"]
    assert turn["status"] != "running", turn
    undone = run_cli(codex.home, "undo", "--yes", cwd=project)
    assert undone.rc == 0, undone
    assert tree_state(project) == start


def test_a_patch_turnback_cannot_keep_a_copy_for_is_refused_and_codex_obeys(codex: RealCodex, project: Path) -> None:
    """Codex takes no "ask" from a hook: turnback denies the patch with the reason, and Codex does not apply it
    but hands the reason to the model."""
    assert run_cli(codex.home, "config", "set", "store.max_mib", "1", cwd=project).rc == 0
    big = project / "big.bin"
    big.write_bytes(os.urandom(3 << 19))  # 1.5 MiB: over the cap
    kept = big.read_bytes()
    codex.trust()
    codex.api.script[:] = [Patch("*** Begin Patch\n*** Delete File: big.bin\n*** End Patch\n"), Say("Refused.")]
    run = codex.exec("delete it")
    assert run.rc == 0, run
    assert big.read_bytes() == kept  # Codex did not apply it
    told = json.dumps([r.get("body") for r in codex.api.requests])
    assert "It refused this call: nothing was changed." in told, told[-2000:]  # the model was told why
    log = run_cli(codex.home, "log", "--json", cwd=project).json()
    assert [c for t in log["turns"] for c in t["calls"]] == [], log  # the refused patch never ran

"""The real Gemini CLI (npm ``@google/gemini-cli``) with turnback's hooks, offline.

The model's replies are scripted (fakegemini on 127.0.0.1); Gemini CLI runs
its real tools (``write_file``, ``replace``, ``run_shell_command``) in a temp
project, then the real ``turnback undo`` restores it. The payloads Gemini CLI
sent are kept in payloads/gemini_*.json (``TURNBACK_RECORD_PAYLOADS=1``) and
replayed by tests/integrations/test_gemini.py.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from tests.conftest import run_cli, tree_state
from tests.realclients.fakegemini import Call, Text
from tests.realclients.geminicli import RealGemini

PAYLOADS = Path(__file__).resolve().parent / "payloads"


def record(gemini: RealGemini, name: str) -> list[dict[str, Any]]:
    """The hook payloads of this run; written to payloads/gemini_NAME.json, temp paths, ids and times scrubbed."""
    events = gemini.events()
    if os.environ.get("TURNBACK_RECORD_PAYLOADS") == "1":
        text = json.dumps(events, indent=2)
        text = text.replace(str(gemini.project), "$PROJECT").replace(str(gemini.project.parent), "$HOME")
        sessions: dict[str, str] = {}
        for event in events:
            value = event.get("session_id")
            if isinstance(value, str) and value not in sessions:
                sessions[value] = f"$SESSION_{len(sessions) + 1}"
        for value, placeholder in sessions.items():
            text = text.replace(value, placeholder)
        text = re.sub(r'"timestamp": "[^"]*"', '"timestamp": "$TIME"', text)
        text = re.sub(r"PGID: \d+", "PGID: $PGID", text)
        text = re.sub(r"session-[0-9T-]+[0-9a-f]*\.jsonl?", "session-$TIME.json", text)
        (PAYLOADS / f"gemini_{name}.json").write_text(text + "\n")
    return events


def test_two_turns_of_write_replace_and_shell_are_undone_byte_for_byte(gemini: RealGemini, project: Path) -> None:
    (project / "b.txt").write_bytes(b"b1\nb2\nb3\n")
    (project / "d.txt").write_bytes(b"doomed\n")
    start = tree_state(project)
    gemini.api.script[:] = [
        Call("write_file", {"file_path": "a.txt", "content": "alpha\n"}),
        Call("replace", {"file_path": "b.txt", "instruction": "B2", "old_string": "b2", "new_string": "B2"}),
        Call("replace", {"file_path": "b.txt", "instruction": "miss", "old_string": "not there", "new_string": "x"}),
        Call("run_shell_command", {"command": "printf 'c\\n' > c.txt && rm d.txt", "description": "make c, drop d"}),
        Text("Turn one done."),
    ]
    first = gemini.run("first")
    assert first.returncode == 0, first
    assert (project / "a.txt").read_bytes() == b"alpha\n"
    assert (project / "b.txt").read_bytes() == b"b1\nB2\nb3\n"
    assert (project / "c.txt").read_bytes() == b"c\n" and not (project / "d.txt").exists()
    after_one = tree_state(project)
    gemini.api.script[:] = [
        Call("replace", {"file_path": "a.txt", "instruction": "gamma", "old_string": "alpha", "new_string": "gamma"}),
        Text("Turn two done."),
    ]
    second = gemini.run("second", "--resume", "latest")
    assert second.returncode == 0, second
    assert (project / "a.txt").read_bytes() == b"gamma\n"
    events = record(gemini, "happy_path")
    names = [e["hook_event_name"] for e in events]
    assert [n for n in names if n in ("BeforeAgent", "AfterAgent")] == ["BeforeAgent", "AfterAgent"] * 2
    assert "turnback: hook failed" not in (first.stderr + second.stderr).decode(), first.stderr

    log = run_cli(gemini.home, "log", "--json", cwd=project)
    assert log.rc == 0, log
    assert len(log.json()["turns"]) == 2, log.json()
    assert run_cli(gemini.home, "undo", "--yes", cwd=project).rc == 0
    assert tree_state(project) == after_one
    assert run_cli(gemini.home, "undo", "--yes", cwd=project).rc == 0
    assert tree_state(project) == start


def test_a_write_turnback_cannot_keep_a_copy_for_is_refused_in_a_headless_run_and_gemini_obeys(
    gemini: RealGemini, project: Path
) -> None:
    """A headless run (``-p``) cannot ask the user: Gemini CLI 0.61 given "ask" there waits for an answer for
    good (tried: the run hung until killed), so turnback answers "deny" with the reason, and Gemini CLI does
    not write. (An interactive run gets "ask": tests/integrations/test_gemini.py.)"""
    assert run_cli(gemini.home, "config", "set", "store.max_mib", "1", cwd=project).rc == 0
    big = project / "big.bin"
    big.write_bytes(os.urandom(3 << 19))  # 1.5 MiB: over the cap
    kept = big.read_bytes()
    gemini.api.script[:] = [Call("write_file", {"file_path": "big.bin", "content": "small\n"}), Text("Stopped.")]
    run = gemini.run("shrink it")
    assert run.returncode == 0, run
    assert big.read_bytes() == kept, run  # refused: not written
    assert "turnback: hook failed" not in run.stderr.decode(), run.stderr
    names = [e["hook_event_name"] for e in gemini.events()]
    assert "BeforeTool" in names and "AfterTool" not in names, names  # the tool never ran
    log = run_cli(gemini.home, "log", "--json", cwd=project).json()
    assert [c for t in log["turns"] for c in t["calls"]] == [], log

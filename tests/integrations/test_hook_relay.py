"""The hook relay: after the first event, a long-lived process handles Claude Code's hook events.

Every test plays Claude Code's part with real hook processes (``turnback hook
claude-code``) and checks what a user relies on: each event is recorded
whichever process handles it, a hook process that hands its event over
imports none of the engine, and a relay that is gone, idle, or keyed
differently changes nothing but who does the work.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import cli_env
from tests.integrations.test_claude_code import Claude, cli, log_json
from turnback.hooks.relay import address

PEERCRED = struct.Struct("3i")


def relay_pid(home: Path) -> int | None:
    """The pid of the relay serving *home*, asked of its socket; None when none listens."""
    where = address(str(home))
    assert where is not None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(where)
    except OSError:
        return None
    try:
        pid, _uid, _gid = PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEERCRED.size))
        return int(pid)
    finally:
        sock.close()


def wait_for_relay(home: Path, *, other_than: int | None = None, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = relay_pid(home)
        if pid is not None and pid != other_than:
            return pid
        time.sleep(0.05)
    raise AssertionError(f"no hook relay for {home} after {timeout} s")


def stop_relay(home: Path) -> None:
    pid = relay_pid(home)
    if pid is not None:
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while relay_pid(home) == pid and time.monotonic() < deadline:
            time.sleep(0.02)


def ended(pid: int, timeout: float = 15.0) -> bool:
    """Whether process *pid* ends within *timeout* (watched without connecting: a connection is an event)."""
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return not Path(f"/proc/{pid}").exists()


PROBE = (
    "import sys\n"
    "sys.argv = ['turnback', 'hook', 'claude-code']\n"
    "from turnback.cli import entry\n"
    "rc = entry()\n"
    "heavy = ('turnback.engine', 'turnback.store', 'sqlite3', 'cryptography', 'zstandard')\n"
    "print(rc, *[name for name in heavy if name in sys.modules], file=sys.stderr)\n"
)


def probe_hook(home: Path, project: Path, event: bytes) -> tuple[str, list[str]]:
    """Run one hook as the console script does; what it printed, and the heavy modules it imported."""
    ran = subprocess.run(
        [sys.executable, "-c", PROBE], input=event, capture_output=True, cwd=project, env=cli_env(home), timeout=60
    )
    *lines, last = ran.stderr.decode().splitlines()
    assert lines == [], lines
    rc, *heavy = last.split()
    assert rc == "0"
    return ran.stdout.decode(), heavy


def test_events_after_the_first_go_through_the_relay_and_record_the_same(home: Path, project: Path) -> None:
    claude = Claude(home, project)
    try:
        claude.prompt("write two files")  # no relay yet: this hook does the work and starts one
        wait_for_relay(home)
        first = project / "first.txt"
        use = "toolu_relay_1"
        tool_input = {"file_path": str(first), "content": "one\n"}
        out, heavy = probe_hook(
            home, project, claude.payload("PreToolUse", tool_name="Write", tool_input=tool_input, tool_use_id=use)
        )
        assert (out, heavy) == ("", [])  # handed over: the hook imported none of the engine
        first.write_bytes(b"one\n")
        out, heavy = probe_hook(
            home,
            project,
            claude.payload(
                "PostToolUse",
                tool_name="Write",
                tool_input=tool_input,
                tool_use_id=use,
                tool_response={"filePath": str(first)},
            ),
        )
        assert (out, heavy) == ("", [])
        stopped, heavy = probe_hook(home, project, claude.payload("Stop"))
        assert heavy == []
        assert stopped == '{"systemMessage": "1 file changed, +1 -0"}\n'
        turns = log_json(home, project)["turns"]
        assert [[call["tool"] for call in turn["calls"]] for turn in turns] == [["Write"]]
        assert not any(call["cut_short"] for call in turns[0]["calls"])
        assert cli(home, project, "undo", "--yes").rc == 0
        assert not first.exists()
    finally:
        stop_relay(home)


def test_a_killed_relay_is_replaced_and_no_event_is_lost(home: Path, project: Path) -> None:
    claude = Claude(home, project)
    try:
        claude.prompt("two writes, the relay killed between them")
        old = wait_for_relay(home)
        claude.write("a.txt", "a\n")
        os.kill(old, signal.SIGKILL)
        claude.write("b.txt", "b\n")  # nobody answers: the hook handles it, and starts a new relay
        new = wait_for_relay(home, other_than=old)
        assert new != old
        claude.write("c.txt", "c\n")
        claude.stop()
        calls = [call["tool"] for turn in log_json(home, project)["turns"] for call in turn["calls"]]
        assert calls == ["Write", "Write", "Write"]
        assert cli(home, project, "undo", "--yes").rc == 0
        assert not any((project / name).exists() for name in ("a.txt", "b.txt", "c.txt"))
    finally:
        stop_relay(home)


def test_a_relay_ends_when_idle_or_when_its_store_is_gone(home: Path, project: Path, tmp_path: Path) -> None:
    claude = Claude(home, project, env={"TURNBACK_HOOK_RELAY_IDLE_S": "1"})
    claude.prompt("start one")
    pid = wait_for_relay(home)
    assert ended(pid), "the relay outlived its idle time"

    other = tmp_path / "other-store"
    gone = Claude(other, project, session_id="another-session", env={"TURNBACK_HOOK_RELAY_IDLE_S": "600"})
    gone.prompt("start another")
    pid = wait_for_relay(other)
    subprocess.run(["rm", "-rf", str(other)], check=True)
    assert ended(pid), "the relay outlived its store"


def test_a_hook_with_another_key_is_not_served_by_the_relay(home: Path, project: Path) -> None:
    claude = Claude(home, project)
    try:
        claude.prompt("a relay with the test's key")
        wait_for_relay(home)
        wrong = claude.raw(
            claude.payload("UserPromptSubmit", prompt="x"), env={"TURNBACK_KEY": "another-key-0123456789"}
        )
        assert wrong.out == ""
        assert wrong.err.startswith("turnback: hook failed (KeyUnavailableError"), wrong.err
        assert [turn["message"] for turn in log_json(home, project)["turns"]] == ["a relay with the test's key"]
    finally:
        stop_relay(home)


def test_turnback_hook_relay_0_keeps_every_event_in_the_hook(home: Path, project: Path) -> None:
    claude = Claude(home, project, env={"TURNBACK_HOOK_RELAY": "0"})
    claude.prompt("no relay")
    claude.write("n.txt", "n\n")
    claude.stop()
    time.sleep(0.5)
    assert relay_pid(home) is None
    assert [call["tool"] for turn in log_json(home, project)["turns"] for call in turn["calls"]] == ["Write"]


def test_a_hook_whose_folder_is_gone_warns_once_and_exits_0(home: Path, project: Path, tmp_path: Path) -> None:
    doomed = tmp_path / "doomed"
    doomed.mkdir()
    event = Claude(home, project).payload("UserPromptSubmit", prompt="from a folder that is gone")
    script = f"cd {doomed} && rmdir {doomed} && exec {sys.executable} -m turnback hook claude-code"
    ran = subprocess.run(["sh", "-c", script], input=event, capture_output=True, env=cli_env(home), timeout=60)
    assert ran.returncode == 0
    assert ran.stdout == b""
    assert ran.stderr.decode().startswith("turnback: hook failed (FileNotFoundError"), ran.stderr
    assert len(ran.stderr.splitlines()) == 1

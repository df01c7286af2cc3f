"""The hook relay: after the first event, a long-lived process handles Claude Code's hook events.

Every test plays Claude Code's part with real hook processes (``turnback hook
claude-code``) and checks what a user relies on: each event is recorded
whichever process handles it, a hook process that hands its event over
imports none of the engine, and a relay that is gone, idle, or keyed
differently changes nothing but who does the work.
"""

from __future__ import annotations

import hashlib
import math
import os
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import cli_env, run_cli, second_user
from tests.integrations.test_claude_code import Claude, cli, log_json
from tests.reliability.helpers import record
from turnback.hooks import relay
from turnback.hooks.install import hook_command

PEERCRED = struct.Struct("3i")


def relay_pid(home: Path) -> int | None:
    """The pid of this user's relay serving *home*, asked of its socket; None when none listens."""
    sock = relay.connect(str(home))
    if sock is None:
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
    "heavy = ('turnback.engine', 'turnback.store', 'turnback.cli.main', 'sqlite3', 'cryptography', 'zstandard',\n"
    "         'json', 'socket', 're', 'enum', 'typing', 'argparse', 'struct')  # each costs a hook 1-20 ms\n"
    "print(rc, *[name for name in heavy if name in sys.modules], file=sys.stderr)\n"
)


def probe_hook(home: Path, project: Path, event: bytes, said: list[str] | None = None) -> tuple[str, list[str]]:
    """Run one hook as the console script does; what it printed, and the heavy modules it imported. It must
    say nothing on stderr, or the lines *said*."""
    ran = subprocess.run(
        [sys.executable, "-c", PROBE], input=event, capture_output=True, cwd=project, env=cli_env(home), timeout=60
    )
    *lines, last = ran.stderr.decode().splitlines()
    assert lines == (said or []), lines
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


def test_an_event_after_the_database_was_deleted_is_refused_as_without_the_relay(home: Path, project: Path) -> None:
    """The relay keeps the store open between events: once its database is deleted, the next event must not
    be recorded in the file the relay still holds (gone with it), nor in a new, empty store made in its place
    (the history would be dropped without a word), but refused as a hook without the relay refuses it."""
    claude = Claude(home, project)
    try:
        claude.prompt("the first prompt")
        wait_for_relay(home)
        assert probe_hook(home, project, claude.payload("Stop"))[1] == []  # served: the relay holds the store
        for name in ("turnback.db", "turnback.db-wal", "turnback.db-shm"):
            (home / name).unlink(missing_ok=True)
        said = [
            f"turnback: hook failed: the database of the store at {home} is gone ({home / 'turnback.db'} "
            "does not exist): turnback will not start a new, empty store in its place. Nothing was changed; the "
            f"plain copies in {home / 'trash'} are intact. Put the database back from a backup, or move the folder "
            "away to start afresh; the agent goes on"
        ]
        prompt = claude.payload("UserPromptSubmit", prompt="the second prompt")
        assert probe_hook(home, project, prompt, said) == ("", [])
        stop_relay(home)
        assert probe_hook(home, project, prompt, said)[0] == ""  # without the relay: the same words
        assert not (home / "turnback.db").exists()
    finally:
        stop_relay(home)


def test_the_installed_command_records_the_same_with_and_without_a_relay(home: Path, project: Path) -> None:
    # `turnback install` writes `PYTHON -S -I .../launch.py hook claude-code`: without site, a hook that must do
    # the work itself (no relay yet, or TURNBACK_HOOK_RELAY=0) loads it for the engine's packages.
    claude = Claude(home, project, command=hook_command())
    try:
        claude.prompt("through the installed command")  # no relay yet: this hook does the work and starts one
        wait_for_relay(home)
        claude.write("relayed.txt", "one\n")
        assert claude.stop().out == '{"systemMessage": "1 file changed, +1 -0"}\n'
    finally:
        stop_relay(home)
    alone = Claude(home, project, env={"TURNBACK_HOOK_RELAY": "0"}, command=hook_command())
    alone.prompt("no relay")
    alone.write("alone.txt", "one\ntwo\n")
    assert alone.stop().out == '{"systemMessage": "1 file changed, +2 -0"}\n'
    turns = log_json(home, project)["turns"]
    assert [(turn["message"], [call["tool"] for call in turn["calls"]]) for turn in turns] == [
        ("through the installed command", ["Write"]),
        ("no relay", ["Write"]),
    ]
    assert relay_pid(home) is None


def imported_modules(command: list[str], stdin: bytes, cwd: Path, env: dict[str, str]) -> tuple[set[str], bytes]:
    """The modules *command* (a Python command line) imports, by ``-X importtime``; and what it printed."""
    ran = subprocess.run(
        [command[0], "-X", "importtime", *command[1:]], input=stdin, capture_output=True, cwd=cwd, env=env, timeout=60
    )
    assert ran.returncode == 0, ran
    lines = ran.stderr.decode().splitlines()
    others = [line for line in lines if not line.startswith("import time:")]
    assert others == [], others
    return {line.split("|")[-1].strip() for line in lines[1:]}, ran.stdout


def test_a_hook_handed_to_the_relay_imports_nothing_it_does_not_need(home: Path, project: Path) -> None:
    # A hook costs the agent every module it imports (json and socket alone were 10-25 ms): what the installed
    # command may import is the interpreter's own start-up without site, os, _socket and four of turnback's.
    command = shlex.split(hook_command())
    python, flags = command[0], command[1:3]
    floor, _ = imported_modules([python, *flags, "-c", "import os, _socket"], b"", project, cli_env(home))
    allowed = floor | {"__future__", "turnback", "turnback.home", "turnback.hooks", "turnback.hooks.relay"}
    claude = Claude(home, project)
    try:
        claude.prompt("relayed events")
        wait_for_relay(home)
        target = project / "light.txt"
        tool_input = {"file_path": str(target), "content": "x\n"}
        pre = claude.payload("PreToolUse", tool_name="Write", tool_input=tool_input, tool_use_id="toolu_light")
        modules, out = imported_modules(command, pre, project, cli_env(home))
        assert out == b""
        assert modules - allowed == set()
        assert "turnback.hooks.relay" in modules
        target.write_bytes(b"x\n")
        claude.quiet("PostToolUse", tool_name="Write", tool_input=tool_input, tool_use_id="toolu_light")
        stopped, out = imported_modules(command, claude.payload("Stop"), project, cli_env(home))
        assert stopped - allowed == set()
        assert out == b'{"systemMessage": "1 file changed, +1 -0"}\n'  # the relay's reply, as the hook printed it
    finally:
        stop_relay(home)
    calls = [call["tool"] for turn in log_json(home, project)["turns"] for call in turn["calls"]]
    assert calls == ["Write"]


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
        assert wrong.err.startswith("turnback: hook failed: "), wrong.err  # worded, no Python class named
        assert "Error" not in wrong.err, wrong.err
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
    assert ran.stderr.decode().startswith("turnback: hook failed: No such file or directory"), ran.stderr
    assert len(ran.stderr.splitlines()) == 1


# -- another local user's sockets ------------------------------------------------------------

ATTACKER = "tbattacker"
STALL_S = 5.0  # a hook that takes longer has stalled the agent

SQUATTER = r"""
import os, signal, socket, sys, time
mode, names = sys.argv[1], sys.argv[2:]  # '@name' is an abstract socket, anything else a path
held, queued, accepted = {}, [], []
attempts, stopping = 0, []
signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))  # the loop says what it did, then ends

def shown():  # every user's Unix sockets are listed here, paths and abstract names alike
    with open("/proc/net/unix") as table:
        rows = [line.split() for line in list(table)[1:]]
    return {row[7] for row in rows if len(row) > 7 and "hook-relay" in row[7] and not row[7].startswith("@")}

print("started", flush=True)
while not stopping:
    for name in sorted(set(names) | shown()):
        if name in held:
            continue
        where = "\0" + name[1:] if name.startswith("@") else name
        attempts += 1
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            server.bind(where)
        except OSError:
            server.close()
            continue
        server.listen(0 if mode == "backlog-full" else 16)
        server.setblocking(False)
        held[name] = server
        while mode == "backlog-full":  # fill its queue: a blocking connect() to it now waits forever
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.setblocking(False)
            try:
                client.connect(where)
            except BlockingIOError:
                client.close()
                break
            queued.append(client)
        print("holds", name, flush=True)
    if mode == "accepts-never-answers":
        for server in held.values():
            try:
                accepted.append(server.accept()[0])  # kept open, never read, never answered
            except BlockingIOError:
                pass
    time.sleep(0.01)
print("attempts", attempts, "held", len(held), flush=True)
"""


def runnable_python(prefix: list[str]) -> str:
    """A Python interpreter the user of *prefix* may run (this test's may sit in root's home)."""
    for candidate in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if candidate and subprocess.run([*prefix, candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    pytest.skip(f"no Python that {prefix[-2]} may run")


class Squatter:
    """Another local user binding every relay socket name it can guess or see, its queue full or never answering."""

    def __init__(self, mode: str, names: list[str]):
        prefix = second_user(ATTACKER)
        self.proc = subprocess.Popen(
            [*prefix, runnable_python(prefix), "-I", "-c", SQUATTER, mode, *names],
            stdout=subprocess.PIPE,
            text=True,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout or []), daemon=True)
        self.reader.start()

    def wait_holding(self, name: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while f"holds {name}\n" not in self.lines:
            assert time.monotonic() < deadline and self.proc.poll() is None, self.lines
            time.sleep(0.02)

    def stop(self) -> dict[str, int]:
        """End it; how many binds it tried and how many names it held."""
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=15)
        self.reader.join(timeout=15)
        words = self.lines[-1].split() if self.lines else []
        assert words[:1] == ["attempts"], self.lines
        return {"attempts": int(words[1]), "held": int(words[3])}


def old_relay_name(home: Path) -> str:
    """The abstract name the relay once listened on: derived from the user's uid and the store's path alone."""
    digest = hashlib.sha256(f"{os.getuid()}\0{os.path.realpath(home)}".encode()).hexdigest()[:32]
    return f"@turnback-hook-relay-{digest}"


def timed_hook(home: Path, project: Path, event: bytes) -> float:
    """Run one hook as Claude Code does; its wall time in seconds, infinite when it had to be killed."""
    start = time.monotonic()
    try:
        result = run_cli(home, "hook", "claude-code", stdin=event, cwd=project, timeout=2 * STALL_S)
    except subprocess.TimeoutExpired:
        return math.inf
    assert result.rc == 0, result
    return time.monotonic() - start


def write_turn(home: Path, project: Path, claude: Claude, name: str) -> list[float]:
    """A prompt, one Write (PreToolUse, the write, PostToolUse) and Stop: each hook's wall time."""
    path = project / name
    tool_input = {"file_path": str(path), "content": f"{name}\n"}
    use = f"toolu_{name}"
    times = [timed_hook(home, project, claude.payload("UserPromptSubmit", prompt=f"write {name}"))]
    times.append(
        timed_hook(
            home, project, claude.payload("PreToolUse", tool_name="Write", tool_input=tool_input, tool_use_id=use)
        )
    )
    path.write_bytes(f"{name}\n".encode())
    post = claude.payload(
        "PostToolUse", tool_name="Write", tool_input=tool_input, tool_use_id=use, tool_response={"filePath": str(path)}
    )
    times.append(timed_hook(home, project, post))
    times.append(timed_hook(home, project, claude.payload("Stop", stop_hook_active=False)))
    return times


def wait_for_handover(home: Path, project: Path, claude: Claude, timeout: float = 15.0) -> None:
    """Until a hook hands its event over (imports none of the engine): a relay of this user's serves."""
    probe = claude.payload("PreToolUse", tool_name="Write", tool_input={}, tool_use_id="toolu_probe")  # changes nothing
    deadline = time.monotonic() + timeout
    while probe_hook(home, project, probe)[1]:
        assert time.monotonic() < deadline, "no relay of this user's took an event"
        time.sleep(0.1)


@pytest.mark.parametrize("attack", ["backlog-full", "accepts-never-answers"])
def test_another_users_socket_stalls_no_hook_and_every_call_is_recorded(home: Path, project: Path, attack: str) -> None:
    claude = Claude(home, project)
    squatter = Squatter(attack, [old_relay_name(home), str(home / "hook-relay.sock")])  # what it can guess
    times: list[float] = []
    try:
        squatter.wait_holding(old_relay_name(home))
        times += write_turn(home, project, claude, "first.txt")  # no relay: the hook does the work, starts one
        assert max(times) < STALL_S, times
        wait_for_handover(home, project, claude)  # the squatter did not keep a relay from serving
        times += write_turn(home, project, claude, "second.txt")
        pid = relay_pid(home)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # its socket stays behind, nobody listening; the squatter tries for it
        assert ended(pid)
        times += write_turn(home, project, claude, "third.txt")  # the hook does the work and starts a relay again
        wait_for_handover(home, project, claude)
        times += write_turn(home, project, claude, "fourth.txt")
    finally:
        seen = squatter.stop()
        stop_relay(home)
    stalled = sum(1 for took in times if took >= STALL_S)
    record(
        f"hook relay: another user's socket ({attack})",
        hooks=len(times),
        squatter_binds=seen["attempts"],
        names_held=seen["held"],
        hooks_stalled=stalled,
        max_hook_ms=round(max(times) * 1000),
    )
    assert stalled == 0, times
    turns = log_json(home, project)["turns"]
    writes = [(call["tool"], call["cut_short"]) for turn in turns for call in turn["calls"]]
    assert writes == [("Write", False)] * 4
    assert seen["held"] == 1  # the old name only: the relay's own socket was never the squatter's


@pytest.mark.parametrize("hook_version", ["today's", "older"])
def test_a_hook_that_connects_as_the_relay_ends_is_told_to_handle_its_event_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hook_version: str
) -> None:
    # The relay ends when idle. A hook that connected in the instant between its last wait and the socket's
    # removal must not be dropped unanswered (its call would never be recorded): it is told to do the work,
    # in the words it understands (an older hook sent JSON, and reads JSON back).
    if hook_version == "older":
        request, answer = b'{"event": {}, "caller": [1, "/", null], "env": {}}', b'{"taken": false}'
    else:
        request, answer = relay._request(b"{}", "claude-code"), b"F"
    monkeypatch.setenv(relay.ENV_IDLE, "0")
    path = tmp_path / "r.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    arrived: list[socket.socket] = []

    def retire() -> None:
        hook = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        hook.connect(str(path))
        hook.sendall(request)
        hook.shutdown(socket.SHUT_WR)
        arrived.append(hook)
        path.unlink()

    assert relay._serve(str(tmp_path), server, retire) == 0
    assert len(arrived) == 1
    with arrived[0] as hook:
        hook.settimeout(5)
        assert hook.recv(1 << 16) == answer


@pytest.mark.parametrize(
    ("lang", "said"),
    [
        ("en", "turnback: the hook relay did not answer; the agent goes on"),
        ("ja", "turnback: フックのリレーが応答しませんでした。エージェントはそのまま続行します"),
    ],
)
def test_a_relay_that_takes_an_event_and_ends_unanswered_gets_one_line_in_the_users_language(
    home: Path, project: Path, lang: str, said: str
) -> None:
    """It took the event (so the hook must not record it twice) and ended: the hook says so once, exits 0."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(home / relay.SOCKET_NAME))
    server.listen(1)

    def take_and_end() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(1 << 16)
            conn.sendall(relay.TAKEN)  # and no answer after it

    taker = threading.Thread(target=take_and_end)
    taker.start()
    try:
        claude = Claude(home, project, env={"TURNBACK_LANG": lang})
        result = claude.raw(claude.payload("UserPromptSubmit", prompt="hello", prompt_id="p-1"))
    finally:
        taker.join(10)
        server.close()
    assert (result.rc, result.out, result.err) == (0, "", said + "\n"), result

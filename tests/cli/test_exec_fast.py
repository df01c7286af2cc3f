"""A harness's ``turn begin``, ``exec`` and ``turn end`` served by the hook relay (turnback.cli.fast).

Each test plays a harness with real processes of the console script's code,
twice: on a store with no relay (``TURNBACK_HOOK_RELAY=0``: the full command
line, as before) and on a store whose relay serves them. What a user relies
on must be the same both ways: each line on stdout and stderr, the exit
codes, the calls recorded (the store read back), the bytes an undo puts
back, the command's own stdin and environment. Every call the relay mode
makes is checked to have been served (the process never imported the full
command line), so that the comparison is never of the full path with itself.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import turnback
from tests.cli.terminal import run_on_a_terminal
from tests.conftest import TEST_KEY, Result, cli_env, make_project, run_cli
from turnback.hooks import relay
from turnback.model import SessionId
from turnback.procs import process_alive, process_start
from turnback.store.sqlite.opening import DB_NAME

MODES = ("full", "relay")
# The console script's code (turnback.cli:entry) in a process of its own; then whether it imported the full
# command line, to the file the test names (TB_TEST_PROBE: not a TURNBACK_ variable, so a command keeps it).
PROBE = (
    "import os, sys\n"
    "sys.argv[0] = 'turnback'\n"
    "from turnback.cli import entry\n"
    "try:\n"
    "    rc = entry()\n"
    "finally:\n"
    "    with open(os.environ['TB_TEST_PROBE'], 'a') as probe:\n"
    "        probe.write(('full' if 'turnback.cli.main' in sys.modules else 'served') + '\\n')\n"
    "sys.exit(rc)\n"
)
HEAVY = ("turnback.cli.main", "turnback.engine", "turnback.store", "argparse", "sqlite3", "json", "re")
ID = re.compile(r"\b[0-9a-f]{16,}\b")


def relay_pid(home: Path) -> int | None:
    sock = relay.connect(str(home))
    if sock is None:
        return None
    try:
        ucred = sock.getsockopt(relay._socket.SOL_SOCKET, relay._socket.SO_PEERCRED, relay.PEERCRED_SIZE)
        return int.from_bytes(ucred[:4], sys.byteorder)
    finally:
        sock.close()


def wait_for_relay(home: Path, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = relay_pid(home)
        if pid is not None:
            return pid
        time.sleep(0.05)
    raise AssertionError(f"no relay for {home} after {timeout} s")


class Harness:
    """One store and project, driven as a harness drives turnback: a process per step."""

    def __init__(self, base: Path, mode: str, *, pythonpath: Path | None = None):
        """*pythonpath*: where every process of it (the relay's too) imports turnback from."""
        self.mode = mode
        self.home = base / "store"
        self.project = make_project(base / "project")
        self.probe = base / "probe.txt"
        self.env = {"TB_TEST_PROBE": str(self.probe), "TURNBACK_HOOK_RELAY_IDLE_S": "300"}
        if pythonpath is not None:
            self.env["PYTHONPATH"] = str(pythonpath)
        if mode == "full":
            self.env["TURNBACK_HOOK_RELAY"] = "0"
        created = run_cli(self.home, "session", "new", "--title", "harness", cwd=self.project, env=self.env)
        assert created.rc == 0, created
        self.session = created.out.strip()
        self.private = ""  # an incognito session's, once a test makes one
        # Turn 1 in both modes: in relay mode, no relay runs yet, so the full command line runs it and starts one.
        warm = self.run("turn", "begin", "--session", self.session, "--message", "warm up", served=False)
        assert warm.rc == 0, warm
        if mode == "relay":
            wait_for_relay(self.home)
        assert self.run("turn", "end", "--session", self.session).rc == 0

    def run(
        self, *words: str, stdin: bytes = b"", served: bool | None = None, env: dict[str, str] | None = None
    ) -> Result:
        """``turnback WORDS`` in the project; checks the relay served it in relay mode (unless *served* says
        otherwise), never in full mode."""
        result, ran_by = self.ran(*words, stdin=stdin, env=env)
        expected = (self.mode == "relay") if served is None else served
        assert ran_by == ("served" if expected else "full"), (words, result)
        return result

    def ran(self, *words: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> tuple[Result, str]:
        """``turnback WORDS`` in the project, and what ran it: ``served`` (the relay) or ``full``."""
        self.probe.write_text("")
        proc = subprocess.run(
            [sys.executable, "-c", PROBE, *words],
            input=stdin,
            capture_output=True,
            cwd=self.project,
            env=cli_env(self.home, {**self.env, **(env or {})}),
            timeout=120,
        )
        result = Result(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))
        return result, " ".join(self.probe.read_text().split())

    def cli(self, *words: str) -> Result:
        return run_cli(self.home, *words, cwd=self.project, env={"TURNBACK_HOOK_RELAY": "0"})

    def calls(self) -> list[dict[str, object]]:
        """Every call of the session as the store holds it (ids left out: each store makes its own)."""
        with turnback.Engine.open(str(self.home), key_secret=TEST_KEY, try_keyring=False) as engine:
            found = []
            for turn in engine.store.turns(SessionId(self.session)):
                for call in engine.store.calls_of_turn(turn.id):
                    found.append(
                        {
                            "turn": turn.number,
                            "tool": call.tool,
                            "kind": call.kind,
                            "input": json.loads(call.input or "null"),
                            "status": call.status,
                            "exit": call.exit_code,
                            "error": str(call.error) if call.error else None,
                            "unasked": call.unasked,
                            "pid_recorded": call.pid is not None,
                            "changes": sorted((c.path, c.kind) for c in call.changes),
                        }
                    )
            return found

    def stop(self) -> None:
        pid = relay_pid(self.home)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def harnesses(tmp_path: Path) -> Iterator[dict[str, Harness]]:
    both = {mode: Harness(tmp_path / mode, mode) for mode in MODES}
    try:
        yield both
    finally:
        for harness in both.values():
            harness.stop()


def same(results: dict[str, Result]) -> Result:
    """The one result every mode gave (ids made alike), or a failure showing how they differ."""
    shown = {mode: (r.rc, ID.sub("ID", r.out), ID.sub("ID", r.err)) for mode, r in results.items()}
    assert shown["relay"] == shown["full"]
    return results["full"]


def each(harnesses: dict[str, Harness], *words: str, **options: object) -> Result:
    """``turnback WORDS`` in every mode, the same result from each; the word ``S`` stands for the mode's
    session, ``P`` for its private one."""

    def spelled(h: Harness) -> list[str]:
        return [{"S": h.session, "P": h.private}.get(word, word) for word in words]

    return same({mode: h.run(*spelled(h), **options) for mode, h in harnesses.items()})  # type: ignore[arg-type]


def test_a_turn_of_commands_prints_records_and_undoes_the_same_through_the_relay(
    harnesses: dict[str, Harness],
) -> None:
    originals = {mode: (h.project / "README.md").read_bytes() for mode, h in harnesses.items()}
    begun = each(
        harnesses, "turn", "begin", "--session", "S", "--message", "edit the readme", "--pid", str(os.getpid())
    )
    assert begun.rc == 0 and re.fullmatch(r"turn 2 [0-9a-f]{16}\n", begun.out), begun
    ran = each(
        harnesses, "exec", "--session", "S", "--", "sh", "-c", "printf 'more\\n' >> README.md; echo out; echo err >&2"
    )
    assert (ran.rc, ran.out, ran.err) == (0, "out\nchanged README.md +1 -0\n", "err\n")
    added = each(harnesses, "--session", "S", "exec", "--unasked", "--", "sh", "-c", "printf 'new\\n' > notes.md")
    assert (added.rc, added.out, added.err) == (0, "new notes.md\n", "")
    failed = each(harnesses, "exec", "--session", "S", "--", "sh", "-c", "printf x >> docs/guide.md; exit 3")
    assert (failed.rc, failed.out, failed.err) == (3, "changed docs/guide.md +1 -1\n", "")
    ended = each(harnesses, "turn", "end", "--session", "S")
    assert ended.rc == 0 and ended.err == "", ended
    assert ended.out.splitlines()[0].startswith("3 files changed, +3 -1"), ended
    records = {mode: h.calls() for mode, h in harnesses.items()}
    assert records["relay"] == records["full"]
    assert [(c["tool"], c["status"], c["exit"], c["unasked"], c["pid_recorded"]) for c in records["full"]] == [
        ("exec", "done", 0, False, True),
        ("exec", "done", 0, True, True),
        ("exec", "done", 3, False, True),
    ]
    for mode, h in harnesses.items():
        undone = h.cli("undo", "--session", h.session, "--yes")
        assert undone.rc == 0, undone
        assert (h.project / "README.md").read_bytes() == originals[mode]
        assert not (h.project / "notes.md").exists()
        assert (h.project / "docs" / "guide.md").read_bytes() == b"no final newline"


@pytest.fixture
def in_turn(harnesses: dict[str, Harness]) -> dict[str, Harness]:
    for h in harnesses.values():
        assert h.run("turn", "begin", "--session", h.session, "--pid", str(os.getpid())).rc == 0
    return harnesses


def test_a_command_not_found_or_not_runnable_exits_127_or_126_as_before(in_turn: dict[str, Harness]) -> None:
    missing = each(in_turn, "exec", "--", "no-such-program-turnback-test", "arg")
    assert (missing.rc, missing.out) == (127, "")
    assert missing.err.startswith("turnback: no-such-program-turnback-test: "), missing
    for h in in_turn.values():
        (h.project / "plain.txt").write_bytes(b"not a program\n")
    refused = each(in_turn, "exec", "--", "./plain.txt")
    assert (refused.rc, refused.out) == (126, "")
    assert refused.err.startswith("turnback: ./plain.txt: "), refused
    records = {mode: h.calls() for mode, h in in_turn.items()}
    assert records["relay"] == records["full"]
    assert [(c["status"], c["exit"]) for c in records["full"] if c["turn"] == records["full"][-1]["turn"]] == [
        ("failed", None),
        ("failed", None),
    ]


def test_a_command_killed_by_a_signal_exits_128_plus_it(in_turn: dict[str, Harness]) -> None:
    killed = each(in_turn, "exec", "--", "sh", "-c", "printf x >> README.md; kill -TERM $$")
    assert (killed.rc, killed.out, killed.err) == (128 + signal.SIGTERM, "changed README.md +1 -0\n", "")


def test_the_command_reads_the_callers_stdin(in_turn: dict[str, Harness]) -> None:
    ran = each(in_turn, "exec", "--", "sh", "-c", "cat > got.txt; cat got.txt", stdin=b"from the harness\n")
    assert (ran.rc, ran.out, ran.err) == (0, "from the harness\nnew got.txt\n", "")
    for h in in_turn.values():
        assert (h.project / "got.txt").read_bytes() == b"from the harness\n"


def test_the_command_gets_no_turnback_variable(in_turn: dict[str, Harness]) -> None:
    ran = each(in_turn, "exec", "--", "sh", "-c", "env > env.txt", env={"KEPT": "yes"})
    assert ran.rc == 0, ran
    for h in in_turn.values():
        names = [line.partition("=")[0] for line in (h.project / "env.txt").read_text().splitlines()]
        assert "KEPT" in names and "PATH" in names
        assert [name for name in names if name.startswith("TURNBACK_")] == []


def test_a_users_edit_before_exec_is_not_the_commands(in_turn: dict[str, Harness]) -> None:
    for h in in_turn.values():
        with open(h.project / "README.md", "ab") as readme:
            readme.write(b"the user's line\n")
    ran = each(in_turn, "exec", "--", "sh", "-c", "printf 'x\\n' >> src/main.py")
    assert (ran.rc, ran.out) == (0, "changed src/main.py +1 -0\n")
    records = {mode: h.calls() for mode, h in in_turn.items()}
    assert records["relay"] == records["full"]
    assert records["full"][-1]["changes"] == [("src/main.py", "modified")]


def test_turn_end_prints_the_summary_line(in_turn: dict[str, Harness]) -> None:
    each(in_turn, "exec", "--", "sh", "-c", "printf 'x\\n' >> README.md")
    ended = each(in_turn, "turn", "end")
    assert ended.rc == 0 and ended.err == ""
    assert ended.out.splitlines()[0].startswith("1 file changed, +1 -0"), ended
    again = each(in_turn, "turn", "end")
    assert (again.rc, again.out) == (1, "")
    assert again.err.startswith("turnback: "), again


def test_the_session_comes_from_turnback_session_or_the_project(harnesses: dict[str, Harness]) -> None:
    for h in harnesses.values():
        h.env["TURNBACK_SESSION"] = h.session
    begun = each(harnesses, "turn", "begin", "--pid", str(os.getpid()))
    assert begun.rc == 0, begun
    for h in harnesses.values():
        del h.env["TURNBACK_SESSION"]
    ran = each(harnesses, "exec", "--", "true")  # the latest session of the project holding the folder
    assert (ran.rc, ran.out, ran.err) == (0, "", "")
    wrong = each(harnesses, "exec", "--session", "nosuchsession", "--", "true")
    assert (wrong.rc, wrong.out) == (125, "")
    assert wrong.err.startswith("turnback: "), wrong


def test_turn_begin_holds_the_turn_for_the_process_that_ran_it(harnesses: dict[str, Harness]) -> None:
    # No --pid: the turn is held by turnback's parent (the harness's shell), not by the relay's.
    for h in harnesses.values():
        holder = subprocess.Popen(
            [sys.executable, "-c", PROBE, "turn", "begin", "--session", h.session],
            cwd=h.project,
            env=cli_env(h.home, h.env),
            stdout=subprocess.PIPE,
        )
        assert holder.wait(60) == 0
        with turnback.Engine.open(str(h.home), key_secret=TEST_KEY, try_keyring=False) as engine:
            turns = [t for t in engine.store.turns(SessionId(h.session)) if t.status == "running"]
            # The probe's parent is this test's process: it still runs, so the turn does.
            assert [t.holder_pid for t in turns] == [os.getpid()], h.mode


def test_a_served_step_imports_none_of_the_command_line(harnesses: dict[str, Harness]) -> None:
    h = harnesses["relay"]
    probe = (
        "import sys\n"
        "sys.argv[0] = 'turnback'\n"
        "from turnback.cli import entry\n"
        "rc = entry()\n"
        f"print(rc, *[name for name in {HEAVY!r} if name in sys.modules], file=sys.stderr)\n"
    )
    for words in (
        ["turn", "begin", "--session", h.session, "--pid", str(os.getpid())],
        ["exec", "--", "sh", "-c", "printf 'x\\n' >> README.md"],
        ["turn", "end"],
    ):
        ran = subprocess.run(
            [sys.executable, "-c", probe, *words], capture_output=True, cwd=h.project, env=cli_env(h.home, h.env)
        )
        assert ran.stderr.decode().splitlines()[-1:] == ["0"], (words, ran)


def test_a_relay_of_other_settings_leaves_the_verb_to_the_full_command_line(harnesses: dict[str, Harness]) -> None:
    h = harnesses["relay"]
    relay_before = relay_pid(h.home)
    begun = h.run(
        "turn", "begin", "--session", h.session, "--pid", str(os.getpid()), served=False, env={"TURNBACK_LANG": "ja"}
    )
    assert begun.rc == 0 and begun.err == "", begun
    worded = run_cli(
        h.home, "turn", "begin", "--session", h.session, env={"TURNBACK_HOOK_RELAY": "0", "TURNBACK_LANG": "ja"}
    )
    refused = h.run("turn", "begin", "--session", h.session, served=False, env={"TURNBACK_LANG": "ja"})
    assert (refused.rc, refused.out, refused.err) == (
        worded.rc,
        worded.out,
        worded.err,
    )  # in Japanese, as the CLI says it
    assert refused.rc == 3 and refused.err.startswith("turnback: "), refused
    ran = h.run("exec", "--", "true")  # the relay's own settings: served
    assert (ran.rc, ran.out, ran.err) == (0, "", "")
    assert relay_pid(h.home) == relay_before  # no second relay was started


def test_the_real_console_script_with_and_without_a_relay(harnesses: dict[str, Harness]) -> None:
    script = Path(sys.executable).parent / "turnback"
    if not script.exists():
        pytest.skip(f"no console script next to {sys.executable} (turnback is not installed there)")
    outputs = {}
    for mode, h in harnesses.items():
        steps = [
            ["turn", "begin", "--session", h.session, "--pid", str(os.getpid())],
            ["exec", "--", "sh", "-c", "printf 'y\\n' >> README.md; exit 3"],
            ["turn", "end"],
        ]
        outputs[mode] = [
            (ran.returncode, ID.sub("ID", ran.stdout.decode()), ran.stderr.decode())
            for ran in (
                subprocess.run([str(script), *words], capture_output=True, cwd=h.project, env=cli_env(h.home, h.env))
                for words in steps
            )
        ]
    assert outputs["relay"] == outputs["full"]
    assert [rc for rc, _, _ in outputs["full"]] == [0, 3, 0]
    assert outputs["full"][1][1] == "changed README.md +1 -0\n"


def test_an_incognito_sessions_command_runs_in_its_own_process_as_before(harnesses: dict[str, Harness]) -> None:
    for h in harnesses.values():
        made = h.cli("session", "new", "--incognito", "--title", "private")
        assert made.rc == 0, made
        h.private = made.out.strip()
    begun = each(harnesses, "turn", "begin", "--session", "P", "--pid", str(os.getpid()))
    assert begun.rc == 0, begun
    ran = same(
        {
            mode: h.run(
                "exec", "--session", h.private, "--", "sh", "-c", "printf 'p\\n' >> README.md; exit 4", served=False
            )
            for mode, h in harnesses.items()
        }
    )
    assert (ran.rc, ran.err) == (4, ""), ran


def test_on_a_terminal_the_commands_line_is_dimmed_as_before(in_turn: dict[str, Harness]) -> None:
    # The relay writes to no terminal: it colours the line as the client's stdout is (a terminal here).
    shown = {}
    for mode, h in in_turn.items():
        rc, output = run_on_a_terminal(
            ["exec", "--", "sh", "-c", "printf 'z\\n' >> README.md; echo done"], h.project, cli_env(h.home, h.env), b""
        )
        shown[mode] = (rc, output)
    assert shown["relay"] == shown["full"] == (0, "done\n\x1b[2mchanged README.md +1 -0\x1b[0m\n")


def test_a_relay_is_not_idle_while_a_command_it_began_runs(harnesses: dict[str, Harness]) -> None:
    h = harnesses["relay"]
    h.stop()
    quick = {"TURNBACK_HOOK_RELAY_IDLE_S": "1"}  # the relay this starts ends after a second without a request
    assert h.run("turn", "begin", "--session", h.session, served=False, env=quick).rc == 0
    pid = wait_for_relay(h.home)
    ran = h.run("exec", "--", "sh", "-c", "sleep 4; printf x >> README.md", env=quick)
    assert (ran.rc, ran.out) == (0, "changed README.md +1 -0\n")
    assert relay_pid(h.home) == pid  # it waited out the command, and recorded its end
    deadline = time.monotonic() + 30
    while process_alive(pid, None) and time.monotonic() < deadline:  # (a connection would be a request)
        time.sleep(0.1)
    assert not process_alive(pid, None)  # then idle: it ended


@pytest.mark.parametrize("lost", ["deleted", "emptied"])
def test_a_store_whose_database_was_lost_is_opened_again_by_the_relay_as_by_the_command_line(
    harnesses: dict[str, Harness], lost: str
) -> None:
    """The relay keeps its store open between requests: once the database file is gone from the folder (or
    emptied in place), a request must not go on with the file it still holds, but open the folder again and
    say what the command line says: refused, never a new, empty store in its place."""
    for h in harnesses.values():
        assert h.run("turn", "begin", "--session", h.session, "--pid", str(os.getpid())).rc == 0
        assert h.run("exec", "--", "sh", "-c", "printf 'x\\n' >> README.md").rc == 0
        for name in (DB_NAME + "-wal", DB_NAME + "-shm", *([DB_NAME] if lost == "deleted" else [])):
            (h.home / name).unlink(missing_ok=True)
        if lost == "emptied":
            os.truncate(h.home / DB_NAME, 0)
    for h in harnesses.values():
        ended = h.run("turn", "end", "--session", h.session)
        said = {"deleted": "is gone", "emptied": "is empty"}[lost]
        assert (ended.rc, ended.out) == (1, ""), ended
        assert ended.err.startswith(f"turnback: the database of the store at {h.home} {said}"), ended
        assert (h.home / DB_NAME).exists() == (lost == "emptied")  # nothing made in its place


def test_a_relay_whose_code_changed_on_disk_answers_at_most_one_more_request(tmp_path: Path) -> None:
    """An upgrade while the relay runs: the relay looks at its modules after each answer (off the client's
    wait), so at most one request more is answered by the code it loaded; the next goes to the new code's
    command line. Played on a copy of turnback's code, so no other test's relay sees the change."""
    code = tmp_path / "code"
    shutil.copytree(Path(turnback.__file__).parent, code / "turnback", ignore=shutil.ignore_patterns("__pycache__"))
    h = Harness(tmp_path / "relay", "relay", pythonpath=code)
    try:
        old_relay = relay_pid(h.home)
        assert old_relay is not None
        started = process_start(old_relay)
        assert h.run("turn", "begin", "--session", h.session, "--pid", str(os.getpid())).rc == 0
        module = code / "turnback" / "catalog" / "__init__.py"
        os.utime(module, ns=(module.stat().st_atime_ns, module.stat().st_mtime_ns + 10**9))
        first, _ = h.ran("exec", "--", "true")  # the old relay's last answer, or already the command line's
        assert (first.rc, first.out, first.err) == (0, "", ""), first
        second = h.run("exec", "--", "true", served=False)
        assert (second.rc, second.out, second.err) == (0, "", ""), second
        deadline = time.monotonic() + 10
        while process_alive(old_relay, started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not process_alive(old_relay, started)
    finally:
        h.stop()

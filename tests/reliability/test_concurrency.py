"""Concurrency: many writers in one store, two sessions on one file, undo against what runs.

- 8 processes record 200 file-tool calls each, at once, into one store (each
  its own session of one project, one turn): every process exits 0, no
  "database is locked" reaches anyone, all 1,600 calls are in the store, and
  ``turnback verify`` passes.
- Two sessions edit one file alternately: undoing one session's turn out of
  order is refused by compare-and-swap (the file keeps the other session's
  latest bytes); newest first across the sessions, every undo goes through;
  an undo in one session never touches the other session's files.
- An undo while a turn runs, while a command past its timeout runs, while a
  background job runs, and while another undo holds the session's apply lock:
  refused with exit 3 naming what runs. A lock held by a killed process frees
  itself (the kernel drops an ``flock`` with its holder).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import turnback
from tests.conftest import ROOT, TEST_KEY, cli_env, tree_state
from tests.reliability.helpers import SOAK, assert_no_traceback, kill_process, record, run, wait_until
from tests.reliability.scenarios import build_undo, open_engine
from turnback.model import SessionId
from turnback.procs import process_alive

WRITER = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, {src!r})
    import turnback

    home, project, index, calls, gate = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    with turnback.Engine.open(home, key_secret={key!r}, try_keyring=False) as engine:
        session = engine.new_session(project, title=f"writer {{index}}")
        while not os.path.exists(gate):  # every writer starts at once
            time.sleep(0.001)
        engine.begin_turn(session.id, f"{{calls}} writes")
        for i in range(calls):
            engine.write(session.id, f"w{{index}}/f{{i:04d}}.txt", f"writer {{index}} call {{i}}\\n".encode())
        engine.end_turn(session.id)
        print(session.id)
    """
)


def test_eight_processes_record_200_calls_each_into_one_store(fast_tmp: Path) -> None:
    home, project = fast_tmp / "store", fast_tmp / "project"
    project.mkdir()
    (project / "README.md").write_bytes(b"one project, eight writers\n")
    with open_engine(home) as engine:
        engine.init_project(str(project))
    writers, calls = 8, (400 if SOAK else 200)
    script = fast_tmp / "writer.py"
    script.write_text(WRITER.format(src=str(ROOT / "src"), key=TEST_KEY))
    gate = fast_tmp / "go"
    env = cli_env(home)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(home), str(project), str(i), str(calls), str(gate)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for i in range(writers)
    ]
    time.sleep(0.5)  # let them all open the store and make their sessions
    began = time.monotonic()
    gate.touch()
    outputs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            outputs.append((proc.returncode, out.decode(), err.decode()))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    elapsed = time.monotonic() - began
    for code, _out, err in outputs:
        assert code == 0, (code, err)
        assert "locked" not in err.lower() and "Traceback" not in err, err
    sessions = [out.strip() for _, out, _ in outputs]
    with open_engine(home) as engine:
        (count,) = engine.store.db.one("SELECT COUNT(*) FROM calls")
        per_session = dict(engine.store.db.all("SELECT session_id, COUNT(*) FROM calls GROUP BY session_id"))
        (done,) = engine.store.db.one("SELECT COUNT(*) FROM calls WHERE status='done'")
    assert count == writers * calls, count
    assert done == writers * calls
    assert per_session == dict.fromkeys(sessions, calls)
    for i in range(writers):
        assert len(os.listdir(project / f"w{i}")) == calls
    verified = run(home, "verify", cwd=project)
    assert verified.rc == 0, verified.out
    record(
        "concurrency-writers",
        processes=writers,
        calls_each=calls,
        calls_in_store=count,
        seconds=round(elapsed, 1),
        calls_per_second=round(count / elapsed, 1),
        lost=writers * calls - count,
    )


# -- two sessions, one file ----------------------------------------------------------------------


def test_two_sessions_editing_one_file_alternately(engine: turnback.Engine, project: Path) -> None:
    a = engine.new_session(str(project), title="A")
    b = engine.new_session(str(project), title="B")
    versions = [b"v0: before both sessions\n"]
    (project / "shared.txt").write_bytes(versions[0])

    def turn(session: turnback.Session, n: int) -> None:
        engine.begin_turn(session.id, f"{session.title} turn {n}")
        data = f"v{len(versions)}: {session.title} turn {n}\n".encode()
        engine.write(session.id, "shared.txt", data)
        engine.write(session.id, f"{session.title}-own.txt", f"{session.title} own file, turn {n}\n".encode())
        engine.end_turn(session.id)
        versions.append(data)

    turn(a, 1)
    turn(b, 1)
    turn(a, 2)
    turn(b, 2)
    latest = versions[-1]

    def b_files() -> tuple[bytes, int]:
        st = (project / "B-own.txt").stat()
        return (project / "B-own.txt").read_bytes(), st.st_ino

    b_before = b_files()

    # A's turns out of order (B wrote the file after each of them): compare-and-swap refuses the file.
    for kwargs in ({}, {"from_turn": 1}):
        result = engine.apply(engine.plan_undo(a.id, **kwargs))  # type: ignore[arg-type]
        rows = {row.path: row for row in result.plan.rows}
        assert rows["shared.txt"].status == "skipped", rows["shared.txt"]
        assert rows["shared.txt"].reason and "--force" in str(rows["shared.txt"].reason), rows["shared.txt"]
        assert (project / "shared.txt").read_bytes() == latest
        assert b_files() == b_before, "an undo in session A touched session B's file"
    a_first_call = engine.log(a.id)[0].calls[0].id
    reverted = engine.apply(engine.plan_revert(a_first_call))
    [row] = [row for row in reverted.plan.rows if row.path == "shared.txt"]
    assert row.status == "skipped" and row.reason and "changed since the call" in str(row.reason)
    assert (project / "shared.txt").read_bytes() == latest
    assert b_files() == b_before

    # Newest first across the sessions: each undo puts back what the file held before that turn,
    # and leaves the other session's own file as it is (same bytes, same inode).
    def own(session: turnback.Session) -> tuple[bytes, int] | None:
        path = project / f"{session.title}-own.txt"
        return (path.read_bytes(), path.stat().st_ino) if path.exists() else None

    expected = list(reversed(versions[:-1]))
    for session, other, number in ((b, a, 2), (a, b, 2), (b, a, 1), (a, b, 1)):
        others = own(other)
        result = engine.apply(engine.plan_undo(session.id, turn=number))
        rows = {row.path: row for row in result.plan.rows}
        assert rows["shared.txt"].status == "done", (session.title, number, rows["shared.txt"])
        assert (project / "shared.txt").read_bytes() == expected.pop(0), (session.title, number)
        assert own(other) == others, f"an undo in session {session.title} touched session {other.title}'s file"
    assert (project / "shared.txt").read_bytes() == versions[0]
    assert not (project / "A-own.txt").exists() and not (project / "B-own.txt").exists()
    record("concurrency-two-sessions", turns=4, cas_refusals=3, undos_newest_first=4)


# -- undo against what runs -------------------------------------------------------------------------


@pytest.fixture
def reaped() -> Iterator[list[int]]:
    """Pids a test started or learned of; each is SIGKILLed afterwards if it still runs."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        kill_process(pid)


EXEC = [sys.executable, "-m", "turnback", "exec"]


def _running_command_pids(home: Path) -> list[int]:
    with open_engine(home) as engine:
        rows = engine.store.db.all("SELECT pid, watcher_pid FROM calls WHERE status='running'")
    return [pid for row in rows for pid in row if pid]


def test_undo_is_refused_while_a_turn_runs_and_works_once_its_holder_is_killed(
    fast_tmp: Path, reaped: list[int]
) -> None:
    case = build_undo(fast_tmp)
    holder = subprocess.Popen(["sleep", "60"])
    reaped.append(holder.pid)
    begun = run(case.home, "turn", "begin", "--session", case.session_id, "--pid", str(holder.pid), cwd=case.project)
    assert begun.rc == 0, begun.err
    refused = run(case.home, *case.args, cwd=case.project)
    assert_no_traceback(refused)
    assert refused.rc == 3, (refused.rc, refused.err)
    assert refused.err == (
        f"turnback: turn 2 is running in this session (held by process {holder.pid}); "
        "wait for it to end (turnback turn end) before taking changes back\n"
    )
    assert tree_state(case.project) == case.start
    holder.kill()
    holder.wait()
    undone = run(case.home, *case.args, cwd=case.project)
    assert undone.rc == 0, undone.err
    assert tree_state(case.project) == case.goal
    record("concurrency-busy", what="turn", refused_exit=3)


def test_undo_is_refused_while_a_command_past_its_timeout_runs(fast_tmp: Path, reaped: list[int]) -> None:
    case = build_undo(fast_tmp)
    assert run(case.home, "turn", "begin", "--session", case.session_id, cwd=case.project).rc == 0
    out = fast_tmp / "exec.out"
    with out.open("wb") as sink:  # the command left running inherits exec's output: a file, not a pipe
        timed = subprocess.run(
            [*EXEC, "--session", case.session_id, "--timeout", "0.3", "--", "sleep", "5"],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
            cwd=case.project,
            env=cli_env(case.home),
            process_group=0,
            timeout=60,
            check=False,
        )
    reaped.extend(_running_command_pids(case.home))
    assert timed.returncode == 124, out.read_text()
    assert run(case.home, "turn", "end", "--session", case.session_id, cwd=case.project).rc == 0
    refused = run(case.home, *case.args, cwd=case.project)
    assert_no_traceback(refused)
    assert refused.rc == 3, (refused.rc, refused.err)
    assert refused.err.startswith("turnback: a command is still running (sleep 5); wait for it to end"), refused.err
    assert tree_state(case.project) == case.start
    stopped = run(case.home, "jobs", "stop", refused.err.rsplit(" ", 1)[-1].strip(), cwd=case.project)
    assert stopped.rc == 0, stopped.err
    assert wait_until(lambda: run(case.home, *case.args, cwd=case.project).rc != 3, timeout=20)
    assert tree_state(case.project) == case.goal
    record("concurrency-busy", what="command past its timeout", refused_exit=3)


def test_undo_is_refused_while_a_background_job_runs(fast_tmp: Path, reaped: list[int]) -> None:
    case = build_undo(fast_tmp)
    assert run(case.home, "turn", "begin", "--session", case.session_id, cwd=case.project).rc == 0
    started = run(
        case.home, "exec", "--session", case.session_id, "--background", "--", "sleep", "30", cwd=case.project
    )
    assert started.rc == 0, started.err
    reaped.extend(_running_command_pids(case.home))
    job = started.out.split()[1]
    assert run(case.home, "turn", "end", "--session", case.session_id, cwd=case.project).rc == 0
    refused = run(case.home, *case.args, cwd=case.project)
    assert_no_traceback(refused)
    assert refused.rc == 3
    assert refused.err == (
        f"turnback: background job {job} is running (sleep 30); stop it first: turnback jobs stop {job}\n"
    )
    assert tree_state(case.project) == case.start
    assert run(case.home, "jobs", "stop", job, cwd=case.project).rc == 0
    assert wait_until(lambda: not _running_command_pids(case.home), timeout=20)
    undone = run(case.home, "undo", "1", "--session", case.session_id, "--yes", cwd=case.project)
    assert undone.rc == 0, undone.err
    assert tree_state(case.project) == case.goal
    record("concurrency-busy", what="background job", refused_exit=3)


HOLDER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {src!r})
    import turnback
    from turnback.ops.busy import session_apply_lock

    with turnback.Engine.open(sys.argv[1], key_secret={key!r}, try_keyring=False) as engine:
        with session_apply_lock(engine.store, sys.argv[2]):
            print("held", flush=True)
            time.sleep(120)
    """
)


def test_undo_is_refused_while_another_process_holds_the_apply_lock_until_it_is_killed(
    fast_tmp: Path, reaped: list[int]
) -> None:
    case = build_undo(fast_tmp)
    script = fast_tmp / "holder.py"
    script.write_text(HOLDER.format(src=str(ROOT / "src"), key=TEST_KEY))
    holder = subprocess.Popen(
        [sys.executable, str(script), str(case.home), case.session_id], stdout=subprocess.PIPE, env=cli_env(case.home)
    )
    reaped.append(holder.pid)
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    refused = run(case.home, *case.args, cwd=case.project)
    assert_no_traceback(refused)
    assert refused.rc == 3
    assert refused.err == (
        f"turnback: an undo is being applied in this session (process {holder.pid}); wait for it to finish\n"
    )
    assert tree_state(case.project) == case.start
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    holder.stdout.close()
    undone = run(case.home, *case.args, cwd=case.project)
    assert undone.rc == 0, undone.err
    assert tree_state(case.project) == case.goal
    record("concurrency-busy", what="apply lock held by another process", refused_exit=3, freed_by_kill=True)


def _thousand_file_undo(base: Path) -> tuple[Path, Path, str, dict[str, tuple[str, bytes | str | None, int]]]:
    home, root = base / "store", base / "project"
    for i in range(1000):
        path = root / f"d{i % 8}" / f"f{i:04d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"file {i} before\n".encode())
    goal = tree_state(root)
    with open_engine(home) as engine:
        session = engine.new_session(str(root))
        engine.begin_turn(session.id, "append to 1,000 files")
        result = engine.run_command(session.id, ["sh", "-c", "for f in d*/*; do echo appended >> $f; done"])
        assert result.exit_code == 0 and len(result.call.changes) == 1000
        engine.end_turn(session.id)
    return home, root, session.id, goal


def test_a_second_undo_is_refused_while_a_stopped_undo_holds_the_lock_then_resumes_it(
    tmp_path: Path, reaped: list[int]
) -> None:
    """A real 1,000-file undo is SIGSTOPped mid-way; a second undo is refused (exit 3, naming the process);
    the stopped one is SIGKILLed; the next undo finishes its work."""
    home, root, session_id, goal = _thousand_file_undo(tmp_path)
    lock = home / "locks" / f"{session_id}.lock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "turnback", "undo", "--session", session_id, "--yes"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=root,
        env=cli_env(home),
    )
    reaped.append(proc.pid)

    def midway() -> bool:  # it holds the lock and has displaced a few files already
        if not (lock.exists() and lock.read_text().strip() == str(proc.pid)):
            return False
        trash = home / "trash"
        return trash.is_dir() and sum(len(files) for _, _, files in os.walk(trash)) >= 20

    caught = wait_until(lambda: midway() or proc.poll() is not None, timeout=60, interval=0.002)
    assert caught and proc.poll() is None, "the undo ended before it could be stopped mid-way"
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        refused = run(home, "undo", "--session", session_id, "--yes", cwd=root)
        assert_no_traceback(refused)
        assert refused.rc == 3, (refused.rc, refused.err)
        assert refused.err == (
            f"turnback: an undo is being applied in this session (process {proc.pid}); wait for it to finish\n"
        )
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not process_alive(proc.pid, None)
    status = run(home, "status", "--session", session_id, cwd=root)
    interrupted = [line for line in status.lines if line.startswith("interrupted: undo ")]
    assert len(interrupted) == 1, status.out
    finished = run(home, "undo", "--session", session_id, "--yes", "--json", cwd=root)
    assert finished.rc == 0, finished.err
    assert finished.json()["resumed"] is True
    assert tree_state(root) == goal
    with open_engine(home) as engine:
        assert engine.store.ops_in_status(SessionId(session_id), "applying") == []
    record("concurrency-busy", what="a stopped undo (1,000 files)", refused_exit=3, freed_by_kill=True, resumed=1)

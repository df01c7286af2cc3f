"""Shell commands as calls: scan, run, scan; background jobs; timeouts; honest coverage; outside files.

Every test drives the real CLI as subprocesses (``turnback exec``, ``jobs``,
``covers``, ``undo``) against a real project folder, except the racy-rule
tests, which call the scanner directly so they do not depend on clock ticks.
No test leaves a process running: the ``reaper`` fixture ends what a test's
jobs and watchers left behind, by their recorded pids.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import turnback
from tests.conftest import TEST_KEY, Result, cli_env, tree_state, unprivileged_prefix
from turnback.capture.scan import FINE_RACY_WINDOW_NS, RACY_WINDOW_NS, ScanRules, scan_tree
from turnback.model import BlobId
from turnback.procs import process_alive

RULES = ScanRules(max_file_bytes=16 << 20)
JOB_WAIT_S = 20.0


# -- helpers --------------------------------------------------------------------------------


@pytest.fixture
def sid(cli) -> str:  # type: ignore[no-untyped-def]
    assert cli("init").rc == 0
    return str(cli("session", "new", "--title", "commands").out.strip())


def write_config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def _running_calls(home: Path) -> list[tuple[int | None, int | None, int | None, int | None]]:
    if not (home / "turnback.db").exists():
        return []
    with turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False) as engine:
        rows = engine.store.db.all("SELECT id FROM calls WHERE status='running' AND kind IN ('command', 'job')")
        return [engine.store.call_processes(row[0]) for row in rows]


@pytest.fixture(autouse=True)
def reaper(home: Path) -> Iterator[None]:
    """After each test: end every command, job and watcher the test's calls left running (by recorded pid)."""
    yield
    deadline = time.monotonic() + 15
    for pid, pid_start, watcher, watcher_start in _running_calls(home):
        if pid is not None and process_alive(pid, pid_start):
            try:
                group = os.getpgid(pid)
                if group == os.getpgrp():
                    os.kill(pid, signal.SIGKILL)  # a command in pytest's own group: never signal the group
                else:
                    os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while watcher is not None and process_alive(watcher, watcher_start) and time.monotonic() < deadline:
            time.sleep(0.05)
        if watcher is not None and process_alive(watcher, watcher_start):
            os.kill(watcher, signal.SIGKILL)


def jobs_json(cli, sid: str) -> list[dict[str, object]]:  # type: ignore[no-untyped-def]
    result = cli("jobs", "--session", sid, "--json")
    assert result.rc == 0, result.err
    jobs = result.json()["jobs"]
    assert isinstance(jobs, list)
    return jobs


def wait_jobs_done(cli, sid: str, timeout: float = JOB_WAIT_S) -> list[dict[str, object]]:  # type: ignore[no-untyped-def]
    """Poll ``jobs --json`` until no job or watched command of the project runs."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = jobs_json(cli, sid)
        if not any(job["status"] == "running" for job in jobs):
            return jobs
        assert time.monotonic() < deadline, f"jobs still running after {timeout} s: {jobs}"
        time.sleep(0.1)


def run_to_files(home: Path, tmp_path: Path, *args: str, cwd: Path, env: dict[str, str] | None = None) -> Result:
    """The CLI with its output in files, not pipes: a command left running past ``--timeout``
    inherits exec's stdout, and a pipe would keep the caller waiting until that command ends."""
    out_path, err_path = tmp_path / "exec.out", tmp_path / "exec.err"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.run(
            [sys.executable, "-m", "turnback", *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=cwd,
            env=cli_env(home, env),
            process_group=0,  # the command left running is in exec's group, not pytest's
            timeout=60,
            check=False,
        )
    return Result(proc.returncode, out_path.read_text(), err_path.read_text())


def rows_of(result: Result) -> list[str]:
    """A preview's rows (every line but the ``undo turn …`` headers and the note that commands' effects stay)."""
    return [
        line
        for line in result.lines
        if not line.startswith("undo turn ") and not line.startswith("only the recorded files go back: ")
    ]


# -- 1. one command, every kind of change ---------------------------------------------------


def test_one_command_that_edits_creates_deletes_renames_and_chmods_is_undone_byte_for_byte(  # type: ignore[no-untyped-def]
    cli, project: Path, sid: str
) -> None:
    before = tree_state(project)
    assert cli("turn", "begin", "--session", sid, "--message", "shell work").rc == 0
    script = (
        "printf 'appended\\n' >> README.md; "
        "printf 'x\\r\\ny' > src/pkg/crlf.txt; "
        "mkdir -p new/deep/er && printf 'fresh\\n' > new/deep/er/n.txt; "
        "printf '\\000\\001\\377' > new/bin.dat; "
        "rm docs/guide.md; "
        "mv src/main.py src/renamed.py; "
        "chmod +x src/pkg/__init__.py; chmod -x run.sh; "
        "rm link-to-readme && ln -s docs link-to-readme"
    )
    ran = cli("exec", "--session", sid, "--", "sh", "-c", script)
    assert ran.rc == 0, ran.err
    assert ran.out.startswith("deleted ")  # deletions first: none hides in "(+N more)"
    assert cli("turn", "end", "--session", sid).rc == 0
    changed = tree_state(project)
    assert changed != before
    assert stat.S_IMODE((project / "src/pkg/__init__.py").stat().st_mode) & 0o111
    log = cli("log", "--session", sid).lines
    for line in (
        "      modified README.md +1 -0",  # below the graph's lane of a first turn
        "      deleted docs/guide.md +0 -1",
        "      deleted src/main.py +0 -3",
        "      new src/renamed.py +3 -0",
        "      new new/deep/er/n.txt +1 -0",
        "      mode src/pkg/__init__.py",
        "      mode run.sh",
    ):
        assert line in log, log
    undone = cli("undo", "--yes", "--session", sid)
    assert undone.rc == 0, undone.out + undone.err
    assert tree_state(project) == before
    again = cli("undo", "--dry-run", "--session", sid)
    assert (again.rc, again.err) == (1, "turnback: nothing to undo: every turn of this session is undone\n")


# -- 2. a user's edit between commands is the new baseline ----------------------------------


def test_a_user_edit_between_two_commands_is_not_undone(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    for name in ("a.txt", "b.txt", "c.txt"):
        (project / name).write_bytes(f"{name} original\n".encode())
    cli("turn", "begin", "--session", sid)
    first = cli("exec", "--session", sid, "--", "sh", "-c", "printf 'agent one\\n' >> a.txt")
    assert (first.rc, first.out) == (0, "changed a.txt +1 -0\n")
    (project / "b.txt").write_bytes(b"the user's own edit\r\nkept\n")
    second = cli("exec", "--session", sid, "--", "sh", "-c", "printf 'agent two\\n' >> c.txt")
    assert (second.rc, second.out) == (0, "changed c.txt +1 -0\n")
    end = cli("turn", "end", "--session", sid)
    assert end.lines == ["2 files changed, +2 -0"]
    assert not any("b.txt" in line for line in cli("log", "--session", sid).lines)
    preview = cli("undo", "--dry-run", "--session", sid)
    assert preview.rc == 0
    assert rows_of(preview) == ["restore     c.txt", "restore     a.txt"]
    undone = cli("undo", "--yes", "--session", sid)
    assert undone.rc == 0
    assert not any("b.txt" in line for line in undone.lines)
    assert (project / "a.txt").read_bytes() == b"a.txt original\n"
    assert (project / "c.txt").read_bytes() == b"c.txt original\n"
    assert (project / "b.txt").read_bytes() == b"the user's own edit\r\nkept\n"


def test_a_user_edit_of_the_agents_file_between_commands_survives_the_undo(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    """Command 1 writes a.txt, the user edits it, command 2 writes it again: undo puts the user's version back."""
    (project / "a.txt").write_bytes(b"original\n")
    (project / "d.txt").write_bytes(b"d original\n")
    cli("turn", "begin", "--session", sid)
    assert cli("exec", "--session", sid, "--", "sh", "-c", "printf 'agent one\\n' > a.txt").rc == 0
    (project / "a.txt").write_bytes(b"user version, longer\n")
    (project / "d.txt").write_bytes(b"d by the user\n")
    assert cli("exec", "--session", sid, "--", "sh", "-c", "printf 'agent two\\n' >> a.txt").rc == 0
    cli("turn", "end", "--session", sid)
    preview = cli("undo", "--dry-run", "--session", sid)
    assert rows_of(preview) == [
        "restore     a.txt",
        "skip        a.txt (changed after the turn; --force overwrites it)",
    ]
    assert cli("undo", "--yes", "--session", sid).rc == 0
    assert (project / "a.txt").read_bytes() == b"user version, longer\n"
    assert (project / "d.txt").read_bytes() == b"d by the user\n"


# -- 3. the stat cache and git's racy rule --------------------------------------------------


def _same_stat_other_content(path: Path, content: bytes) -> os.stat_result:
    """Rewrite *path* with *content* (same size) and put its mtime back to exactly what it was."""
    old = path.stat()
    assert len(content) == old.st_size
    path.write_bytes(content)
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
    new = path.stat()
    assert (new.st_size, new.st_mtime_ns) == (old.st_size, old.st_mtime_ns)
    return new


def test_scan_rereads_a_racy_entry_whose_stat_is_unchanged(engine: turnback.Engine, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    path = root / "f.txt"
    path.write_bytes(b"aaaa")
    first = scan_tree(engine.store, str(root), RULES, None, now_ns=time.time_ns())
    old_entry = first.snapshot["f.txt"]
    new_stat = _same_stat_other_content(path, b"bbbb")
    # The previous snapshot's entry matches the new stat in every field the cache compares.
    same_stat = old_entry._replace(
        size=new_stat.st_size,
        mtime_ns=new_stat.st_mtime_ns,
        ctime_ns=new_stat.st_ctime_ns,
        ino=new_stat.st_ino,
        mode=new_stat.st_mode,
    )
    assert same_stat.stat_matches(new_stat)

    racy = scan_tree(engine.store, str(root), RULES, {"f.txt": same_stat._replace(racy=True)}, now_ns=time.time_ns())
    assert racy.files_read == 1
    reread = racy.snapshot["f.txt"]
    assert reread.blob != old_entry.blob
    assert reread.blob is not None and engine.load(BlobId(reread.blob)) == b"bbbb"

    trusted_entry = same_stat._replace(racy=False)
    trusted = scan_tree(engine.store, str(root), RULES, {"f.txt": trusted_entry}, now_ns=time.time_ns())
    assert trusted.files_read == 0
    assert trusted.snapshot["f.txt"] == trusted_entry  # stat unchanged and not racy: trusted, not read


def test_scan_marks_files_modified_within_a_tick_of_its_start_racy(engine: turnback.Engine, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    path = root / "f.txt"
    path.write_bytes(b"content")
    fine = 1_700_000_000_123_456_789  # a fraction of a second: a file system with fine timestamps
    os.utime(path, ns=(fine, fine))
    assert FINE_RACY_WINDOW_NS == 100_000_000
    inside = scan_tree(engine.store, str(root), RULES, None, now_ns=fine + 90_000_000)
    assert inside.snapshot["f.txt"].racy is True
    outside = scan_tree(engine.store, str(root), RULES, None, now_ns=fine + 110_000_000)
    assert outside.snapshot["f.txt"].racy is False
    # A racy entry is read again by the next scan even though nothing about the file changed ...
    again = scan_tree(engine.store, str(root), RULES, inside.snapshot, now_ns=fine + 10_000_000_000)
    assert again.files_read == 1
    assert again.snapshot["f.txt"].racy is False
    # ... and an entry that is no longer racy is then trusted.
    settled = scan_tree(engine.store, str(root), RULES, again.snapshot, now_ns=fine + 11_000_000_000)
    assert settled.files_read == 0

    whole = 1_700_000_000_000_000_000  # whole seconds: perhaps a file system that keeps only those
    os.utime(path, ns=(whole, whole))
    assert RACY_WINDOW_NS == 2_000_000_000
    assert scan_tree(engine.store, str(root), RULES, None, now_ns=whole + 1_900_000_000).snapshot["f.txt"].racy
    assert not scan_tree(engine.store, str(root), RULES, None, now_ns=whole + 2_100_000_000).snapshot["f.txt"].racy


def test_a_same_size_same_mtime_user_edit_between_commands_is_the_new_baseline(  # type: ignore[no-untyped-def]
    cli, project: Path, sid: str
) -> None:
    path = project / "same.txt"
    path.write_bytes(b"AAAA\n")
    cli("turn", "begin", "--session", sid)
    assert cli("exec", "--session", sid, "--", "true").rc == 0  # scans: same.txt is in the cache
    _same_stat_other_content(path, b"BBBB\n")  # the user, within the same tick as far as mtime tells
    ran = cli("exec", "--session", sid, "--", "sh", "-c", "printf 'agent\\n' >> same.txt")
    assert (ran.rc, ran.out) == (0, "changed same.txt +1 -0\n")
    cli("turn", "end", "--session", sid)
    assert cli("undo", "--yes", "--session", sid).rc == 0
    assert path.read_bytes() == b"BBBB\n"  # the user's bytes, not the ones before them


def test_two_same_size_writes_in_a_row_are_both_detected(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    path = project / "tick.txt"
    path.write_bytes(b"0000\n")
    writer = (
        "import os, sys\n"
        "p = 'tick.txt'\n"
        "st = os.stat(p)\n"
        "open(p, 'wb').write(sys.argv[1].encode() + b'\\n')\n"
        "os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))\n"
    )
    cli("turn", "begin", "--session", sid)
    first = cli("exec", "--session", sid, "--", sys.executable, "-c", writer, "1111")
    assert (first.rc, first.out) == (0, "changed tick.txt +1 -1\n")
    second = cli("exec", "--session", sid, "--", sys.executable, "-c", writer, "2222")
    assert (second.rc, second.out) == (0, "changed tick.txt +1 -1\n")
    cli("turn", "end", "--session", sid)
    [turn] = cli("log", "--session", sid, "--json").json()["turns"]  # type: ignore[misc]
    calls = turn["calls"]
    assert [c["changes"] for c in calls] == [[{"path": "tick.txt", "kind": "modified"}]] * 2
    assert cli("undo", "--yes", "--session", sid).rc == 0
    assert path.read_bytes() == b"0000\n"


# -- 4. background jobs ---------------------------------------------------------------------

GATED_JOB = 'until [ -e "$G" ]; do sleep .1; done; echo x > job.txt'
GATED_LATE = 'until [ -e "$G" ]; do sleep .1; done; echo late > late.txt'


def _job_id(started: Result) -> str:
    assert started.rc == 0, started.err
    words = started.out.split()
    assert words[0] == "job" and words[2] == "started", started.out
    return words[1]


def test_a_background_job_blocks_undo_then_needs_force(cli, project: Path, tmp_path: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    gate = tmp_path / "gate"  # the job ends once the test opens the gate (outside the project, never named)
    env = {"G": str(gate)}
    cli("turn", "begin", "--session", sid)
    started = cli("exec", "--session", sid, "--background", "--", "sh", "-c", GATED_JOB, env=env)
    job = _job_id(started)
    assert started.out.endswith(f": sh -c {GATED_JOB}\n")
    busy = cli("undo", "--yes", "--session", sid)
    assert busy.rc == 3
    listed = cli("jobs", "--session", sid)
    assert listed.rc == 0
    [line] = listed.lines
    assert line.startswith(f"{job}  ") and "  running (pid " in line
    assert line.endswith(f"  sh -c {GATED_JOB}")
    assert cli("turn", "end", "--session", sid).rc == 0
    busy = cli("undo", "--yes", "--session", sid)
    assert busy.rc == 3
    assert busy.err == (
        f"turnback: background job {job} is running (sh -c {GATED_JOB}); stop it first: turnback jobs stop {job}\n"
    )
    gate.touch()
    [done] = wait_jobs_done(cli, sid)
    assert done["status"] == "done" and done["exit"] == 0
    assert done["changes"] == [{"path": "job.txt", "kind": "new"}]
    preview = cli("undo", "--dry-run", "--session", sid)
    assert preview.rc == 0
    assert rows_of(preview) == [
        f"skip        job.txt (background job {job} changed it and was still running when the turn ended; "
        "--force takes that back too)"
    ]
    refused = cli("undo", "--yes", "--session", sid)
    assert refused.rc == 1
    assert refused.lines[-1] == "undo changed nothing: 1 path acts only with --force; turnback undo --force acts on it"
    assert (project / "job.txt").read_bytes() == b"x\n"
    forced = cli("undo", "--force", "--yes", "--session", sid)
    assert forced.rc == 0, forced.out + forced.err
    assert not (project / "job.txt").exists()


def test_a_job_that_ends_within_its_turn_is_undone_without_force(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid)
    _job_id(cli("exec", "--session", sid, "--background", "--", "sh", "-c", "echo q > quick.txt"))
    wait_jobs_done(cli, sid)
    assert cli("turn", "end", "--session", sid).lines == ["1 file changed, +1 -0"]
    preview = cli("undo", "--dry-run", "--session", sid)
    assert rows_of(preview) == ["trash       quick.txt"]
    assert cli("undo", "--yes", "--session", sid).rc == 0
    assert not (project / "quick.txt").exists()


def test_a_job_of_another_session_of_the_project_blocks_undo(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid)
    assert cli("exec", "--session", sid, "--", "sh", "-c", "echo mine > mine.txt").rc == 0
    cli("turn", "end", "--session", sid)
    other = cli("session", "new").out.strip()
    cli("turn", "begin", "--session", other)
    job = _job_id(cli("exec", "--session", other, "--background", "--", "sleep", "30"))
    busy = cli("undo", "--yes", "--session", sid)
    assert busy.rc == 3
    assert busy.err == (
        f"turnback: background job {job} of another session of this project is running (sleep 30); "
        f"stop it first: turnback jobs stop {job}\n"
    )
    assert (project / "mine.txt").exists()
    listed = cli("jobs", "--session", sid).lines
    assert len(listed) == 1 and listed[0].endswith("sleep 30  (another session)")
    assert cli("jobs", "stop", job).rc == 0
    wait_jobs_done(cli, sid, timeout=10)
    assert cli("undo", "--yes", "--session", sid).rc == 0
    assert not (project / "mine.txt").exists()


def test_a_job_in_another_project_does_not_block_undo(cli, project: Path, tmp_path: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid)
    assert cli("exec", "--session", sid, "--", "sh", "-c", "echo mine > mine.txt").rc == 0
    cli("turn", "end", "--session", sid)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert cli("init", cwd=elsewhere).rc == 0
    other = cli("session", "new", cwd=elsewhere).out.strip()
    cli("turn", "begin", "--session", other, cwd=elsewhere)
    job = _job_id(cli("exec", "--session", other, "--background", "--", "sleep", "30", cwd=elsewhere))
    undone = cli("undo", "--yes", "--session", sid)
    assert undone.rc == 0, undone.err
    assert not (project / "mine.txt").exists()
    assert cli("jobs", "--session", sid).lines == ["no background jobs in this project"]
    assert cli("jobs", "stop", job).rc == 0
    wait_jobs_done(cli, other, timeout=10)


def test_jobs_stop_ends_a_job_and_its_changes_are_recorded(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid)
    job = _job_id(
        cli("exec", "--session", sid, "--background", "--", "sh", "-c", "echo started > s.txt; exec sleep 30")
    )
    deadline = time.monotonic() + 10
    while not (project / "s.txt").exists():
        assert time.monotonic() < deadline, "the job never wrote s.txt"
        time.sleep(0.05)
    began = time.monotonic()
    stopped = cli("jobs", "stop", job)
    assert (stopped.rc, stopped.out) == (0, f"asked job {job} to stop: sh -c echo started > s.txt; exec sleep 30\n")
    [done] = wait_jobs_done(cli, sid, timeout=10)
    assert time.monotonic() - began < 8
    assert done["status"] == "done"
    assert done["changes"] == [{"path": "s.txt", "kind": "new"}]
    again = cli("jobs", "stop", job)
    assert (again.rc, again.err) == (1, f"turnback: {job} is not a running job\n")
    cli("turn", "end", "--session", sid)
    assert "      new s.txt +1 -0" in cli("log", "--session", sid).lines


def test_a_job_a_signal_ended_says_which_signal_and_its_json_exit_stays_negative(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid)
    script = "echo started > s.txt; exec sleep 30"
    job = _job_id(cli("exec", "--session", sid, "--background", "--", "sh", "-c", script))
    deadline = time.monotonic() + 10
    while not (project / "s.txt").exists():
        assert time.monotonic() < deadline, "the job never wrote s.txt"
        time.sleep(0.05)
    assert cli("jobs", "stop", job).rc == 0
    [done] = wait_jobs_done(cli, sid, timeout=10)
    assert done["exit"] == -signal.SIGTERM  # the exit status as Python reports it, unchanged in JSON
    [line] = cli("jobs", "--session", sid).lines
    assert line.split("  ", 2)[2] == f"ended by signal 15 (SIGTERM)  1 file changed  sh -c {script}"


# -- 5. a command past its timeout ----------------------------------------------------------


def test_a_command_past_its_timeout_runs_on_and_is_recorded_when_it_ends(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, tmp_path: Path, sid: str
) -> None:
    gate = tmp_path / "gate"  # the command ends once the test opens the gate (outside the project, never named)
    cli("turn", "begin", "--session", sid)
    timed = run_to_files(
        home,
        tmp_path,
        "exec",
        "--session",
        sid,
        "--timeout",
        "0.5",
        "--",
        "sh",
        "-c",
        GATED_LATE,
        cwd=project,
        env={"G": str(gate)},
    )
    assert timed.rc == 124
    assert timed.err.startswith("turnback: the command still runs after 0.5 s; it goes on")
    [job] = jobs_json(cli, sid)
    call = str(job["id"])[:16]
    assert job["status"] == "running"
    assert f"turnback jobs stop {call})" in timed.err
    cli("turn", "end", "--session", sid)
    busy = cli("undo", "--yes", "--session", sid)
    assert busy.rc == 3
    assert busy.err == (
        f"turnback: a command is still running ({('sh -c ' + GATED_LATE)[:59]}…); "
        f"wait for it to end, or stop it: turnback jobs stop {call}\n"
    )
    assert not (project / "late.txt").exists()
    gate.touch()
    wait_jobs_done(cli, sid)
    assert (project / "late.txt").read_bytes() == b"late\n"
    log = cli("log", "--session", sid).lines
    assert "      new late.txt +1 -0" in log
    preview = cli("undo", "--dry-run", "--session", sid)
    assert rows_of(preview) == [
        f"skip        late.txt (the command past its timeout {call} changed it and was still running when the turn "
        "ended; --force takes that back too)"
    ]
    assert cli("undo", "--force", "--yes", "--session", sid).rc == 0
    assert not (project / "late.txt").exists()


def test_stopping_a_command_past_its_timeout_spares_the_process_group_that_ran_exec(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, tmp_path: Path, sid: str
) -> None:
    # The bystander stands for the harness: exec runs in its process group, as a harness's child would.
    bystander = subprocess.Popen(["sleep", "30"], process_group=0)
    try:
        cli("turn", "begin", "--session", sid)
        with (tmp_path / "exec.out").open("wb") as out:
            proc = subprocess.run(
                [sys.executable, "-m", "turnback", "exec", "--session", sid, "--timeout", "0.3", "--", "sleep", "30"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                cwd=project,
                env=cli_env(home),
                process_group=bystander.pid,
                timeout=60,
                check=False,
            )
        assert proc.returncode == 124
        [job] = jobs_json(cli, sid)
        assert cli("jobs", "stop", str(job["id"])).rc == 0
        wait_jobs_done(cli, sid, timeout=10)
        time.sleep(0.2)
        assert bystander.poll() is None, f"the process group that ran exec got signal {-(bystander.poll() or 0)}"
    finally:
        bystander.kill()
        bystander.wait()


def test_a_command_that_ends_before_its_timeout_is_an_ordinary_call(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid)
    result = cli("exec", "--session", sid, "--timeout", "10", "--", "sh", "-c", "echo t > t.txt; exit 4")
    assert (result.rc, result.out, result.err) == (4, "new t.txt\n", "")
    assert jobs_json(cli, sid) == []


def test_a_jobs_output_goes_to_the_output_file(cli, project: Path, tmp_path: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    output = tmp_path / "job.out"
    output.write_bytes(b"earlier\n")
    cli("turn", "begin", "--session", sid)
    script = "echo to-stdout; echo to-stderr >&2; echo j > j.txt"
    _job_id(cli("exec", "--session", sid, "--background", "--output", str(output), "--", "sh", "-c", script))
    [done] = wait_jobs_done(cli, sid)
    assert output.read_bytes() == b"earlier\nto-stdout\nto-stderr\n"
    assert done["changes"] == [{"path": "j.txt", "kind": "new"}]


def test_exec_in_a_subfolder_records_project_paths(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid)
    ran = cli("exec", "--session", sid, "--", "sh", "-c", "echo x > made.txt; rm crlf.txt", cwd=project / "src" / "pkg")
    assert (ran.rc, ran.out) == (0, "deleted src/pkg/crlf.txt · new src/pkg/made.txt\n")
    cli("turn", "end", "--session", sid)
    assert cli("undo", "--yes", "--session", sid).rc == 0
    assert (project / "src/pkg/crlf.txt").read_bytes() == b"one\r\ntwo\r\n"
    assert not (project / "src/pkg/made.txt").exists()


# -- 6. what the snapshots leave out is said so ----------------------------------------------


def test_left_out_files_are_not_covered_rows_and_the_rest_is_restored(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, sid: str
) -> None:
    prefix = unprivileged_prefix()
    write_config(home, '[snapshot]\nmax_file_mib = 1\nexclude = ["*.log", "cache/"]\n')
    (project / "big.bin").write_bytes(b"\0" * (2 << 20))
    (project / "app.log").write_bytes(b"log line\n")
    (project / "keep.txt").write_bytes(b"keep\n")
    script = (
        "echo more >> big.bin; echo more >> app.log; echo new > new.log; mkfifo pipe; "
        "echo agent >> keep.txt; echo agent >> README.md; echo n > fresh.txt"
    )
    expected = [
        "not covered pipe (a FIFO, socket or device)",
        "not covered new.log (excluded by snapshot.exclude (*.log))",
        "trash       fresh.txt",
        "restore     keep.txt",
        "not covered big.bin (larger than snapshot.max_file_mib (1 MiB))",
        "not covered app.log (excluded by snapshot.exclude (*.log))",
        "restore     README.md",
    ]
    if prefix is not None:
        (project / "secret.txt").write_bytes(b"secret\n")
        (project / "secret.txt").chmod(0)
        script += "; rm secret.txt"
        expected.insert(0, "not covered secret.txt (unreadable: permission denied)")
    run = prefix or []

    def tb(*args: str) -> Result:
        return cli(*args, prefix=run)

    kept = {name: (project / name).read_bytes() for name in ("keep.txt", "README.md")}
    tb("turn", "begin", "--session", sid)
    assert tb("exec", "--session", sid, "--", "sh", "-c", script).rc == 0
    tb("turn", "end", "--session", sid)
    preview = tb("undo", "--dry-run", "--session", sid)
    assert preview.rc == 0
    assert sorted(rows_of(preview)) == sorted(expected)
    undone = tb("undo", "--yes", "--session", sid)
    assert undone.rc == 0, undone.out + undone.err
    done_at = next(i for i, line in enumerate(undone.lines) if line.startswith("undone: "))
    assert undone.lines[done_at].startswith("undone: 2 files restored, 1 file moved to ")
    assert undone.lines[done_at + 1 :] == [row for row in rows_of(preview) if row.startswith("not covered")]
    assert {name: (project / name).read_bytes() for name in kept} == kept
    assert not (project / "fresh.txt").exists()
    assert (project / "big.bin").read_bytes().endswith(b"more\n")  # left as the command made it
    assert (project / "app.log").read_bytes() == b"log line\nmore\n"
    assert stat.S_ISFIFO((project / "pipe").lstat().st_mode)


def test_an_in_place_edit_inside_an_excluded_folder_is_reported(cli, home: Path, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    write_config(home, '[snapshot]\nexclude = ["cache/"]\n')
    (project / "cache").mkdir()
    (project / "cache" / "data").write_bytes(b"cached\n")
    cli("turn", "begin", "--session", sid)
    assert cli("exec", "--session", sid, "--", "sh", "-c", "echo more >> cache/data").rc == 0
    cli("turn", "end", "--session", sid)
    preview = cli("undo", "--dry-run", "--session", sid)
    assert any(row.startswith("not covered cache") for row in rows_of(preview)), preview.out + preview.err


# -- 7. covers ------------------------------------------------------------------------------

COVERED = "covered: turnback undo takes back what it changes"


@pytest.fixture
def left_out(home: Path, project: Path) -> Path:
    """A project with an over-size file, excluded paths and a FIFO, and a big folder in HOME."""
    write_config(home, '[snapshot]\nmax_file_mib = 1\nhome_max_files = 3\nexclude = ["*.log", "cache/"]\n')
    (project / "big.bin").write_bytes(b"\0" * (2 << 20))
    (project / "app.log").write_bytes(b"log\n")
    (project / "cache").mkdir()
    (project / "cache" / "x").write_bytes(b"x\n")
    os.mkfifo(project / "pipe")
    outside = home.parent
    (outside / ".zshrc").write_bytes(b"export A=1\n")
    (outside / "big").mkdir()
    for i in range(5):
        (outside / "big" / f"{i}.txt").write_bytes(b"%d\n" % i)
    return project


@pytest.mark.parametrize(
    ("argv", "reasons"),
    [
        (["rm", "README.md"], None),
        (["sh", "-c", "echo x >> ~/.zshrc"], None),
        (["rm", "-r", "src"], None),
        (["shred", "README.md"], ["shred destroys file contents on purpose"]),
        (
            ["git", "clean", "-fdx"],  # it removes what is untracked in the folder, each path left out too
            [
                "git clean -x removes ignored files, which the snapshots may leave out",
                "app.log is not covered: excluded by snapshot.exclude (*.log)",
                "big.bin is not covered: larger than snapshot.max_file_mib (1 MiB)",
                "cache is not covered: excluded by snapshot.exclude (cache/)",
                "pipe is not covered: a FIFO, socket or device",
            ],
        ),
        (["rm", "big.bin"], ["big.bin is not covered: larger than snapshot.max_file_mib (1 MiB)"]),
        (["sh", "-c", "rm -f app.log"], ["app.log is not covered: excluded by snapshot.exclude (*.log)"]),
        (["rm", "-r", "cache"], ["cache is not covered: excluded by snapshot.exclude (cache/)"]),
        (["rm", "pipe"], ["pipe is not covered: a FIFO, socket or device"]),
        (
            ["sh", "-c", "rm -r ~/big"],
            [
                "{outside}/big: a folder over snapshot.home_max_files (3) or snapshot.home_max_mib (256 MiB), "
                "so it is not copied"
            ],
        ),
    ],
)
def test_covers_answers(cli, home: Path, left_out: Path, sid: str, argv: list[str], reasons: list[str] | None) -> None:  # type: ignore[no-untyped-def]
    result = cli("covers", "--session", sid, "--", *argv)
    if reasons is None:
        assert (result.rc, result.out) == (0, COVERED + "\n")
        return
    outside = os.path.realpath(home.parent)
    assert result.rc == 1
    assert result.lines == ["not covered:", *[f"  {r.format(outside=outside)}" for r in reasons]]
    data = cli("covers", "--session", sid, "--json", "--", *argv).json()
    assert data["covered"] is False


def test_covers_an_outside_path_in_mode_manual(cli, home: Path, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    (home.parent / ".zshrc").write_bytes(b"export A=1\n")
    assert cli("covers", "--session", sid, "--", "sh", "-c", "echo x >> ~/.zshrc").out == COVERED + "\n"
    write_config(home, 'mode = "manual"\n')
    result = cli("covers", "--session", sid, "--", "sh", "-c", "echo x >> ~/.zshrc")
    assert result.rc == 1
    outside = os.path.realpath(home.parent)
    assert result.lines == ["not covered:", f"  {outside}/.zshrc: mode manual copies nothing outside the project"]
    inside = cli("covers", "--session", sid, "--", "rm", "README.md")
    assert (inside.rc, inside.out) == (0, COVERED + "\n")


def test_covers_sees_files_made_after_the_last_scan(cli, home: Path, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    """The answer must be about the tree as it is now, not as the last command's scan left it."""
    write_config(home, '[snapshot]\nmax_file_mib = 1\nexclude = ["*.log"]\n')
    cli("turn", "begin", "--session", sid)
    assert cli("exec", "--session", sid, "--", "true").rc == 0  # leaves a stat cache
    cli("turn", "end", "--session", sid)
    (project / "big.bin").write_bytes(b"\0" * (2 << 20))
    (project / "new.log").write_bytes(b"log\n")
    big = cli("covers", "--session", sid, "--", "rm", "big.bin")
    assert (big.rc, big.lines) == (
        1,
        ["not covered:", "  big.bin is not covered: larger than snapshot.max_file_mib (1 MiB)"],
    )
    log = cli("covers", "--session", sid, "--", "rm", "new.log")
    assert (log.rc, log.lines) == (
        1,
        ["not covered:", "  new.log is not covered: excluded by snapshot.exclude (*.log)"],
    )


# -- 8. files outside the project -----------------------------------------------------------


def test_an_outside_file_named_on_the_command_line_is_copied_and_restored(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, tmp_path: Path, sid: str
) -> None:
    user_home = tmp_path / "userhome"
    user_home.mkdir()
    rc = user_home / ".zshrc"
    original = b"export A=1\r\n\x00\xff no final newline"
    rc.write_bytes(original)
    rc.chmod(0o600)
    env = {"HOME": str(user_home)}
    cli("turn", "begin", "--session", sid, env=env)
    ran = cli("exec", "--session", sid, "--", "sh", "-c", "echo x >> ~/.zshrc; echo y > ~/.created", env=env)
    assert (ran.rc, ran.out) == (0, "changed ~/.zshrc · new ~/.created\n")
    assert rc.read_bytes() == original + b"x\n"
    end = cli("turn", "end", "--session", sid, env=env)
    assert end.lines == [
        "changed ~/.zshrc; turnback undo reverts it",
        "changed ~/.created; turnback undo reverts it",
    ]
    preview = cli("undo", "--dry-run", "--session", sid, env=env)
    assert rows_of(preview) == ["trash       ~/.created", "restore     ~/.zshrc"]
    assert cli("undo", "--yes", "--session", sid, env=env).rc == 0
    assert rc.read_bytes() == original
    assert not (user_home / ".created").exists()
    assert stat.S_IMODE(rc.stat().st_mode) == 0o600


def test_an_outside_folder_named_on_the_command_line_is_copied_whole(cli, home: Path, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    notes = home.parent / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "a.md").write_bytes(b"alpha\n")
    (notes / "sub" / "b.md").write_bytes(b"beta\x00\n")
    before = tree_state(notes)
    cli("turn", "begin", "--session", sid)
    assert cli("exec", "--session", sid, "--", "sh", "-c", "rm -r ~/notes").rc == 0
    assert not notes.exists()
    end = cli("turn", "end", "--session", sid)
    assert "changed ~/notes/a.md; turnback undo reverts it" in end.lines
    assert "changed ~/notes/sub/b.md; turnback undo reverts it" in end.lines
    assert cli("undo", "--yes", "--session", sid).rc == 0
    assert tree_state(notes) == before


def test_an_outside_folder_over_the_limits_is_not_copied_and_said_so(cli, home: Path, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    write_config(home, "[snapshot]\nhome_max_files = 3\n")
    big = home.parent / "big"
    big.mkdir()
    for i in range(5):
        (big / f"{i}.txt").write_bytes(b"%d\n" % i)
    reason = "a folder over snapshot.home_max_files (3) or snapshot.home_max_mib (256 MiB), so it is not copied"
    cli("turn", "begin", "--session", sid)
    ran = cli("exec", "--session", sid, "--", "sh", "-c", "rm -r ~/big")
    assert (ran.rc, ran.out) == (0, "deleted ~/big (not covered)\n")
    end = cli("turn", "end", "--session", sid)
    assert end.lines == [f"changed ~/big outside the project; not covered: {reason}"]
    preview = cli("undo", "--dry-run", "--session", sid)
    assert rows_of(preview) == [f"not covered ~/big ({reason})"]


def test_an_in_place_edit_inside_an_outside_folder_over_the_limits_is_said_so(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, sid: str
) -> None:
    write_config(home, "[snapshot]\nhome_max_files = 3\n")
    big = home.parent / "big"
    big.mkdir()
    for i in range(5):
        (big / f"{i}.txt").write_bytes(b"%d\n" % i)
    reason = "a folder over snapshot.home_max_files (3) or snapshot.home_max_mib (256 MiB), so it is not copied"
    cli("turn", "begin", "--session", sid)
    assert cli("exec", "--session", sid, "--", "sh", "-c", "cd ~/big && echo more >> 1.txt").rc == 0
    assert (big / "1.txt").read_bytes() == b"1\nmore\n"
    end = cli("turn", "end", "--session", sid)
    assert f"changed ~/big outside the project; not covered: {reason}" in end.lines, end.out


def test_mode_manual_copies_nothing_outside_and_says_so(cli, home: Path, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    write_config(home, 'mode = "manual"\n')
    rc = home.parent / ".zshrc"
    rc.write_bytes(b"export A=1\n")
    reason = "mode manual copies nothing outside the project"
    cli("turn", "begin", "--session", sid)
    ran = cli("exec", "--session", sid, "--", "sh", "-c", "echo x >> ~/.zshrc")
    assert (ran.rc, ran.out) == (0, "changed ~/.zshrc (not covered)\n")
    end = cli("turn", "end", "--session", sid)
    assert end.lines == [f"changed ~/.zshrc outside the project; not covered: {reason}"]
    preview = cli("undo", "--dry-run", "--session", sid)
    assert rows_of(preview) == [f"not covered ~/.zshrc ({reason})"]
    undone = cli("undo", "--yes", "--session", sid)
    assert undone.rc == 1
    assert undone.lines[-2:] == ["undo changed nothing", f"not covered ~/.zshrc ({reason})"]
    assert rc.read_bytes() == b"export A=1\nx\n"


# -- 9. commands the harness ran unasked ----------------------------------------------------


def test_an_unasked_command_adds_the_turn_end_line(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    script = "echo a > u1.txt; printf 'x\\ny\\n' > u2.txt; echo q >> README.md"
    cli("turn", "begin", "--session", sid)
    assert cli("exec", "--session", sid, "--", "sh", "-c", "echo asked > asked.txt").rc == 0
    assert cli("exec", "--session", sid, "--unasked", "--", "sh", "-c", script).rc == 0
    end = cli("turn", "end", "--session", sid)
    assert end.lines == [
        "4 files changed, +5 -0 (docs +1)",
        "changed 4 files (+5 -0) in ~/project; turnback undo reverts this turn",
    ]
    cli("turn", "begin", "--session", sid)
    assert cli("exec", "--session", sid, "--", "sh", "-c", "echo b > v.txt").rc == 0
    assert cli("turn", "end", "--session", sid).lines == ["1 file changed, +1 -0"]  # asked: no such line


# -- 10. exec's own exit statuses ------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["sh", "-c", "exit 7"], 7),
        (["sh", "-c", "exit 255"], 255),
        (["true"], 0),
        (["sh", "-c", "kill -9 $$"], 128 + 9),
    ],
)
def test_exec_exits_with_the_commands_status(cli, sid: str, argv: list[str], code: int) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid)
    result = cli("exec", "--session", sid, "--", *argv)
    assert (result.rc, result.err) == (code, "")


def test_exec_exits_127_126_and_125_with_one_line(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    no_turn = cli("exec", "--session", sid, "--", "true")
    assert (no_turn.rc, no_turn.err) == (
        125,
        "turnback: no turn is running in this session; begin one first (turnback turn begin)\n",
    )
    cli("turn", "begin", "--session", sid)
    missing = cli("exec", "--session", sid, "--", "no-such-command-xyz", "arg")
    assert (missing.rc, missing.out, missing.err) == (
        127,
        "",
        "turnback: no-such-command-xyz: No such file or directory\n",
    )
    not_executable = cli("exec", "--session", sid, "--", "./README.md")
    assert (not_executable.rc, not_executable.err) == (126, "turnback: ./README.md: Permission denied\n")
    empty = cli("exec", "--session", sid)
    assert (empty.rc, empty.err) == (125, "turnback: give the command to run\n")
    for result in (no_turn, missing, not_executable, empty):
        assert "Traceback" not in result.err
    ran = cli("exec", "--session", sid, "--", "sh", "-c", "echo after > after.txt")
    assert (ran.rc, ran.out) == (0, "new after.txt\n")
    log = cli("log", "--session", sid, "--json").json()
    [turn] = log["turns"]  # type: ignore[misc]
    assert [c["status"] for c in turn["calls"]] == ["failed", "failed", "done"]


def test_exec_json_keeps_stdout_for_the_object(cli, sid: str) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid)
    result = cli("exec", "--session", sid, "--json", "--", "sh", "-c", "echo printed; echo x > j.txt; exit 3")
    assert result.rc == 3
    data = json.loads(result.out)
    assert data["exit"] == 3 and data["line"] == "new j.txt"
    assert data["call"]["changes"] == [{"path": "j.txt", "kind": "new"}]
    assert result.err == "printed\nnew j.txt\n"


# -- no-op rows -------------------------------------------------------------------------------


def _git_objects_adopted(home: Path) -> bool:
    """Whether the project's stat cache holds copies, not git objects, for every file (the background copy ran)."""
    from turnback.capture.scan import load_snapshot

    with turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False) as engine:
        [(project_id,)] = engine.store.db.all("SELECT id FROM projects")
        cached = engine.store.latest_snapshot(project_id)
        if cached is None:
            return False
        snapshot = load_snapshot(engine.store, cached.id, cached.data).snapshot
        return bool(snapshot) and not any(entry.git_oid for entry in snapshot.values())


def test_a_file_rewritten_with_its_own_bytes_is_no_change_while_git_objects_are_copied_in(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, tmp_path: Path, sid: str
) -> None:
    """The first command in a git repository starts from git's objects; the background copy of them replaces
    the stat cache while it runs, so its scan after sees stored copies: the same content, not a change.
    A file it rewrites with the same bytes (a new inode, a new ctime) is no change either."""
    past = time.time() - 3600
    for path in [project, *project.rglob("*")]:
        os.utime(path, (past, past), follow_symlinks=False)  # older than git's index: each entry vouched for
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run([*git, *args], cwd=project, check=True, capture_output=True)
    before = tree_state(project)
    gate = tmp_path / "gate"
    cli("turn", "begin", "--session", sid)
    script = 'until [ -e "$G" ]; do sleep .1; done; cp README.md r.tmp && mv r.tmp README.md; touch docs/guide.md'
    proc = subprocess.Popen(
        [sys.executable, "-m", "turnback", "exec", "--session", sid, "--", "sh", "-c", script],
        cwd=project,
        env=cli_env(home, {"G": str(gate)}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + JOB_WAIT_S
    while not _git_objects_adopted(home):
        assert proc.poll() is None and time.monotonic() < deadline, "git's objects were never copied in"
        time.sleep(0.1)
    gate.touch()
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (0, b"", b"")
    assert tree_state(project) == before
    log = cli("log", "--session", sid, "--json").json()
    [turn] = log["turns"]  # type: ignore[misc]
    [call] = turn["calls"]
    assert call["changes"] == []
    shown = cli("show", call["id"])
    assert shown.rc == 0
    [header] = shown.lines  # the call's line (its command cut short to fit), and no path under it
    assert header.startswith(f"call {call['id'][:16]}  exec sh -c 'until ") and header.endswith("  (turn 1)")

"""A command that ran while a background job did: the job's change is the job's, not the command's.

A command's change is what differs between its scans, so a foreground command
run while a job runs sees the job's write too (no tool tells who wrote a
file: inotify names no process). The call that ended later, the job, saw
it in its own end scan: it is the job's. The foreground call's row stays (it
may be its), but reverting that call, or undoing its turn without the job,
leaves it unless ``--anyway`` / ``--force``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.capture import test_commands
from tests.capture.test_commands import rows_of, wait_jobs_done
from tests.conftest import Result, cli_env
from tests.history.helpers import new_session

sid = test_commands.sid  # the fixtures: a session, and every job left running ended after each test
reaper = test_commands.reaper

# The job waits for gate 1, writes job.txt, then waits for gate 2 before it ends.
JOB = 'until [ -e "$G1" ]; do sleep .1; done; echo job > job.txt; until [ -e "$G2" ]; do sleep .1; done'
# The foreground call only reads: it opens gate 1 and waits until the job's write is there.
READER = 'touch "$G1"; until [ -s job.txt ]; do sleep .1; done; cat job.txt'


def _job_id(started: Result) -> str:
    assert started.rc == 0, started.err
    words = started.out.split()
    assert words[0] == "job" and words[2] == "started", started.out
    return words[1]


def _calls(cli, sid: str) -> list[dict[str, object]]:  # type: ignore[no-untyped-def]
    log = cli("log", "--session", sid, "--json").json()
    return [call for turn in log["turns"] for call in turn["calls"]]


def _overlapped(cli, sid: str, tmp_path: Path, *, end_turn_first: bool) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """Run the job and, meanwhile, the reader; the job's and the reader's call ids once the job has ended."""
    env = {"G1": str(tmp_path / "gate1"), "G2": str(tmp_path / "gate2")}
    cli("turn", "begin", "--session", sid)
    job = _job_id(cli("exec", "--session", sid, "--background", "--", "sh", "-c", JOB, env=env))
    read = cli("exec", "--session", sid, "--", "sh", "-c", READER, env=env)
    assert (read.rc, read.out) == (0, f"job\nnew job.txt (may be background job {job}'s, which still runs)\n"), read.err
    if end_turn_first:
        assert cli("turn", "end", "--session", sid).rc == 0
    (tmp_path / "gate2").touch()
    [done] = wait_jobs_done(cli, sid)
    assert done["changes"] == [{"path": "job.txt", "kind": "new"}]
    if not end_turn_first:
        assert cli("turn", "end", "--session", sid).rc == 0
    [job_call, reader] = _calls(cli, sid)
    assert str(job_call["id"]).startswith(job)
    return str(job_call["id"]), str(reader["id"])


def test_reverting_a_read_only_command_run_during_a_job_keeps_the_jobs_file(  # type: ignore[no-untyped-def]
    cli, project: Path, tmp_path: Path, sid: str
) -> None:
    job, reader = _overlapped(cli, sid, tmp_path, end_turn_first=False)
    shown = cli("show", reader)
    assert shown.lines[1:] == [
        f"new job.txt +1 -0 (may be background job {job[:16]}'s, which ran meanwhile)",
        "--- /dev/null",
        "+++ b/job.txt",
        "@@ -0,0 +1 @@",
        "+job",
    ]
    held = f"skip        job.txt (the change may be background job {job[:16]}'s, which ran meanwhile; "
    preview = cli("revert", reader, "--dry-run")
    assert preview.rc == 0, preview.err
    assert preview.lines[1:] == [
        held + "--anyway takes it back too)",
        "job.txt: from what it holds now back to what it held before the call:",
        "--- a/job.txt",
        "+++ /dev/null",
        "@@ -1 +0,0 @@",
        "-job",
    ]
    refused = cli("revert", reader, "--yes")
    assert refused.lines[-1] == (
        f"revert changed nothing: 1 path acts only with --anyway; turnback revert {reader[:16]} --anyway acts on it"
    )
    assert refused.rc == 1, refused.out + refused.err
    assert (project / "job.txt").read_bytes() == b"job\n"
    anyway = cli("revert", reader, "--anyway", "--yes")
    assert anyway.rc == 0, anyway.out + anyway.err
    assert not (project / "job.txt").exists()


def test_undoing_the_turn_of_the_job_and_the_command_takes_the_jobs_file_back(  # type: ignore[no-untyped-def]
    cli, project: Path, tmp_path: Path, sid: str
) -> None:
    _overlapped(cli, sid, tmp_path, end_turn_first=False)
    preview = cli("undo", "--dry-run", "--session", sid)
    assert rows_of(preview) == ["trash       job.txt"]
    undone = cli("undo", "--yes", "--session", sid)
    assert undone.rc == 0, undone.out + undone.err
    assert not (project / "job.txt").exists()


def test_a_late_jobs_file_seen_by_a_command_of_its_turn_needs_force(  # type: ignore[no-untyped-def]
    cli, project: Path, tmp_path: Path, sid: str
) -> None:
    job, _reader = _overlapped(cli, sid, tmp_path, end_turn_first=True)
    late = (
        f"skip        job.txt "
        f"(background job {job[:16]} changed it and was still running when the turn ended; --force takes that back too)"
    )
    preview = cli("undo", "--dry-run", "--session", sid)
    assert rows_of(preview) == [late]
    refused = cli("undo", "--yes", "--session", sid)
    assert refused.rc == 1, refused.out + refused.err
    assert (project / "job.txt").read_bytes() == b"job\n"
    forced = cli("undo", "--force", "--yes", "--session", sid)
    assert forced.rc == 0, forced.out + forced.err
    assert not (project / "job.txt").exists()


def test_reverting_the_job_takes_its_file_back_though_a_command_saw_it_too(  # type: ignore[no-untyped-def]
    cli, project: Path, tmp_path: Path, sid: str
) -> None:
    job, reader = _overlapped(cli, sid, tmp_path, end_turn_first=False)
    shown = cli("show", job)
    assert shown.lines[1] == "new job.txt +1 -0"
    preview = cli("revert", job, "--dry-run")
    assert preview.lines[1] == "trash       job.txt"
    reverted = cli("revert", job, "--yes")
    assert reverted.rc == 0, reverted.out + reverted.err
    assert not (project / "job.txt").exists()
    again = cli("revert", reader, "--yes")  # what the command saw is gone too: nothing of it to take back
    assert again.rc == 0, again.out + again.err
    assert not (project / "job.txt").exists()


def test_a_file_tools_write_during_a_job_is_the_tools_when_the_job_is_reverted(  # type: ignore[no-untyped-def]
    cli, project: Path, tmp_path: Path, sid: str
) -> None:
    gate = tmp_path / "gate"
    cli("turn", "begin", "--session", sid)
    script = 'echo job > job.txt; until [ -e "$G" ]; do sleep .1; done'
    job = _job_id(cli("exec", "--session", sid, "--background", "--", "sh", "-c", script, env={"G": str(gate)}))
    wrote = cli("write", "--session", sid, "tool.txt", stdin=b"tool\n")
    assert wrote.rc == 0, wrote.err
    gate.touch()
    [done] = wait_jobs_done(cli, sid)
    assert done["changes"] == [{"path": "job.txt", "kind": "new"}, {"path": "tool.txt", "kind": "new"}]
    [_job_call, tool] = _calls(cli, sid)
    note = f"may be call {str(tool['id'])[:16]}'s, which ran meanwhile"
    shown = cli("show", job).lines
    assert [line for line in shown if line.startswith("new ")] == ["new job.txt +1 -0", f"new tool.txt +1 -0 ({note})"]
    assert cli("turn", "end", "--session", sid).rc == 0
    reverted = cli("revert", job, "--yes")
    assert reverted.rc == 0, reverted.out + reverted.err
    assert f"skip        tool.txt (the change {note}; --anyway takes it back too)" in reverted.lines
    assert not (project / "job.txt").exists()
    assert (project / "tool.txt").read_bytes() == b"tool\n"


def test_another_sessions_write_during_a_command_is_marked_in_its_log_and_undo_keeps_it(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, tmp_path: Path, sid: str
) -> None:
    """Issue 13 item 8: session B's harness write that starts before session A's command and lands during it."""
    other = new_session(cli)
    assert cli("turn", "begin", "--session", sid).rc == 0
    assert cli("turn", "begin", "--session", other).rc == 0
    before = cli("call", "before", "--session", other, "--tool", "Write", "shared.txt")
    assert before.rc == 0, before.err
    written_by_b = before.out.strip()
    gate1, gate2 = tmp_path / "gate1", tmp_path / "gate2"
    script = 'touch "$G1"; until [ -e "$G2" ]; do sleep .1; done'
    command = subprocess.Popen(
        [sys.executable, "-m", "turnback", "exec", "--session", sid, "--", "sh", "-c", script],
        cwd=project,
        env={**cli_env(home), "G1": str(gate1), "G2": str(gate2)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not gate1.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    (project / "shared.txt").write_bytes(b"session B\n")
    assert cli("call", "after", written_by_b, "shared.txt").rc == 0
    gate2.touch()
    out, err = command.communicate(timeout=60)
    assert command.returncode == 0, err
    note = f"may be call {written_by_b[:16]}'s, which ran meanwhile"
    assert out.decode().splitlines() == [f"new shared.txt ({note})"]
    for session in (sid, other):
        assert cli("turn", "end", "--session", session).rc == 0

    log = cli("log", "--session", sid)
    assert f"      new shared.txt +1 -0 ({note})" in log.lines, log.lines
    [item] = [
        c
        for turn in cli("log", "--session", sid, "--json").json()["turns"]
        for call in turn["calls"]
        for c in call["changes"]
    ]
    assert item["path"] == "shared.txt"
    assert (item["may_be"]["code"], item["may_be"]["message"]) == ("may_be_call_ran_meanwhile", note)
    assert "may_be" not in cli("log", "--session", other, "--json").json()["turns"][0]["calls"][0]["changes"][0]

    undone = cli("undo", "--yes", "--session", sid)
    assert f"skip        shared.txt (the change {note}; --force takes it back too)" in undone.lines, undone.lines
    assert (project / "shared.txt").read_bytes() == b"session B\n"

"""Injected I/O errors: ENOSPC, EIO, EACCES, and files that vanish or grow under a scan.

Whatever fails, the item fails with a clear message, the original stays intact
(no path ever holds a mix, an empty or a truncated file; no temp file stays),
the operation can be finished later (``turnback undo N``), and no traceback
reaches the user (the exit code is never 70).

- ``TURNBACK_FAULT=enospc@N``: the N-th content write fails with ENOSPC (a
  restore into the project, a copy into the trash), in an undo and in a
  file-tool write.
- ``TURNBACK_FAULT=eio@N``: the N-th fsync fails with EIO (a temp file's, or a
  folder's after the rename), in an undo and in a file-tool write.
- EACCES: a folder made read-only (0555) and the CLI run without root's power
  to ignore permissions (``unprivileged_prefix``).
- A scan race: the library's ``run_command`` scans while files vanish between
  their stat and their open, grow between stat and read, grow while read
  (deterministic hooks around ``os.open``/``os.read``), and while a thread
  appends to and deletes files as fast as it can.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import turnback
from tests.conftest import tree_state, unprivileged_prefix
from tests.reliability.helpers import (
    SOAK,
    TreeState,
    assert_no_traceback,
    files_under,
    is_temp,
    record,
    run,
    temp_files,
)
from tests.reliability.scenarios import build_undo, new_content, old_content


def _assert_old_or_new(now: TreeState, old: TreeState, new: TreeState) -> None:
    for rel in sorted(set(old) | set(new) | set(now)):
        assert not is_temp(rel), f"a temp file was left: {rel}"
        assert now.get(rel) in (old.get(rel), new.get(rel)), f"{rel} holds neither its old nor its new state"


# -- ENOSPC and EIO during an undo ---------------------------------------------------------------

# The undo scenario's rows: 10 restores of deleted files (content writes 1-10), 10 created files copied to
# the trash (11-20), then 30 modified files, each copied to the trash and restored (21, 22, ...).
# fsyncs: each atomic write fsyncs its temp file and then its folder.
UNDO_FAULTS = {
    "enospc@1": ("a restore into the project", "No space left on device"),
    "enospc@11": ("a copy into the trash of a created file", "No space left on device"),
    "enospc@21": ("a copy into the trash of a modified file", "No space left on device"),
    "enospc@22": ("the restore of a modified file after its trash copy", "No space left on device"),
    "eio@1": ("the fsync of a restored file's temp file", "Input/output error"),
    "eio@2": ("the fsync of a folder after a rename", "Input/output error"),
    "eio@3": ("the fsync of the next temp file", "Input/output error"),
}


@pytest.mark.parametrize("fault", sorted(UNDO_FAULTS))
def test_enospc_and_eio_during_an_undo_fail_one_row_and_undo_n_finishes(fast_tmp: Path, fault: str) -> None:
    case = build_undo(fast_tmp)
    assert case.goal is not None
    _where, message = UNDO_FAULTS[fault]
    result = run(case.home, *case.args, "--json", cwd=case.project, env={"TURNBACK_FAULT": fault})
    assert_no_traceback(result)
    assert result.rc == 0, (result.rc, result.err)
    rows = result.json()["rows"]
    failed = [row for row in rows if row["status"] == "failed"]
    assert len(failed) == 1, failed
    assert failed[0]["note"] == message, failed
    # A folder the agent made keeps the file that could not go to the trash, so it stays too, and says why.
    left = [row for row in rows if row["status"] not in ("done", "failed")]
    for row in left:
        assert row["status"] == "skipped" and failed[0]["path"].startswith(row["path"] + "/"), row
        assert row["note"].startswith("the folder is not empty"), row
    _assert_old_or_new(tree_state(case.project), case.start, case.goal)
    assert temp_files(case.project) == [] and temp_files(case.home / "trash") == []
    assert run(case.home, "verify", cwd=case.project).rc == 0

    finished = run(case.home, "undo", "1", "--session", case.session_id, "--yes", "--json", cwd=case.project)
    assert_no_traceback(finished)
    assert finished.rc == 0, (finished.rc, finished.out, finished.err)
    rows_again = finished.json()["rows"]
    assert {row["path"] for row in rows_again} == {row["path"] for row in failed + left}, rows_again
    assert all(row["status"] == "done" for row in rows_again), rows_again
    assert tree_state(case.project) == case.goal
    assert temp_files(case.project) == [] and temp_files(case.home / "trash") == []
    # Nothing displaced is lost: each post-turn file the undos replaced or removed is in one of their trash folders.
    trashed: dict[str, bytes] = {}
    for folder in (case.home / "trash").iterdir():
        trashed.update(files_under(folder))
    for rel, (kind, content, _mode) in case.start.items():
        if kind == "file" and case.goal.get(rel) != case.start[rel]:
            assert trashed.get(rel) == content, f"{rel}: its post-turn bytes are in no trash folder"
    record("fault-undo", fault=fault, faults_injected=1, rows_failed=1, resumed=1, bytes_lost=0)


def test_a_plain_undo_after_a_failed_row_names_what_is_left(fast_tmp: Path) -> None:
    case = build_undo(fast_tmp)
    result = run(case.home, *case.args, cwd=case.project, env={"TURNBACK_FAULT": "enospc@1"})
    assert result.rc == 0, result.err
    again = run(case.home, *case.args, cwd=case.project)
    assert_no_traceback(again)
    assert again.err == (
        "turnback: nothing to undo but what turn 1 kept (it is partly undone): turnback undo 1 plans it again\n"
    )


# -- ENOSPC and EIO during a file-tool write ------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("enospc@1", "No space left on device"),
        ("eio@1", "Input/output error"),  # the temp file's fsync, before the rename
    ],
)
def test_a_file_tool_write_that_fails_before_its_rename_leaves_the_file_as_it_was(
    fast_tmp: Path, fault: str, message: str
) -> None:
    case = build_undo(fast_tmp)
    begun = run(case.home, "turn", "begin", "--session", case.session_id, cwd=case.project)
    assert begun.rc == 0, begun.err
    before = tree_state(case.project)
    for path in ("r00.txt", "a/b/b00.bin"):
        written = run(
            case.home,
            "write",
            "--session",
            case.session_id,
            path,
            cwd=case.project,
            stdin=b"the agent's new bytes\n",
            env={"TURNBACK_FAULT": fault},
        )
        assert_no_traceback(written)
        assert written.rc == 1, (written.rc, written.err)
        assert written.err == f"turnback: cannot write {path}: {message}; it holds what it held before\n"
        assert tree_state(case.project) == before
        assert temp_files(case.project) == []
    assert run(case.home, "turn", "end", "--session", case.session_id, cwd=case.project).rc == 0
    log = run(case.home, "log", "--session", case.session_id, "--json", cwd=case.project)
    [second] = [turn for turn in log.json()["turns"] if turn["number"] == 2]
    assert [call["status"] for call in second["calls"]] == ["failed", "failed"]
    assert all(call["changes"] == [] for call in second["calls"]), second
    assert run(case.home, "verify", cwd=case.project).rc == 0
    record("fault-write", fault=fault, faults_injected=2, bytes_lost=0)


def test_a_file_tool_write_whose_folder_fsync_fails_is_recorded_as_written(fast_tmp: Path) -> None:
    """EIO on the folder's fsync comes after the rename: the file holds the new bytes, and the record says so."""
    case = build_undo(fast_tmp)
    assert run(case.home, "turn", "begin", "--session", case.session_id, cwd=case.project).rc == 0
    old = (case.project / "r00.txt").read_bytes()
    written = run(
        case.home,
        "write",
        "--session",
        case.session_id,
        "r00.txt",
        cwd=case.project,
        stdin=b"the agent's new bytes\n",
        env={"TURNBACK_FAULT": "eio@2"},
    )
    assert_no_traceback(written)
    assert written.rc == 1
    assert written.err == (
        "turnback: cannot write r00.txt: Input/output error; "
        "it holds the new content, which a power cut may still undo; the call keeps its copy\n"
    )
    assert (case.project / "r00.txt").read_bytes() == b"the agent's new bytes\n"
    assert run(case.home, "turn", "end", "--session", case.session_id, cwd=case.project).rc == 0
    undone = run(case.home, "undo", "--session", case.session_id, "--yes", cwd=case.project)
    assert undone.rc == 0, undone.err
    assert (case.project / "r00.txt").read_bytes() == old
    record("fault-write", fault="eio@2", faults_injected=1, bytes_lost=0)


# -- EACCES --------------------------------------------------------------------------------------


def test_a_read_only_folder_fails_its_rows_and_undo_n_finishes_after_chmod(fast_tmp: Path) -> None:
    prefix = unprivileged_prefix()
    if prefix is None:
        pytest.skip("running as root without setpriv: root ignores folder permissions")
    case = build_undo(fast_tmp)
    assert case.goal is not None
    locked = case.project / "a" / "b"
    locked.chmod(0o555)
    try:
        result = run(case.home, *case.args, "--json", cwd=case.project, prefix=prefix)
        assert_no_traceback(result)
        assert result.rc == 0, (result.rc, result.err)
        rows = result.json()["rows"]
        failed = {row["path"] for row in rows if row["status"] != "done"}
        assert failed == {f"a/b/b{i:02d}.bin" for i in range(10)}, failed
        for row in rows:
            if row["path"] in failed:
                assert row["status"] == "failed"
                assert row["note"].startswith("permission denied; turnback never uses sudo"), row
        now = tree_state(case.project)
        assert now.pop("a/b") == ("dir", None, 0o555)
        _assert_old_or_new(now | {"a/b": case.goal["a/b"]}, case.start, case.goal)
        for i in range(8):
            assert (locked / f"b{i:02d}.bin").read_bytes() == new_content(f"a/b/b{i:02d}.bin")
        assert not (locked / "b08.bin").exists()
        assert temp_files(case.project) == []
    finally:
        locked.chmod(0o755)
    finished = run(
        case.home, "undo", "1", "--session", case.session_id, "--yes", "--json", cwd=case.project, prefix=prefix
    )
    assert_no_traceback(finished)
    assert finished.rc == 0, finished.err
    assert {row["path"] for row in finished.json()["rows"] if row["status"] == "done"} == failed
    assert tree_state(case.project) == case.goal
    assert (locked / "b00.bin").read_bytes() == old_content("a/b/b00.bin")
    record("fault-eacces", faults_injected=1, rows_failed=len(failed), resumed=1, bytes_lost=0)


# -- a scan race -------------------------------------------------------------------------------------


def _race_project(root: Path, files: int) -> None:
    for i in range(files):
        path = root / f"d{i % 10}" / f"f{i:04d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"file {i}\n".encode() * 200)
    (root / "grow.txt").write_bytes(b"".join(f"line {i:06d}\n".encode() for i in range(1000)))
    (root / "vanish.txt").write_bytes(b"vanishing file, whole\n" * 100)


GROWTHS = 8  # a file that grew after every read for ever would keep any reader reading


@contextlib.contextmanager
def _scan_hooks(monkeypatch: pytest.MonkeyPatch, root: Path) -> Iterator[dict[str, int]]:
    """While the scanner opens and reads: vanish.txt vanishes between its stat and its open; grow.txt grows
    between its stat and its open, and again after each of its reads (so the scan sees it change while read)."""
    real_open, real_read = os.open, os.read
    grow_fds: set[int] = set()
    counts = {"vanished": 0, "grown": 0}

    def is_scan_read(path: Any, flags: int) -> bool:
        return isinstance(path, str) and not (flags & (os.O_WRONLY | os.O_RDWR | os.O_DIRECTORY)) and "/" not in path

    def fake_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if dir_fd is not None and is_scan_read(path, flags):
            folder = os.readlink(f"/proc/self/fd/{dir_fd}")
            if path == "vanish.txt" and folder == str(root) and counts["vanished"] < 1:
                os.unlink(root / "vanish.txt")
                counts["vanished"] += 1
            if path == "grow.txt" and folder == str(root) and counts["grown"] < GROWTHS:
                with open(root / "grow.txt", "ab") as handle:
                    handle.write(b"grown before the open\n")
                counts["grown"] += 1
                fd = real_open(path, flags, mode, dir_fd=dir_fd)
                grow_fds.add(fd)
                return fd
        return real_open(path, flags, mode, dir_fd=dir_fd)

    def fake_read(fd: int, size: int) -> bytes:
        data = real_read(fd, size)
        if fd in grow_fds and data and counts["grown"] < GROWTHS:
            with open(root / "grow.txt", "ab") as handle:
                handle.write(b"grown while read\n")
            counts["grown"] += 1
        return data

    real_close = os.close

    def fake_close(fd: int) -> None:
        grow_fds.discard(fd)
        real_close(fd)

    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(os, "read", fake_read)
    monkeypatch.setattr(os, "close", fake_close)
    try:
        yield counts
    finally:
        monkeypatch.undo()


def _states_of(call: turnback.Call, path: str) -> list[turnback.FileState]:
    states: list[turnback.FileState] = []
    for change in call.changes:
        if change.path == path:
            states.append(change.before)
            if change.after is not None:
                states.append(change.after)
    return states


def test_a_file_that_vanishes_or_grows_between_stat_and_read_during_an_exec_scan(
    engine: turnback.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "race"
    _race_project(root, 200)
    session = engine.new_session(str(root))
    engine.begin_turn(session.id, "a command while files change under the scan")
    engine.run_command(session.id, ["true"])  # the stat cache: the next scans read only what changed
    with _scan_hooks(monkeypatch, root) as counts:
        (root / "grow.txt").write_bytes((root / "grow.txt").read_bytes() + b"touched\n")
        (root / "vanish.txt").write_bytes(b"vanishing file, whole, changed\n" * 100)
        result = engine.run_command(session.id, ["sh", "-c", "echo made by the command > cmd.txt"])
    assert counts["vanished"] == 1 and counts["grown"] >= 3, counts
    assert result.exit_code == 0 and result.call.status == "done", result
    grown = (root / "grow.txt").read_bytes()
    for state in _states_of(result.call, "grow.txt"):
        if state.kind == "file" and state.blob is not None:
            assert grown.startswith(engine.load(state.blob)), "a recorded state of grow.txt is not what it held"
    paths = {change.path: change.kind for change in result.call.changes}
    assert paths.get("cmd.txt") == "new", paths
    assert not (root / "vanish.txt").exists()
    engine.end_turn(session.id)

    applied = engine.apply(engine.plan_undo(session.id))
    by_path = {row.path: row for row in applied.plan.rows}
    assert by_path["cmd.txt"].status == "done"
    assert set(by_path) <= {"cmd.txt", "grow.txt"}, by_path
    if "grow.txt" in by_path:  # it changed while the command ran, and again since: left alone, said why
        row = by_path["grow.txt"]
        assert row.status == "skipped" and str(row.reason) == "changed after the turn; --force overwrites it", row
    assert not (root / "cmd.txt").exists()
    assert (root / "grow.txt").read_bytes() == grown, "the undo changed a file it skipped"
    if "grow.txt" in by_path:
        forced = engine.apply(engine.plan_undo(session.id, turn=1, force=True))
        [row] = forced.plan.rows
        assert row.path == "grow.txt" and row.status == "done", row
        assert forced.trash_dir is not None
        assert files_under(Path(forced.trash_dir))["grow.txt"] == grown
        assert grown.startswith((root / "grow.txt").read_bytes())
    record("scan-race-hooks", vanished=counts["vanished"], grown=counts["grown"], faults_injected=sum(counts.values()))


def _racer(root: Path, outside: Path, stop: threading.Event, counts: dict[str, int]) -> None:
    """Append to grow.txt and delete and put back (atomically) vanish-N.txt until *stop*."""
    whole = b"vanishing file, whole\n" * 100
    n = 0
    while not stop.is_set():
        with open(root / "grow.txt", "ab") as handle:
            handle.write(f"appended {n:08d}\n".encode())
        counts["appends"] += 1
        victim = root / f"vanish-{n % 5}.txt"
        with contextlib.suppress(FileNotFoundError):
            victim.unlink()
            counts["deletes"] += 1
        spare = outside / f"spare-{n % 5}"
        spare.write_bytes(whole)
        os.replace(spare, victim)  # back, whole, in one step
        n += 1
    for i in range(5):  # leave them all there
        if not (root / f"vanish-{i}.txt").exists():
            (outside / "spare").write_bytes(whole)
            os.replace(outside / "spare", root / f"vanish-{i}.txt")


def test_exec_scans_while_a_thread_appends_and_deletes_files(engine: turnback.Engine, tmp_path: Path) -> None:
    root, outside = tmp_path / "race", tmp_path / "outside"
    outside.mkdir()
    _race_project(root, 1500)
    whole = b"vanishing file, whole\n" * 100
    for i in range(5):
        (root / f"vanish-{i}.txt").write_bytes(whole)
    session = engine.new_session(str(root))
    engine.begin_turn(session.id, "a command while a thread changes files")
    rounds = 6 if SOAK else 2
    counts = {"appends": 0, "deletes": 0}
    stop = threading.Event()
    racer = threading.Thread(target=_racer, args=(root, outside, stop, counts), daemon=True)
    racer.start()
    results = []
    try:
        for i in range(rounds):
            results.append(engine.run_command(session.id, ["sh", "-c", f"echo round {i} > cmd-{i}.txt"]))
    finally:
        stop.set()
        racer.join(timeout=30)
    assert not racer.is_alive()
    assert counts["appends"] > 10, counts
    grown = (root / "grow.txt").read_bytes()
    for result in results:
        assert result.exit_code == 0 and result.call.status == "done", result
        for change in result.call.changes:
            for state in (change.before, change.after):
                if state is None or state.kind != "file" or state.blob is None:
                    continue
                content = engine.load(state.blob)
                if change.path == "grow.txt":
                    assert grown.startswith(content), "a recorded state of grow.txt is not a state it had"
                elif change.path.startswith("vanish-"):
                    assert content == whole, f"{change.path}: a recorded state is not the whole file"
    engine.end_turn(session.id)

    before_undo = tree_state(root)
    result = engine.apply(engine.plan_undo(session.id))
    for row in result.plan.rows:
        assert row.status in ("done", "skipped"), (row.path, row.status, row.note)
        if row.status == "skipped":
            assert row.reason or row.note
    for i in range(rounds):
        assert not (root / f"cmd-{i}.txt").exists()
    # Nothing is lost: what a row replaced or removed is in the trash, byte for byte.
    trashed = files_under(Path(result.trash_dir)) if result.trash_dir else {}
    now = tree_state(root)
    for rel, state in before_undo.items():
        if state[0] == "file" and now.get(rel) != state:
            assert trashed.get(rel) == state[1], f"{rel} was replaced and is not in the trash"
    if any(row.status == "skipped" and row.force_only for row in result.plan.rows):
        forced = engine.apply(engine.plan_undo(session.id, turn=1, force=True))
        assert all(row.status in ("done", "skipped") for row in forced.plan.rows)
    record(
        "scan-race-thread",
        rounds=rounds,
        appends=counts["appends"],
        deletes=counts["deletes"],
        rows=len(result.plan.rows),
        skipped=sum(1 for row in result.plan.rows if row.status == "skipped"),
    )

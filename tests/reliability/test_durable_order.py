"""The order of durable steps in an undo, seen by a spy around the calls ``turnback.fsio`` makes.

For every row that puts a file in place: its temp file is made in the same
folder as the file, written, fsynced, renamed over the name, the folder is
fsynced, and only then is the journal row marked done (and committed). A file
displaced to the trash goes there itself, before the project is touched: a
hard link under a temp name in its trash folder, renamed to its trash name,
the folder fsynced (so a write landing on it before the swap is kept). A
removal (unlink, rmdir) is followed by an fsync of its folder before the
journal marks it. Rows of files go in batches (``ops.apply``): each step
above is made for every row of the batch before the next step starts, so
the syncs are made once per batch; the order of one row's steps is the same.

A file-tool write makes its temp file while its record commits (the temp
file shows nowhere until the rename), and renames it only once the record
is durable; when the record fails, the temp file is removed and nothing is
renamed.

The spy wraps the real ``os.open``, ``os.write``, ``os.fsync``, ``os.replace``,
``os.link``, ``os.unlink`` and ``os.rmdir`` (and calls through), plus
``Store.set_row_statuses`` (the journal: a row at a time, or a batch's rows
at once) and the store's commit counter, in this process, on the real disk.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import turnback
import turnback.fsio
from tests.reliability.helpers import record
from turnback.store.store import Store


class Event(NamedTuple):
    what: str  # write, fsync-file, fsync-dir, replace, link, unlink, rmdir, mkdir, journal, commit
    path: str = ""  # the file or folder (a replace or a link: the destination)
    source: str = ""  # a replace's or a link's source
    seq: int = -1
    status: str = ""


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def _at(name: str, dir_fd: int | None) -> str:
    return os.path.join(_fd_path(dir_fd), name) if dir_fd is not None else os.path.abspath(name)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> list[Event]:
    events: list[Event] = []
    real_write, real_fsync, real_replace = os.write, os.fsync, os.replace
    real_unlink, real_rmdir, real_mkdir, real_link = os.unlink, os.rmdir, os.mkdir, os.link
    real_set_row_statuses = Store.set_row_statuses
    real_committed = turnback.fsio.STEPS.committed

    def write(fd: int, data: Any) -> int:
        events.append(Event("write", _fd_path(fd)))
        return real_write(fd, data)

    def fsync(fd: int) -> None:
        kind = "fsync-dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync-file"
        events.append(Event(kind, _fd_path(fd)))
        real_fsync(fd)

    def replace(src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None) -> None:
        events.append(Event("replace", _at(dst, dst_dir_fd), _at(src, src_dir_fd)))
        real_replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    def link(
        src: str,
        dst: str,
        *,
        src_dir_fd: int | None = None,
        dst_dir_fd: int | None = None,
        follow_symlinks: bool = True,
    ) -> None:
        events.append(Event("link", _at(dst, dst_dir_fd), _at(src, src_dir_fd)))
        real_link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=follow_symlinks)

    def unlink(path: str, *, dir_fd: int | None = None) -> None:
        events.append(Event("unlink", _at(path, dir_fd)))
        real_unlink(path, dir_fd=dir_fd)

    def rmdir(path: str, *, dir_fd: int | None = None) -> None:
        events.append(Event("rmdir", _at(path, dir_fd)))
        real_rmdir(path, dir_fd=dir_fd)

    def mkdir(path: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        events.append(Event("mkdir", _at(path, dir_fd)))
        real_mkdir(path, mode, dir_fd=dir_fd)

    def set_row_statuses(self: Store, op_id: str, rows: list[tuple[int, str, Any]]) -> None:
        events.extend(Event("journal", seq=seq, status=status) for seq, status, _ in rows)
        real_set_row_statuses(self, op_id, rows)  # type: ignore[arg-type]

    def committed() -> None:
        events.append(Event("commit"))
        real_committed()

    for name, fake in (
        ("write", write),
        ("fsync", fsync),
        ("replace", replace),
        ("link", link),
        ("unlink", unlink),
        ("rmdir", rmdir),
        ("mkdir", mkdir),
    ):
        monkeypatch.setattr(os, name, fake)
    monkeypatch.setattr(Store, "set_row_statuses", set_row_statuses)
    monkeypatch.setattr(turnback.fsio.STEPS, "committed", committed)
    return events


def _index(events: list[Event], start: int, predicate: Any) -> int:
    for i in range(start, len(events)):
        if predicate(events[i]):
            return i
    raise AssertionError(f"no such event after #{start}: {events[start:]}")


def _atomic_write(events: list[Event], final: str, start: int) -> tuple[int, int]:
    """Check temp-in-same-folder, write, fsync, rename, fsync folder for the write that ends at *final*.

    Returns the indexes of the rename and of the folder fsync.
    """
    renamed = _index(events, start, lambda e: e.what == "replace" and e.path == final)
    temp = events[renamed].source
    folder = os.path.dirname(final)
    assert os.path.dirname(temp) == folder, f"the temp file {temp} is not in the folder of {final}"
    assert os.path.basename(temp).startswith(turnback.fsio.TEMP_PREFIX)
    writes = [i for i in range(start, renamed) if events[i].what == "write" and events[i].path == temp]
    assert writes, f"no write to the temp file of {final}"
    synced = [i for i in range(start, renamed) if events[i].what == "fsync-file" and events[i].path == temp]
    assert synced and synced[-1] > writes[-1], f"the temp file of {final} is not fsynced after its last write"
    folder_synced = _index(events, renamed, lambda e: e.what == "fsync-dir" and e.path == folder)
    assert not any(e.what in ("journal", "commit") for e in events[renamed:folder_synced]), events[
        renamed:folder_synced
    ]
    return renamed, folder_synced


def _linked_into_trash(events: list[Event], final: str, source: str, start: int) -> int:
    """Check the file at *source* went to the trash as *final* itself: a hard link made at *final* (a new name
    in a new trash folder: nothing to rename over), never a copy, the folder fsynced. Returns the index of the
    folder fsync."""
    linked = _index(events, start, lambda e: e.what == "link" and e.path == final)
    assert events[linked].source == source, events[linked]
    assert not any(e.what == "write" and e.path == final for e in events[start:linked]), "copied, not linked"
    synced = _index(events, linked, lambda e: e.what == "fsync-dir" and e.path == os.path.dirname(final))
    assert not any(e.what in ("journal", "commit") for e in events[linked:synced]), events[linked:synced]
    return synced


def _removal(events: list[Event], what: str, path: str, start: int) -> int:
    """The index of the fsync of *path*'s folder after *path* was removed. A folder removed in the same batch
    after its entry (the kernel shows it as ``(deleted)``) counts: its own removal is checked on its own."""
    removed = _index(events, start, lambda e: e.what == what and e.path == path)
    folder = os.path.dirname(path)
    return _index(events, removed, lambda e: e.what == "fsync-dir" and e.path in (folder, f"{folder} (deleted)"))


def _journaled_after(events: list[Event], seq: int, after: int) -> int:
    marked = _index(events, 0, lambda e: e.what == "journal" and e.seq == seq and e.status == "done")
    assert marked > after, f"row {seq} was marked done (event #{marked}) before its folder was fsynced (#{after})"
    commit = _index(events, marked, lambda e: e.what == "commit")
    later_fs = [i for i in range(marked, commit) if events[i].what not in ("journal",)]
    assert not later_fs, f"file-system steps between row {seq}'s journal entry and its commit: {events[marked:commit]}"
    return commit


def test_undo_writes_temp_fsync_rename_fsync_folder_then_journal(
    engine: turnback.Engine, project: Path, spy: list[Event]
) -> None:
    session = engine.new_session(str(project))
    engine.begin_turn(session.id, "four kinds of change")
    engine.write(session.id, "README.md", b"rewritten by the agent\n")
    engine.edit(session.id, "src/main.py", "print('hi')", "print('hello')")
    engine.write(session.id, "made/deeper/new.txt", b"a new file in new folders\n")
    engine.delete(session.id, "docs/guide.md")
    engine.end_turn(session.id)
    plan = engine.plan_undo(session.id)
    assert {row.path: row.action for row in plan.rows} == {
        "docs/guide.md": "restore",
        "made/deeper/new.txt": "trash",
        "made/deeper": "trash",
        "made": "trash",
        "src/main.py": "restore",
        "README.md": "restore",
    }
    spy.clear()
    result = engine.apply(plan)
    events = list(spy)
    assert all(row.status == "done" for row in result.plan.rows)
    assert result.trash_dir is not None
    root, trash = str(project), result.trash_dir
    seq = {row.path: row.seq for row in result.plan.rows}

    checked = 0
    # A deleted file comes back: written atomically, then journaled.
    _, synced = _atomic_write(events, f"{root}/docs/guide.md", 0)
    _journaled_after(events, seq["docs/guide.md"], synced)
    checked += 1
    # A created file: linked into the trash durably first, then unlinked, the folder fsynced, then journaled.
    trash_synced = _linked_into_trash(events, f"{trash}/made/deeper/new.txt", f"{root}/made/deeper/new.txt", 0)
    unlinked = _index(events, trash_synced, lambda e: e.what == "unlink" and e.path == f"{root}/made/deeper/new.txt")
    assert unlinked > trash_synced
    synced = _removal(events, "unlink", f"{root}/made/deeper/new.txt", trash_synced)
    _journaled_after(events, seq["made/deeper/new.txt"], synced)
    checked += 1
    # Created folders: removed innermost first, each followed by an fsync of its parent, then journaled.
    synced = _removal(events, "rmdir", f"{root}/made/deeper", 0)
    _journaled_after(events, seq["made/deeper"], synced)
    inner_removed = _index(events, 0, lambda e: e.what == "rmdir" and e.path == f"{root}/made/deeper")
    synced_outer = _removal(events, "rmdir", f"{root}/made", inner_removed)
    _journaled_after(events, seq["made"], synced_outer)
    checked += 2
    # Modified files: the earlier bytes are made durable in a temp file, the displaced file is linked into the
    # trash durably, and only then is the temp file renamed over it.
    for rel in ("src/main.py", "README.md"):
        trash_synced = _linked_into_trash(events, f"{trash}/{rel}", f"{root}/{rel}", 0)
        renamed, synced = _atomic_write(events, f"{root}/{rel}", 0)
        assert renamed > trash_synced, f"{rel} was replaced before its trash link was durable"
        _journaled_after(events, seq[rel], synced)
        checked += 1

    # Each row is journaled exactly once as done, and rows are journaled in plan order.
    journal = [e.seq for e in events if e.what == "journal" and e.status == "done"]
    assert journal == sorted(journal) == [row.seq for row in result.plan.rows]
    record(
        "durable-order",
        rows_checked=checked,
        fsyncs=sum(1 for e in events if e.what.startswith("fsync")),
        renames=sum(1 for e in events if e.what == "replace"),
        trash_links=sum(1 for e in events if e.what == "link"),
        events=len(events),
    )


class _CommitGate:
    """Stands in for the store's SQLite connection (calling through): the next ``COMMIT`` first waits, at most
    5 s, until a temp file was fsynced, then runs, or fails as a full or failing disk would make it fail."""

    def __init__(self, conn: sqlite3.Connection, events: list[Event], *, fail: bool = False) -> None:
        self._conn, self._events, self._fail = conn, events, fail
        self.armed = True
        self.temp_synced_first = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT" and self.armed:
            self.armed = False
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not self.temp_synced_first:
                self.temp_synced_first = any(
                    e.what == "fsync-file" and os.path.basename(e.path).startswith(turnback.fsio.TEMP_PREFIX)
                    for e in list(self._events)
                )
                time.sleep(0.001)
            if self._fail:
                raise sqlite3.OperationalError("disk I/O error")
        return self._conn.execute(sql, *args)


def test_a_write_makes_its_temp_file_while_its_record_commits_and_renames_it_after(
    engine: turnback.Engine, project: Path, spy: list[Event], monkeypatch: pytest.MonkeyPatch
) -> None:
    session = engine.new_session(str(project))
    engine.begin_turn(session.id, "one write")
    gate = _CommitGate(engine.store.db._conn, spy)
    monkeypatch.setattr(engine.store.db, "_conn", gate)
    spy.clear()
    engine.write(session.id, "README.md", b"rewritten by the agent\n")
    events = list(spy)
    assert gate.temp_synced_first, "the temp file was not written while the record committed"
    renamed, _ = _atomic_write(events, f"{project}/README.md", 0)
    committed = _index(events, 0, lambda e: e.what == "commit")
    assert committed < renamed, f"README.md was replaced before its record was durable: {events}"
    assert (project / "README.md").read_bytes() == b"rewritten by the agent\n"
    record("write-overlap", record_commit_event=committed, rename_event=renamed, events=len(events))


def test_a_write_whose_record_fails_to_commit_removes_its_temp_file_and_renames_nothing(
    engine: turnback.Engine, project: Path, spy: list[Event], monkeypatch: pytest.MonkeyPatch
) -> None:
    session = engine.new_session(str(project))
    turn = engine.begin_turn(session.id, "one write")
    before = (project / "README.md").read_bytes()
    gate = _CommitGate(engine.store.db._conn, spy, fail=True)
    monkeypatch.setattr(engine.store.db, "_conn", gate)
    spy.clear()
    with pytest.raises(turnback.StoreError, match="disk I/O error"):
        engine.write(session.id, "README.md", b"rewritten by the agent\n")
    monkeypatch.setattr(engine.store.db, "_conn", gate._conn)
    assert gate.temp_synced_first, "the temp file was not written while the record committed"
    assert not any(e.what == "replace" for e in spy), spy
    assert (project / "README.md").read_bytes() == before
    assert [p.name for p in project.iterdir() if p.name.startswith(turnback.fsio.TEMP_PREFIX)] == []
    assert engine.store.calls_of_turn(turn.id) == ()
    record("write-overlap-commit-failed", faults_injected=1, temp_files_left=0, bytes_lost=0)

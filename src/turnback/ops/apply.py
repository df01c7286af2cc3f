"""Applying a plan: row by row, compare-and-swap, trash first, journaled, resumable.

The operation is marked ``applying`` (fsynced by SQLite) before the first
file is touched. For each pending row, under the session's apply lock:

1. read what the path holds now; if it already holds the row's target
   (a resumed run that got this far), mark the row done;
2. if it holds anything but what the plan saw, skip the row;
3. write the target to a temp file beside the path and fsync it;
4. move what is there into the operation's trash folder: the file itself,
   by a hard link (fsynced; made under a temp name and renamed only where
   another file holds its name there), and check its bytes are the ones the
   plan saw (else the link goes and the row is skipped);
5. rename the target over the path (or remove the path);
6. mark the row done, and its changes reverted, in one short transaction.

Because the trash holds the displaced file itself, not a copy, a write that
lands on it between the check and the swap (an editor's autosave, a log
line, through its name or an open descriptor) is in the trash, never lost.
Where the trash is on another file system than the path, no link can be
made: the bytes are copied in step 4 and copied again, from the file still
held open, if they changed by the time of the swap; only a write through a
descriptor held open after that can then miss the trash.

Rows of files (and folders the turn made) go in batches (``_apply_file_rows``): each of steps 1-6 is made
for every row of the batch before the next step starts, so the fsyncs of steps 3-4 become one sync for the
batch, the folder fsyncs of step 5 another, and step 6 one transaction; step 2's check is made again right
before each rename. A file is then read once: held open from its check, linked, not read again (a write
to it after its check shows in its size or modification time, and is in the trash); and not even once
when the plan was made in this process and read that very file with the same stat (device, inode, size,
mtime, ctime, mode: a write moves its ctime), a clock tick or more after its last change: its content id
is the one the plan hashed (``rows.reads_of``). Any other row is applied on its own, between batches.

A run killed anywhere in between is finished by the next run: step 1 makes
steps 4-5 happen at most once per row, and step 4 writes the same trash
name again (a link that is already there is kept), so each displaced file
is in the trash exactly once.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from turnback.capture.states import probe_state
from turnback.catalog import Message
from turnback.errors import BlobCorruptError, NothingToDoError, RefusedError, TurnbackError, UnsafePathError
from turnback.fsio import (
    STEPS,
    OpenFolders,
    SyncBatch,
    Tree,
    ensure_private_dir,
    link_file,
    open_regular_at,
    write_temp,
)
from turnback.model import (
    ABSENT,
    PERMISSION_BITS,
    BlobId,
    FileState,
    OpResult,
    Plan,
    PlanRow,
    RowStatus,
    short_id,
)
from turnback.ops.busy import refuse_if_busy, session_apply_lock
from turnback.ops.reasons import clauses
from turnback.ops.rows import ReadFiles, reads_of, stat_key, tree_path
from turnback.ops.settle import (
    CHANGED_SINCE_PREVIEW,
    Journal,
    Outcome,
    finish_operation,
    journaled,
    move_refs,
    refuse_stale_head,
    settle_rows,
    settle_turns,
)
from turnback.paths import RelPath, split_rel_path
from turnback.store.api import StoreBackend

NOT_EMPTY = Message("folder_not_empty")
NO_SUDO = Message("no_sudo")
WRITTEN_DURING = Message("written_during_restore")


class _Changed(Exception):
    """What a path holds is not what the plan saw, found as it was moved to the trash."""


class _Displaced:
    """The file a row displaces, held open from its check until after the swap."""

    def __init__(self, fd: int):
        self.fd = fd
        self.linked = False
        self.seen: tuple[int, int] | None = None  # its size and mtime when its bytes were checked


def _written(st: os.stat_result) -> tuple[int, int]:
    """What a write to a file changes: its size or its modification time (a link or a rename changes neither)."""
    return st.st_size, st.st_mtime_ns


def _file_mode(target: FileState) -> int:
    return (target.mode if target.mode is not None else 0o644) & PERMISSION_BITS


def _outcome_of_error(exc: Exception) -> Outcome:
    """What a row that raised *exc* becomes: skipped when the path is not as the plan saw it, else failed."""
    if isinstance(exc, _Changed):
        return "skipped", CHANGED_SINCE_PREVIEW
    if isinstance(exc, OSError):
        if exc.errno == errno.ENOTEMPTY:
            return "skipped", NOT_EMPTY
        if exc.errno in (errno.EACCES, errno.EPERM):
            return "failed", NO_SUDO
        return "failed", Message("plain", text=str(exc.strerror or exc))
    if isinstance(exc, UnsafePathError):
        if exc.code == "permission_denied":
            return "failed", NO_SUDO
        return "skipped", exc.message
    if isinstance(exc, BlobCorruptError):
        return "failed", clauses(exc.message, Message("file_left_as_is"))
    raise exc


def _done(row: PlanRow, late: Message | None) -> Outcome:
    outcome = (*row.warnings, *([late] if late else []))
    return "done", (clauses(*outcome) if len(outcome) > 1 else outcome[0]) if outcome else None


class _NotBatchable(Exception):
    """The path holds a link, a folder or something else: the row is applied on its own."""


@dataclass(eq=False)
class _Staged:
    """A row of a batch between its checks and its rename: its temp file written, its displaced file trashed."""

    row: PlanRow
    current: FileState
    parent: int  # the open folder of its path (held by the batch's OpenFolders)
    name: str
    index: int = -1
    temp: str | None = None
    displaced: _Displaced | None = None
    trash_entry: tuple[int, str] | None = None  # (folder, name) of its link in the trash
    synced_with: list[object] = field(default_factory=list)  # the sync keys its rename waits for
    swapped: bool = False
    folder_removal: bool = False  # a folder the turn made: removed (empty) in the swap

    @property
    def temp_key(self) -> object:
        return ("temp", id(self))

    @property
    def folder_key(self) -> object:
        st = os.fstat(self.parent)
        return ("folder", st.st_dev, st.st_ino)

    def swap(self) -> None:
        """Check the path holds what was checked, right before the rename (or the removal), then do it."""
        try:
            now = os.stat(self.name, dir_fd=self.parent, follow_symlinks=False)
        except FileNotFoundError:
            now = None
        if self.folder_removal:
            if now is None or not stat.S_ISDIR(now.st_mode):
                raise _Changed
            os.rmdir(self.name, dir_fd=self.parent)
            self.swapped = True
            STEPS.done()
            return
        if self.displaced is None:
            if now is not None:
                raise _Changed  # something was put there since the check
        else:
            held = os.fstat(self.displaced.fd)
            if now is None or (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
                raise _Changed  # the file was replaced (or removed) since the check
        if self.temp is not None:
            os.replace(self.temp, self.name, src_dir_fd=self.parent, dst_dir_fd=self.parent)
        else:
            os.unlink(self.name, dir_fd=self.parent)
        self.swapped = True
        STEPS.done()

    def discard(self) -> None:
        """Take back what the row staged, before its swap: its temp file, and its link in the trash (the file
        keeps its name in the project)."""
        if self.swapped:
            return
        if self.temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.temp, dir_fd=self.parent)
            self.temp = None
        if self.trash_entry is not None:
            folder, entry = self.trash_entry
            with contextlib.suppress(OSError):
                os.unlink(entry, dir_fd=folder)
            self.trash_entry = None

    def close(self) -> None:
        if self.displaced is not None and self.displaced.fd >= 0:
            os.close(self.displaced.fd)
            self.displaced.fd = -1


def _row_keys(staged: Sequence[_Staged]) -> set[object]:
    """The sync keys the staged rows named (what is not among them is a folder made on the way)."""
    return {key for item in staged for key in item.synced_with}


def trash_folder_name(plan: Plan) -> str:
    """``u-ID`` for an undo (as the efr seed has it), ``KIND-ID`` for the other operations."""
    return f"u-{plan.id}" if plan.kind == "undo" else f"{plan.kind}-{plan.id}"


class _Applier:
    def __init__(self, store: StoreBackend, tree: Tree, plan: Plan, read: ReadFiles):
        self.store = store
        self.tree = tree
        self.plan = plan
        self.read = read  # what the plan read of each file, when it was planned in this process
        ensure_private_dir(store.trash_root)
        self.trash_dir = os.path.join(store.trash_root, trash_folder_name(plan))
        self._trash: Tree | None = None
        self.touched_folders: set[tuple[Tree, str]] = set()

    def _where(self, row: PlanRow) -> tuple[Tree, RelPath]:
        return tree_path(self.tree, row.path, outside=row.outside)

    @property
    def trash(self) -> Tree:
        if self._trash is None:
            ensure_private_dir(self.trash_dir)
            self._trash = Tree(self.trash_dir)
        return self._trash

    def _symlink_to_trash(self, row: PlanRow, current: FileState) -> None:
        assert current.target is not None
        self.trash.symlink_atomic(RelPath(row.trash_name or row.path), current.target, create_parents=True)

    def _file_to_trash(self, row: PlanRow, current: FileState, displaced: _Displaced) -> None:
        """Put the file open as *displaced* (what *row.path* holds) in the trash, checked against what the plan saw.

        The file itself goes in, by a hard link: whatever is written to it (an
        autosave, a log line) until its name in the project is replaced stays
        in it, so in the trash. Where no link can be made (the store is on
        another file system), its bytes are copied, and copied again after the
        swap if they changed (``_keep_late_writes``). Raises ``_Changed``, with
        nothing left in the trash, when it is not what the plan saw.
        """
        name = RelPath(row.trash_name or row.path)
        tree, path = self._where(row)
        held = os.fstat(displaced.fd)
        try:
            # The trash never keeps a setuid, setgid or sticky bit: such a file is copied without them. A file
            # with other names (a hard link to a file elsewhere) is copied too: linked, the trash would share
            # an inode that goes on living, and changing, outside the project.
            special = held.st_mode & 0o7777 & ~PERMISSION_BITS
            shared = held.st_nlink > 1
            displaced.linked = not special and not shared and tree.link_into(path, self.trash, name, held)
        except UnsafePathError as exc:
            if exc.code == "path_replaced":
                raise _Changed from exc
            raise
        self._check_trashed(row, current, displaced)

    def _check_trashed(self, row: PlanRow, current: FileState, displaced: _Displaced) -> None:
        """Check the file linked into the trash (or copy it there) holds what the plan saw; ``_Changed`` if not."""
        name = RelPath(row.trash_name or row.path)
        displaced.seen = _written(os.fstat(displaced.fd))  # before reading: a write from now on shows after the swap
        hasher = self.store.crypto.content_hasher()

        def hashed() -> Iterator[bytes]:
            for chunk in Tree.iter_open_chunks(displaced.fd):
                hasher.update(chunk)
                yield chunk

        if displaced.linked:
            for _ in hashed():
                pass
        else:
            self.trash.write_atomic(name, hashed(), (current.mode or 0o600) & PERMISSION_BITS, create_parents=True)
        if hasher.digest() != current.blob:
            self.trash.unlink(name)  # written to since the plan: the file keeps its bytes, the row is skipped
            raise _Changed

    def _keep_late_writes(self, row: PlanRow, current: FileState, displaced: _Displaced) -> Message | None:
        """After the swap: a note when the displaced file was written to after it was checked.

        A linked file keeps those writes in the trash by itself; a copied one
        is copied again from the file still held open, so the trash has them.
        """
        if displaced.seen is None or _written(os.fstat(displaced.fd)) == displaced.seen:
            return None
        if not displaced.linked:
            name = RelPath(row.trash_name or row.path)
            mode = (current.mode or 0o600) & PERMISSION_BITS
            self.trash.write_atomic(name, Tree.iter_open_chunks(displaced.fd), mode, create_parents=True)
        return WRITTEN_DURING

    def _put_target(self, row: PlanRow, current: FileState, to_trash: Callable[[], None]) -> None:
        """Put the row's target at its path; *to_trash* moves what is there to the trash, right before it goes."""
        target = row.target
        assert target is not None
        tree, path = self._where(row)
        if current.kind == "dir":
            # A write killed between its temp file and its rename left one here: ours, so it does not keep the folder.
            tree.remove_temp_files(path)
        if not target.exists:
            if current.kind == "dir":
                tree.rmdir(path)
            else:
                to_trash()
                tree.unlink(path)
            return
        if current.kind == "dir" and target.kind != "dir":
            tree.rmdir(path)
        if target.kind == "file":
            assert target.blob is not None
            content = self.store.blobs.iter_content(target.blob)
            # The earlier bytes are made durable first, so the displaced file is checked right before the swap.
            tree.write_atomic(path, content, _file_mode(target), create_parents=True, before_replace=to_trash)
        elif target.kind == "symlink":
            assert target.target is not None
            to_trash()
            tree.symlink_atomic(path, target.target, create_parents=True)
        elif target.kind == "dir":
            if current.kind in ("file", "symlink"):
                to_trash()
                tree.unlink(path)
            if current.kind != "dir":
                tree.mkdir(path, target.mode if target.mode is not None else 0o755, create_parents=True)
            elif target.mode is not None:
                tree.chmod_dir(path, target.mode & PERMISSION_BITS)

    def remove_temp_files(self, *, resumed: bool) -> None:
        """Remove temp files that an interrupted run left beside the rows' paths and, if *resumed*, in the trash
        (a trash folder this run made holds none: each temp file of its own is renamed or removed)."""
        with contextlib.ExitStack() as held:
            views: dict[int, Tree] = {}  # each tree's folders opened once for all its touched folders
            for tree, folder in sorted(self.touched_folders, key=lambda touched: touched[1]):
                if id(tree) not in views:
                    views[id(tree)] = held.enter_context(tree.folders_held())
                try:
                    views[id(tree)].remove_temp_files(RelPath(folder) if folder else None)
                except TurnbackError:
                    pass  # a folder that became a link or vanished holds no temp file of ours
        if not os.path.isdir(self.trash_dir):
            return
        trash = self.trash  # refuses a trash folder that is not this user's own folder (a link put there before)
        if resumed:
            for folder, _, _ in os.walk(self.trash_dir):
                relative = os.path.relpath(folder, self.trash_dir)
                trash.remove_temp_files(None if relative == "." else RelPath(relative))

    # -- a batch of file rows ------------------------------------------------------------------------

    @staticmethod
    def batchable(row: PlanRow) -> bool:
        """Whether *row* can go in a batch: a file put back, or removed, inside the project."""
        if row.action not in ("restore", "trash") or row.outside or row.target is None or row.expect is None:
            return False
        if row.target.kind == "absent" and row.expect.kind == "dir":
            return True  # a folder the turn made, removed after the rows before it in the batch
        return row.target.kind in ("file", "absent") and row.expect.kind in ("file", "absent")

    def apply_batch(self, rows: Sequence[PlanRow]) -> list[Outcome]:
        """Apply the first rows of *rows* (all batchable) together; their outcomes, in order.

        The order of one row's steps is the order :meth:`apply_row` keeps,
        with each sync made once for the batch: every target's temp file is
        written and every displaced file linked into the trash and checked,
        then all of them (and the folders made on the way) are synced, then
        each path is checked once more and renamed over (or removed), then
        the folders renamed in are synced. The journal marks the rows after
        that. Stops before a row whose path holds a link, a folder or
        something else (it is applied on its own): fewer outcomes than rows.
        """
        synced, placed = SyncBatch(), SyncBatch()
        project = OpenFolders(self.tree, synced, len(rows))
        # The trash mirrors the project's folders, and is made as rows are put in it: most of its folders are new.
        trash = OpenFolders(self.trash, synced, len(rows), make_first=True)
        outcomes: dict[int, Outcome] = {}
        staged: list[_Staged] = []
        count = len(rows)
        try:
            for i, row in enumerate(rows):
                try:
                    item = self._stage(row, project, trash, synced)
                except _NotBatchable:
                    count = i
                    break
                except (_Changed, OSError, UnsafePathError, BlobCorruptError) as exc:
                    outcomes[i] = _outcome_of_error(exc)
                    continue
                if isinstance(item, _Staged):
                    item.index = i
                    staged.append(item)
                else:
                    outcomes[i] = item
            errors = synced.sync()
            for item in staged:
                error = next((errors[key] for key in item.synced_with if key in errors), None)
                if error is None and errors and not set(errors) <= _row_keys(staged):
                    error = next(iter(errors.values()))  # a folder made on the way: which rows need it is not known
                if error is not None:
                    item.discard()
                    outcomes[item.index] = _outcome_of_error(error)
                    continue
                try:
                    if item.folder_removal:
                        # A write killed between its temp file and its rename left one here: ours, it goes too.
                        self.tree.remove_temp_files(RelPath(item.row.path))
                    item.swap()
                except (_Changed, OSError, UnsafePathError) as exc:
                    item.discard()
                    outcomes[item.index] = _outcome_of_error(exc)
                    continue
                placed.add_folder(item.parent, key=item.folder_key)
            errors = placed.sync()
            for item in staged:
                if item.index in outcomes:
                    continue
                if item.folder_key in errors:
                    outcomes[item.index] = _outcome_of_error(errors[item.folder_key])
                    continue
                late = None
                if item.displaced is not None:
                    late = self._keep_late_writes(item.row, item.current, item.displaced)
                outcomes[item.index] = _done(item.row, late)
        finally:
            for item in staged:
                item.close()
            project.close()
            trash.close()
        return [outcomes[i] for i in range(count)]

    def _stage(self, row: PlanRow, project: OpenFolders, trash: OpenFolders, synced: SyncBatch) -> _Staged | Outcome:
        """A row's steps before its rename: its checks, its temp file, the displaced file linked into the trash."""
        assert row.target is not None and row.expect is not None
        path = RelPath(row.path)
        item = self._probe(row, project)
        if item.current.same_as(row.target):
            item.close()
            return "done", None
        if not item.current.same_as(row.expect):
            item.close()
            return "skipped", CHANGED_SINCE_PREVIEW
        self.touched_folders.add((self.tree, path.rsplit("/", 1)[0] if "/" in path else ""))
        try:
            if row.target.kind == "file":
                assert row.target.blob is not None
                parent = project.parent(path, create=True)
                if parent is None:
                    raise UnsafePathError(Message("folder_missing", path=path))
                item.parent = parent
                content = self.store.blobs.iter_content(row.target.blob)
                item.temp, fd = write_temp(parent, content, _file_mode(row.target))
                synced.add(fd, item.temp_key)
                item.synced_with.append(item.temp_key)
            if item.displaced is not None:
                self._link_to_trash(item, trash, synced)
                if not item.displaced.linked:
                    self._check_trashed(row, item.current, item.displaced)  # copied, and checked as it is
        except BaseException:
            item.discard()
            item.close()
            raise
        return item

    def _probe(self, row: PlanRow, project: OpenFolders) -> _Staged:
        """What the row's path holds now, read once: a file is held open and hashed, then linked, not read again.

        A write to the file from the moment it is opened shows in its size or
        modification time after the swap (``_keep_late_writes``), and is in the
        trash, which holds the file itself. Raises ``_NotBatchable`` for a link
        or anything but a file or a folder to remove.
        """
        path = RelPath(row.path)
        name = split_rel_path(path)[1]
        parent = project.parent(path)
        item = _Staged(row, ABSENT, parent if parent is not None else -1, name)
        if parent is None:
            return item
        try:
            there = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return item
        if stat.S_ISDIR(there.st_mode) and row.expect is not None and row.expect.kind == "dir":
            item.current = FileState("dir", mode=stat.S_IMODE(there.st_mode))
            item.folder_removal = True
            return item
        if not stat.S_ISREG(there.st_mode):
            raise _NotBatchable
        fd, entry = open_regular_at(parent, name, path)
        item.displaced = _Displaced(fd)
        hasher = self.store.crypto.content_hasher()
        size = 0
        try:
            held = os.fstat(fd)
            item.displaced.seen = _written(held)
            read = self.read.get(path)
            if read is not None and read[0] == stat_key(held):
                # The file the plan read, unchanged since (a change moves its ctime): its bytes are the ones hashed.
                item.current = FileState("file", blob=read[1], size=held.st_size, mode=entry.permissions)
                return item
            for chunk in Tree.iter_open_chunks(fd):
                hasher.update(chunk)
                size += len(chunk)
        except BaseException:
            item.close()
            raise
        item.current = FileState("file", blob=BlobId(hasher.digest()), size=size, mode=entry.permissions)
        return item

    def _link_to_trash(self, item: _Staged, trash: OpenFolders, synced: SyncBatch) -> None:
        """Link the displaced file into the trash (synced with the batch); where it cannot be, it is copied."""
        assert item.displaced is not None
        held = os.fstat(item.displaced.fd)
        if held.st_mode & 0o7777 & ~PERMISSION_BITS or held.st_nlink > 1:
            return  # copied by _check_trashed, without its special bits, sharing no inode with a file elsewhere
        name = RelPath(item.row.trash_name or item.row.path)
        folder = trash.parent(name, create=True)
        if folder is None:
            raise UnsafePathError(Message("folder_missing", path=name))
        entry = split_rel_path(name)[1]
        try:
            item.displaced.linked = link_file(item.parent, item.name, folder, entry, held, shown=item.row.path)
        except UnsafePathError as exc:
            if exc.code == "path_replaced":
                raise _Changed from exc
            raise
        if item.displaced.linked:
            STEPS.done()
            folder_st = os.fstat(folder)
            key = ("folder", folder_st.st_dev, folder_st.st_ino)
            synced.add_folder(folder, key=key)
            item.synced_with.append(key)
            item.trash_entry = (folder, entry)

    def apply_row(self, row: PlanRow) -> tuple[RowStatus, Message | None]:
        if row.action == "mark":
            return "done", row.reason
        if row.action not in ("restore", "trash"):
            return "skipped", row.reason
        assert row.target is not None and row.expect is not None
        tree, path = self._where(row)
        try:
            current = probe_state(tree, path, self.store)
            if current.same_as(row.target):
                return "done", None
            if not current.same_as(row.expect):
                return "skipped", CHANGED_SINCE_PREVIEW
            self.touched_folders.add((tree, path.rsplit("/", 1)[0] if "/" in path else ""))
            late = None
            if current.kind == "symlink":
                self._put_target(row, current, lambda: self._symlink_to_trash(row, current))
            elif current.kind != "file":
                self._put_target(row, current, lambda: None)  # nothing there, or a folder: nothing to trash
            else:
                with tree.open_file(path) as (fd, _):
                    displaced = _Displaced(fd)
                    self._put_target(row, current, lambda: self._file_to_trash(row, current, displaced))
                    late = self._keep_late_writes(row, current, displaced)
        except (_Changed, OSError, UnsafePathError, BlobCorruptError) as exc:
            return _outcome_of_error(exc)
        return _done(row, late)


# Rows put in place together, with one sync of their files and one of their folders, and one journal commit.
BATCH_ROWS = 1024
# A row of a batch holds up to 6 descriptors open until the batch ends: its temp file, the file it displaces, its
# folders in the project and in the trash, and (kept for the next rows) one folder on the way to each.
_FDS_PER_ROW = 6


def _batch_rows() -> int:
    """BATCH_ROWS, or fewer where the process may not open that many files."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return BATCH_ROWS
    return max(8, min(BATCH_ROWS, (soft - 128) // _FDS_PER_ROW))


def _apply_file_rows(
    store: StoreBackend, plan: Plan, journal: Journal, applier: _Applier, rows: Sequence[PlanRow]
) -> None:
    """Apply *rows* in order, journaling each outcome: runs of file rows in batches, any other row on its own."""
    start = 0
    while start < len(rows):
        run: list[PlanRow] = []
        paths: set[str] = set()
        for row in rows[start : start + _batch_rows()]:
            if not applier.batchable(row) or row.path in paths:
                break
            run.append(row)
            paths.add(row.path)
        outcomes: list[Outcome] = []
        if run:
            try:
                outcomes = applier.apply_batch(run)
            except TurnbackError as exc:
                outcomes = [("failed", exc.message)] * len(run)
        if not outcomes:  # the next row goes on its own
            row = rows[start]
            try:
                outcomes = [applier.apply_row(row)]
            except TurnbackError as exc:
                outcomes = [("failed", exc.message)]
        done = rows[start : start + len(outcomes)]
        settle_rows(store, plan, journal, [(row, *outcome) for row, outcome in zip(done, outcomes, strict=True)])
        start += len(outcomes)


def apply_plan(store: StoreBackend, tree: Tree, plan: Plan) -> OpResult:
    """Apply *plan* (or finish it, if an earlier run was interrupted) and return what each row did."""
    with session_apply_lock(store, plan.session_id):
        plan = store.load_plan(plan.id)  # what the journal says now, under the lock
        if plan.status == "done":
            raise NothingToDoError(Message("already_applied", op=short_id(plan.id)))
        resumed = plan.status == "applying"
        if not resumed and store.op_evicted(plan.id):
            raise RefusedError(Message("preview_evicted", op=short_id(plan.id)))
        refuse_if_busy(store, plan.session_id)
        # Refuses an unsafe trash folder before anything is marked.
        applier = _Applier(store, tree, plan, reads_of(plan.id))
        with store.transaction():
            if plan.moves_head and not resumed:
                refuse_stale_head(store, plan)
            if not resumed:
                store.set_op_status(plan.id, "applying", expect="planned")
        ref_rows = [row for row in plan.rows if row.status == "pending" and row.action == "ref"]
        journal: Journal = {}
        _apply_file_rows(
            store, plan, journal, applier, [r for r in plan.rows if r.status == "pending" and r.action != "ref"]
        )
        if ref_rows:  # moved together, after the files, in one transaction
            outcomes = move_refs(tree.root, ref_rows)
            settle_rows(
                store, plan, journal, [(row, *outcome) for row, outcome in zip(ref_rows, outcomes, strict=True)]
            )
        applier.remove_temp_files(resumed=resumed)
        with store.transaction():
            applied = journaled(plan, journal)
            notes = finish_operation(store, applied)
            settle_turns(store, applied, journal)
            store.set_op_status(plan.id, "done")
    return OpResult(
        journaled(plan, journal)._replace(status="done"), _kept_trash(applier.trash_dir), resumed=resumed, notes=notes
    )


def _kept_trash(trash_dir: str) -> str | None:
    """The operation's trash folder when something was put in it; an empty one (the rows displaced nothing:
    a deleted file put back, say) is removed, so that no result points the user at an empty folder."""
    try:
        if os.listdir(trash_dir):
            return trash_dir
        os.rmdir(trash_dir)
    except FileNotFoundError:
        return None
    except OSError:  # not ours to remove after all: it is still there to be named
        return trash_dir if os.path.isdir(trash_dir) else None
    return None


__all__ = ["CHANGED_SINCE_PREVIEW", "apply_plan", "trash_folder_name"]

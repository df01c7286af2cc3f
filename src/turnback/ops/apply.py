"""Applying a plan: row by row, compare-and-swap, trash first, journaled, resumable.

The operation is marked ``applying`` (fsynced by SQLite) before the first
file is touched. For each pending row, under the session's apply lock:

1. read what the path holds now; if it already holds the row's target
   (a resumed run that got this far), mark the row done;
2. if it holds anything but what the plan saw, skip the row;
3. write the target to a temp file beside the path and fsync it;
4. move what is there into the operation's trash folder: the file itself,
   by a hard link made under a temp name and renamed (fsynced), and check
   its bytes are the ones the plan saw (else the link goes and the row is
   skipped);
5. rename the target over the path (or remove the path);
6. mark the row done, and its changes reverted, in one short transaction.

Because the trash holds the displaced file itself, not a copy, a write that
lands on it between the check and the swap (an editor's autosave, a log
line, through its name or an open descriptor) is in the trash, never lost.
Where the trash is on another file system than the path, no link can be
made: the bytes are copied in step 4 and copied again, from the file still
held open, if they changed by the time of the swap; only a write through a
descriptor held open after that can then miss the trash.

A run killed anywhere in between is finished by the next run: step 1 makes
steps 4-5 happen at most once per row, and step 4 writes the same trash
name again (a link that is already there is kept), so each displaced file
is in the trash exactly once.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator

from turnback.capture import git
from turnback.capture.states import probe_state
from turnback.catalog import Message
from turnback.errors import BlobCorruptError, NothingToDoError, RefusedError, TurnbackError, UnsafePathError
from turnback.fsio import Tree, ensure_private_dir
from turnback.model import PERMISSION_BITS, FileState, OpResult, Plan, PlanRow, RowStatus, TurnId, short_id
from turnback.ops.busy import refuse_if_busy, session_apply_lock
from turnback.ops.reasons import clauses, with_flag_command
from turnback.ops.rows import tree_path
from turnback.paths import RelPath
from turnback.store.api import StoreBackend

PLAN_AGAIN = Message("plan_again")
CHANGED_SINCE_PREVIEW = Message("changed_since_preview", then=PLAN_AGAIN)
NOT_EMPTY = Message("folder_not_empty")
NO_SUDO = Message("no_sudo")
WRITTEN_DURING = Message("written_during_restore")
REFS_TOGETHER = Message("refs_moved_together", then=PLAN_AGAIN)
# The outcomes that name a plan made again as what to do next; _settle_turns names the command that makes it.
_PLANS_AGAIN = ("changed_since_preview", "refs_moved_together")


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


def trash_folder_name(plan: Plan) -> str:
    """``u-ID`` for an undo (as the efr seed has it), ``KIND-ID`` for the other operations."""
    return f"u-{plan.id}" if plan.kind == "undo" else f"{plan.kind}-{plan.id}"


class _Applier:
    def __init__(self, store: StoreBackend, tree: Tree, plan: Plan):
        self.store = store
        self.tree = tree
        self.plan = plan
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
            mode = (target.mode if target.mode is not None else 0o644) & PERMISSION_BITS
            content = self.store.blobs.iter_content(target.blob)
            # The earlier bytes are made durable first, so the displaced file is checked right before the swap.
            tree.write_atomic(path, content, mode, create_parents=True, before_replace=to_trash)
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

    def remove_temp_files(self) -> None:
        """Remove temp files that an interrupted run left beside the rows' paths and in the trash."""
        for tree, folder in self.touched_folders:
            try:
                tree.remove_temp_files(RelPath(folder) if folder else None)
            except TurnbackError:
                pass  # a folder that became a link or vanished holds no temp file of ours
        if os.path.isdir(self.trash_dir):
            for folder, _, _ in os.walk(self.trash_dir):
                relative = os.path.relpath(folder, self.trash_dir)
                self.trash.remove_temp_files(None if relative == "." else RelPath(relative))

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
        except _Changed:
            return "skipped", CHANGED_SINCE_PREVIEW
        except OSError as exc:
            if exc.errno == errno.ENOTEMPTY:
                return "skipped", NOT_EMPTY
            if exc.errno in (errno.EACCES, errno.EPERM):
                return "failed", NO_SUDO
            return "failed", Message("plain", text=str(exc.strerror or exc))
        except UnsafePathError as exc:
            if exc.code == "permission_denied":
                return "failed", NO_SUDO
            return "skipped", exc.message
        except BlobCorruptError as exc:
            return "failed", clauses(exc.message, Message("file_left_as_is"))
        outcome = (*row.warnings, *([late] if late else []))
        return "done", (clauses(*outcome) if len(outcome) > 1 else outcome[0]) if outcome else None


def _settle_row(store: StoreBackend, plan: Plan, row: PlanRow, status: RowStatus, note: Message | None) -> None:
    """Journal one row's outcome; a row done marks the changes it took back reverted, in the same transaction."""
    with store.transaction():
        store.set_row_status(plan.id, row.seq, status, note)
        if status == "done":
            if row.ref is not None:
                store.mark_ref_changes_reverted(row.change_ids, reverted=not row.unmark)
            else:
                store.mark_changes_reverted(row.change_ids, reverted=not row.unmark)


def _move_refs(root: str, rows: list[PlanRow]) -> list[tuple[RowStatus, Message | None]]:
    """Move the refs of *rows* back: all that still hold what the plan saw, in one transaction, or none.

    A ref that already holds its target (a resumed run) is done; one that
    moved since the preview is skipped, and so are the others, since a
    transaction with one stale ref moves nothing.
    """
    current = git.read_refs(root) or {}
    outcomes: list[tuple[RowStatus, Message | None]] = []
    moves = []
    for row in rows:
        assert row.ref is not None
        now = current.get(row.ref.name)
        if now == row.ref.target:
            outcomes.append(("done", None))
        elif now != row.ref.expect:
            outcomes.append(("skipped", CHANGED_SINCE_PREVIEW))
        else:
            outcomes.append(("pending", None))
            moves.append(git.RefMove(row.ref.name, row.ref.expect, row.ref.target))
    if any(status == "skipped" for status, _ in outcomes):
        return [(s, n) if s != "pending" else ("skipped", REFS_TOGETHER) for s, n in outcomes]
    if not moves:
        return outcomes
    try:
        moved = git.move_refs(root, moves)
    except TurnbackError as exc:
        return [(s, n) if s != "pending" else ("failed", exc.message) for s, n in outcomes]
    if not moved:
        return [(s, n) if s != "pending" else ("skipped", REFS_TOGETHER) for s, n in outcomes]
    return [(s, n) if s != "pending" else ("done", None) for s, n in outcomes]


def _settle_turns(store: StoreBackend, plan: Plan) -> None:
    """Update each turn's undo state; name ``turnback undo N --force`` on the rows a partly undone turn keeps."""
    numbers: dict[str, int] = {}
    for turn_id in plan.turn_ids:
        state = store.refresh_turn_undone(TurnId(turn_id))
        turn_rows = [row for row in plan.rows if row.turn_id == turn_id]
        resolved_elsewhere = any(row.status == "skipped" and not row.force_only for row in turn_rows)
        if state == "no" and resolved_elsewhere and plan.kind == "undo":
            store.set_turn_undone(TurnId(turn_id), "partly")
            state = "partly"
        if state == "partly":
            numbers[turn_id] = store.turn(TurnId(turn_id)).number
    for row in plan.rows:
        if row.status != "skipped":
            continue
        plans_again = row.note is not None and row.note.code in _PLANS_AGAIN
        if plan.kind == "revert" and plans_again:
            command = f"turnback revert {short_id(plan.call_id or '')}"
        elif plan.kind == "undo" and row.turn_id in numbers:
            command = f"turnback undo {numbers[row.turn_id]}"
        else:
            continue
        # Name the command that acts on what this operation left, rather than a plain "undo" that will not.
        if plans_again and row.note is not None:
            note = Message(row.note.code, then=Message("command_plans_it_again", command=command))
        elif row.force_only and row.reason is not None:
            note = with_flag_command(row.reason, f"{command} --force")
        else:
            continue
        store.set_row_status(plan.id, row.seq, "skipped", note)


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
        applier = _Applier(store, tree, plan)  # refuses an unsafe trash folder before anything is marked
        with store.transaction():
            if plan.moves_head and not resumed:
                _refuse_stale_head(store, plan)
            if not resumed:
                store.set_op_status(plan.id, "applying", expect="planned")
        ref_rows = []
        status: RowStatus
        note: Message | None
        for row in plan.rows:
            if row.status != "pending":
                continue
            if row.action == "ref":
                ref_rows.append(row)  # moved together, after the files, in one transaction
                continue
            try:
                status, note = applier.apply_row(row)
            except TurnbackError as exc:
                status, note = "failed", exc.message
            _settle_row(store, plan, row, status, note)
        if ref_rows:
            for row, (status, note) in zip(ref_rows, _move_refs(tree.root, ref_rows), strict=True):
                _settle_row(store, plan, row, status, note)
        applier.remove_temp_files()
        with store.transaction():
            applied = store.load_plan(plan.id)
            notes = _finish_operation(store, applied)
            _settle_turns(store, applied)
            store.set_op_status(plan.id, "done")
    trash = applier.trash_dir if os.path.isdir(applier.trash_dir) else None
    return OpResult(store.load_plan(plan.id), trash, resumed=resumed, notes=notes)


def _refuse_stale_head(store: StoreBackend, plan: Plan) -> None:
    """A rollback, resend or redo applies only to the head it was planned against."""
    head = store.session(plan.session_id).head
    if head != plan.head_from:
        raise RefusedError(Message("head_moved_since_preview", now=_head_name(head), seen=_head_name(plan.head_from)))


def _head_name(head: TurnId | None) -> Message:
    return Message("turn_id_shown", turn=short_id(head)) if head else Message("the_start")


def _finish_operation(store: StoreBackend, plan: Plan) -> tuple[Message, ...]:
    """What an operation does after its rows: a resend drops its calls, a rollback or resend moves the head,
    a redo marks the operation it took back. Returns notes for the result."""
    if plan.kind == "redo" and plan.reverses and any(row.status == "done" for row in plan.rows):
        store.set_taken_back(plan.reverses, plan.id)
    if not plan.moves_head:
        return ()
    if plan.kind == "resend":
        stuck = [row for row in plan.rows if row.status in ("skipped", "failed")]
        if stuck and plan.resend_mode == "revert":
            return (Message("nothing_resent", count=len(stuck)),)
        store.drop_calls_of_turns([TurnId(t) for t in plan.turn_ids])
    if not store.set_head_if_equals(plan.session_id, plan.head_from, plan.head_to):
        head = store.session(plan.session_id).head
        if head != plan.head_to:  # a resumed run may have moved it already
            return (Message("head_moved_while_applying"),)
    if plan.kind == "resend":
        parent = (
            Message("turn_number_shown", number=store.turn(plan.head_to).number)
            if plan.head_to
            else Message("the_start")
        )
        return (Message("resent_turns_taken_away", count=len(plan.turn_ids), parent=parent),)
    return ()


__all__ = ["CHANGED_SINCE_PREVIEW", "apply_plan", "trash_folder_name"]

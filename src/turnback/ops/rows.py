"""Plan rows: one change's row against a running picture of what each path will hold, chains of one path
joined, the rows numbered and named in the trash, and the rows that move git refs back.

Rows are made change by change, newest first; so a path that a user changed after the agent stops the rows
below it, and the rows of one path that chain (each restores what the next expects) become one. Each row keeps
what the path held when planned (``expect``): applying a row whose path holds anything else is refused
(compare-and-swap).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from turnback.capture.scan import Entry as ScanEntry
from turnback.capture.states import capture_state, probe_state
from turnback.catalog import Message
from turnback.errors import TurnbackError
from turnback.fsio import ROOT_TREE, Tree
from turnback.model import (
    ABSENT,
    SPECIAL_BITS,
    BlobId,
    Change,
    FileState,
    OpId,
    PlanRow,
    RefUpdate,
    RowAction,
    Turn,
    ref_short_name,
    ref_value_text,
)
from turnback.ops.reasons import (
    ALREADY_EARLIER,
    COPY_MISSING,
    EVICTED,
    GOES_TO_TRASH,
    LINK_IN_PLACE,
    SETUID_NOT_RESTORED,
    SPECIAL_IN_PLACE,
    clauses,
    first_clause,
    for_created,
)
from turnback.paths import RelPath
from turnback.store.api import StoreBackend


@dataclass(slots=True)
class Row:
    path: RelPath
    action: RowAction
    expect: FileState | None
    target: FileState | None
    change_ids: list[int]
    turn_id: str | None
    reason: Message | None = None
    force_only: bool = False
    conflict: bool = False
    outside: bool = False
    ref: RefUpdate | None = None


def tree_path(tree: Tree, path: str, *, outside: bool) -> tuple[Tree, RelPath]:
    """Where a change's path lives: the project's tree, or (an absolute path outside it) the root's."""
    if outside:
        return ROOT_TREE, RelPath(path.lstrip("/"))
    return tree, RelPath(path)


# A file's stat as a plan read it: device, inode, size, mtime_ns, ctime_ns, mode. A write to the file, or a
# chmod, a rename over it or a utime that puts its mtime back, changes its ctime (the kernel's clock, not the
# caller's), so a file with the same stat holds the same bytes; see _trusted for the clock's tick.
StatKey = tuple[int, int, int, int, int, int]
# What a plan read of each project file it hashed: (stat before the read, content id), by path.
ReadFiles = dict[RelPath, tuple[StatKey, BlobId]]
# A file changed within this long before a plan read it may change again without its ctime moving (the
# kernel's clock ticks every few ms; file systems of whole seconds keep 2 s): its read is not kept.
_FINE_TICK_NS = 100_000_000
_COARSE_TICK_NS = 2_000_000_000
# How many plans' reads this process keeps for their apply (a server plans for several sessions).
_KEEP_PLANS = 8
_reads_by_plan: dict[OpId, ReadFiles] = {}


def stat_key(st: os.stat_result) -> StatKey:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def _trusted(st: os.stat_result, now_ns: int) -> bool:
    """Whether a later change of the file is sure to move its ctime: it last changed a clock tick before now."""
    tick = _FINE_TICK_NS if st.st_ctime_ns % 1_000_000_000 else _COARSE_TICK_NS
    return st.st_ctime_ns < now_ns - tick


def keep_reads(op_id: OpId, reads: ReadFiles) -> None:
    """Keep what the plan *op_id* read, for its apply in this process (:func:`reads_of`)."""
    _reads_by_plan[op_id] = reads
    while len(_reads_by_plan) > _KEEP_PLANS:
        del _reads_by_plan[next(iter(_reads_by_plan))]


def reads_of(op_id: OpId) -> ReadFiles:
    """What the plan *op_id* read in this process (empty when planned elsewhere): its apply hashes a file again
    only when its stat is not the one read."""
    return _reads_by_plan.pop(op_id, {})


class Picture:
    """What each path holds now, and will hold as rows are applied in order.

    Project paths are relative and outside paths absolute, so one map holds both. ``read`` keeps the stat and
    content id of each project file read (:data:`ReadFiles`).
    """

    def __init__(self, store: StoreBackend, tree: Tree):
        self._store = store
        self._tree = tree
        self._states: dict[RelPath, FileState | TurnbackError] = {}
        self._planned: set[RelPath] = set()  # paths whose state is what an earlier row will put there
        self.blocked: dict[RelPath, Row] = {}  # paths a skipped row stopped, by that row
        self.read: ReadFiles = {}
        self._copies: dict[bytes, bool] = {}  # whether the store keeps each copy asked about
        self._cache: Mapping[str, ScanEntry] | None = None  # the project's last stat cache (vouch_with)

    def vouch_with(self, cache: Mapping[str, ScanEntry]) -> None:
        """Let the project's last stat cache vouch for the files it holds with their stat as it is now: their
        content id is the cache's, not read again (:meth:`_vouched`)."""
        self._cache = cache

    def _vouched(self, tree: Tree, path: RelPath, started: int) -> FileState | None:
        """What the stat cache says the file at *path* holds, when its stat (size, mtime, ctime, inode, mode) is
        the one the cache took and the scan that took it trusted what it read (not racy): the scanner's own
        rule, so the next scan would give it without a read too. A write, a chmod, a rename over the file or a
        utime that puts its mtime back moves its ctime, and the file is read. ``None``: read it."""
        entry = self._cache.get(path) if self._cache is not None else None
        if entry is None or entry.kind != "file" or entry.blob is None or entry.racy or entry.linked:
            return None
        st = tree.stat(path)
        if st is None or not entry.stat_matches(st):
            return None
        blob = BlobId(entry.blob)
        if _trusted(st, started):
            self.read[path] = (stat_key(st), blob)
        return FileState("file", blob=blob, size=st.st_size, mode=stat.S_IMODE(st.st_mode))

    def know_copies(self, changes: Sequence[Change]) -> None:
        """Ask the store at once which copies of *changes*' earlier files it keeps (for :meth:`has_copy`)."""
        wanted = [change.before.blob for change in changes if change.before.kind == "file" and change.before.blob]
        kept = self._store.blobs.present(wanted)
        self._copies.update((blob, blob in kept) for blob in wanted)

    def has_copy(self, blob: BlobId) -> bool:
        """Whether the store keeps the copy *blob* (asked of the store unless :meth:`know_copies` asked)."""
        known = self._copies.get(blob)
        if known is None:
            known = self._copies[blob] = self._store.blobs.has(blob)
        return known

    def get(self, path: RelPath, *, outside: bool) -> FileState | TurnbackError:
        if path not in self._states:
            tree, rel = tree_path(self._tree, path, outside=outside)

            started = time.time_ns()  # before the file's stat is taken

            def read(st: os.stat_result, blob: BlobId) -> None:
                if not outside and _trusted(st, started):
                    self.read[path] = (stat_key(st), blob)

            try:
                state = None if outside else self._vouched(tree, rel, started)
                self._states[path] = state if state is not None else probe_state(tree, rel, self._store, read=read)
            except TurnbackError as exc:
                # Below a file or link that an earlier row turns back into a folder, nothing will be there yet.
                self._states[path] = ABSENT if self._becomes_folder(path) else exc
        return self._states[path]

    def _becomes_folder(self, path: RelPath) -> bool:
        parent = path.rsplit("/", 1)[0] if "/" in path.strip("/") else None
        while parent:
            if parent in self._planned:
                planned = self._states[RelPath(parent)]
                return isinstance(planned, FileState) and planned.kind == "dir"
            parent = parent.rsplit("/", 1)[0] if "/" in parent.strip("/") else None
        return False

    def seen_with_content(self, path: RelPath, current: FileState, *, outside: bool) -> FileState:
        """*current* with its content in the store, so a conflict's diff can be shown and checked later.

        A state an earlier row will put in place is a recorded state, stored
        already; a file read from the disk is captured now.
        """
        if path in self._planned or current.kind != "file":
            return current
        tree, rel = tree_path(self._tree, path, outside=outside)
        with self._store.transaction():
            return capture_state(tree, rel, self._store)

    def set(self, path: RelPath, state: FileState) -> None:
        self._states[path] = state
        self._planned.add(path)


def _copy_available(picture: Picture, change: Change) -> Message | None:
    if change.not_covered:
        return change.not_covered
    if change.evicted:
        return EVICTED
    if change.before.kind == "file" and (change.before.blob is None or not picture.has_copy(change.before.blob)):
        return COPY_MISSING
    return None


def acting(target: FileState, current: FileState) -> RowAction:
    if current.same_as(target):
        return "mark"
    return "trash" if not target.exists else "restore"


def row_for_change(
    picture: Picture,
    change: Change,
    turn_id: str | None,
    *,
    conflict_reason: Callable[[Change], Message],
    cut_short_reason: Message,
    overwrite: bool,
    hold: Callable[[Change], Message | None] = lambda _change: None,
) -> Row:
    row = _plan_change(
        picture,
        change,
        turn_id,
        conflict_reason=conflict_reason,
        cut_short_reason=cut_short_reason,
        overwrite=overwrite,
        hold=hold,
    )
    row.outside = change.outside
    if row.action == "skip":
        # What the path holds now is not the agent's: no older change of it may act either,
        # or it would write over that state a few rows below this skip.
        picture.blocked.setdefault(row.path, row)
    return row


def _plan_change(
    picture: Picture,
    change: Change,
    turn_id: str | None,
    *,
    conflict_reason: Callable[[Change], Message],
    cut_short_reason: Message,
    overwrite: bool,
    hold: Callable[[Change], Message | None],
) -> Row:
    """One change's row; *hold* names a reason to leave it for ``--force`` (a later call, a late job)."""
    path, target = change.path, change.before
    missing = _copy_available(picture, change)
    if missing:
        return Row(path, "not covered", None, None, [change.id], turn_id, missing)
    current = picture.get(path, outside=change.outside)
    if isinstance(current, TurnbackError):
        return Row(path, "skip", None, None, [change.id], turn_id, current.message)
    blocked = picture.blocked.get(path)
    if blocked is not None:
        return Row(
            path,
            "skip",
            current,
            target,
            [change.id],
            turn_id,
            blocked.reason,
            force_only=blocked.force_only,
            conflict=blocked.conflict,
        )
    if not overwrite:
        held = hold(change)
        if held is not None:
            return Row(path, "skip", current, target, [change.id], turn_id, held, force_only=True, conflict=True)
    if current.same_as(target):
        return Row(path, "mark", current, target, [change.id], turn_id, ALREADY_EARLIER)
    if change.after is not None and current.same_as(change.after):
        picture.set(path, target)
        return Row(path, acting(target, current), current, target, [change.id], turn_id)
    if current.kind == "special":
        return Row(path, "skip", current, None, [change.id], turn_id, SPECIAL_IN_PLACE)
    if not target.exists and current.kind == "symlink" and (change.after is None or change.after.kind != "symlink"):
        return Row(path, "skip", current, None, [change.id], turn_id, LINK_IN_PLACE)
    reason = cut_short_reason if change.after is None else conflict_reason(change)
    if not target.exists:
        reason = for_created(reason)
    seen = picture.seen_with_content(path, current, outside=change.outside)
    if overwrite:
        picture.set(path, target)
        overwritten = clauses(first_clause(reason), GOES_TO_TRASH)
        return Row(path, acting(target, seen), seen, target, [change.id], turn_id, overwritten, conflict=True)
    return Row(path, "skip", seen, target, [change.id], turn_id, reason, force_only=True, conflict=True)


def merge_chains(rows: list[Row]) -> list[Row]:
    """Join rows of one path that follow each other (each acting); the joined row takes the later place.

    The later place is the safe one: a folder is removed only after the rows
    that empty it, and a restore makes missing folders itself. A conflict row
    (one that overwrites a user's change with ``--force``) is never joined:
    the version it overwrites is put in place and goes to the trash, where a
    person can take it back.
    """
    merged: list[Row | None] = list(rows)
    last_acting: dict[RelPath, int] = {}
    for index, row in enumerate(rows):
        previous = last_acting.get(row.path)
        # A conflict row keeps its place so what it overwrites goes to the trash; one that overwrites
        # nothing (the path is absent or a folder) has nothing to keep and joins like any other.
        displaces = row.expect is not None and row.expect.kind in ("file", "symlink")
        joinable = row.action in ("restore", "trash", "mark") and not (row.conflict and displaces)
        if joinable and previous is not None:
            first = merged[previous]
            assert first is not None and first.expect is not None and row.target is not None
            merged[previous] = None
            action = acting(row.target, first.expect)
            conflict = first if first.conflict else row if row.conflict else None
            merged[index] = Row(
                row.path,
                action,
                first.expect,
                row.target,
                first.change_ids + row.change_ids,
                first.turn_id,
                conflict.reason if conflict else ALREADY_EARLIER if action == "mark" else None,
                conflict=conflict is not None,
                outside=row.outside,
            )
            last_acting[row.path] = index
        elif joinable:
            last_acting[row.path] = index
        else:
            last_acting.pop(row.path, None)
    return [row for row in merged if row is not None]


def finish_rows(rows: list[Row]) -> tuple[PlanRow, ...]:
    """Number the rows, name each displaced file's place in the trash, and note dropped mode bits."""
    seen_paths: dict[RelPath, int] = {}
    finished = []
    for seq, row in enumerate(rows):
        trash_name = None
        if row.action in ("restore", "trash") and row.expect is not None and row.expect.kind in ("file", "symlink"):
            count = seen_paths.get(row.path, 0) + 1
            seen_paths[row.path] = count
            name = "outside/" + row.path.lstrip("/") if row.outside else row.path
            trash_name = name if count == 1 else f"{name}~{count}"
        warnings: tuple[Message, ...] = ()
        if row.action == "restore" and row.target is not None and (row.target.mode or 0) & SPECIAL_BITS:
            warnings = (SETUID_NOT_RESTORED,)
        finished.append(
            PlanRow(
                seq=seq,
                action=row.action,
                path=row.path,
                reason=row.reason,
                expect=row.expect,
                target=row.target,
                change_ids=tuple(row.change_ids),
                turn_id=row.turn_id,  # type: ignore[arg-type]
                force_only=row.force_only,
                conflict=row.conflict,
                warnings=warnings,
                trash_name=trash_name,
                ref=row.ref,
                outside=row.outside,
            )
        )
    return tuple(finished)


def ref_rows(turns: Sequence[Turn], current: dict[str, str] | None) -> list[Row]:
    """Rows that move back the git refs the turns moved, newest first; a ref moved since is left alone.

    Moves of one ref that chain become one move, like a file's rows.
    """
    if current is None:
        return []
    state: dict[str, str | None] = dict(current)
    rows: list[Row] = []
    by_name: dict[str, int] = {}
    for turn in turns:
        for change in turn.refs:
            if change.reverted:
                continue
            now = state.get(change.name)
            name = RelPath(ref_short_name(change.name))
            update = RefUpdate(change.name, now, change.before)
            if now == change.before:
                rows.append(Row(name, "mark", None, None, [change.id], turn.id, ALREADY_EARLIER, ref=update))
                continue
            if now != change.after:
                reason = Message("ref_moved_since_turn", now=ref_value_text(now))
                rows.append(Row(name, "skip", None, None, [change.id], turn.id, reason, ref=update))
                continue
            state[change.name] = change.before
            previous = by_name.get(change.name)
            if previous is not None:
                first = rows[previous]
                assert first.ref is not None
                first.ref = RefUpdate(change.name, first.ref.expect, change.before)
                first.change_ids.append(change.id)
                continue
            by_name[change.name] = len(rows)
            rows.append(
                Row(
                    name,
                    "ref",
                    None,
                    None,
                    [change.id],
                    turn.id,
                    ref=RefUpdate(change.name, change.after, change.before),
                )
            )
    return rows


__all__ = [
    "Picture",
    "ReadFiles",
    "Row",
    "acting",
    "finish_rows",
    "keep_reads",
    "merge_chains",
    "reads_of",
    "ref_rows",
    "row_for_change",
    "stat_key",
    "tree_path",
]

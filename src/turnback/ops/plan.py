"""Planning: what an undo or a revert would do, row by row, without changing anything.

Rows are made change by change, newest first, against a running picture of
what each path will hold once the rows before it are applied; so a path
that a user changed after the agent stops the rows below it, and the rows
of one path that chain (each restores what the next expects) become one.
Each row keeps what the path held when planned (``expect``): applying a
row whose path holds anything else is refused (compare-and-swap).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass

from turnback.capture import git
from turnback.capture.states import capture_state, probe_state
from turnback.catalog import Message
from turnback.errors import NothingToDoError, RefusedError, TurnbackError, UsageError
from turnback.fsio import ROOT_TREE, Tree
from turnback.model import (
    ABSENT,
    SPECIAL_BITS,
    Call,
    CallId,
    Change,
    FileState,
    OpId,
    Plan,
    PlanRow,
    PlanSection,
    Project,
    RefUpdate,
    RowAction,
    Session,
    Turn,
    ref_short_name,
    ref_value_text,
    short_id,
)
from turnback.paths import RelPath
from turnback.store import Store
from turnback.store.records import OverlappingCall


def clauses(*parts: Message) -> Message:
    """One reason of several clauses (``changed after the turn; --force overwrites it``)."""
    return Message("clauses", parts=parts)


def first_clause(reason: Message) -> Message:
    """What a reason says happened, without what a flag would do about it."""
    parts = reason.params.get("parts") if reason.code == "clauses" else None
    return parts[0] if isinstance(parts, tuple) and parts else reason


def with_flag_command(reason: Message, command: str) -> Message:
    """*reason* with the flag it names replaced by the whole command that acts on it (``turnback undo 2 --force``)."""

    def swapped(key: str, value: object) -> object:
        if key == "flag":
            return command
        if isinstance(value, Message):
            return with_flag_command(value, command)
        if isinstance(value, tuple):
            return tuple(with_flag_command(item, command) if isinstance(item, Message) else item for item in value)
        return value

    return Message(reason.code, **{key: swapped(key, value) for key, value in reason.params.items()})


CHANGED_AFTER_TURN = Message("changed_after_turn")
UNDO_CONFLICT = clauses(CHANGED_AFTER_TURN, Message("flag_overwrites_it", flag="--force"))
ROLLBACK_CONFLICT = clauses(CHANGED_AFTER_TURN, Message("rollback_leaves_it"))
RESEND_CONFLICT = Message("resend_conflict")
RESEND_ANYWAY_CONFLICT = Message("resend_anyway_conflict")
REDO_CONFLICT = Message("redo_conflict")
ALREADY_REDONE = Message("already_redone")
CUT_SHORT = Message("cut_short_unknown")
CUT_SHORT_ROLLBACK = clauses(CUT_SHORT, Message("rollback_leaves_it"))
CUT_SHORT_UNDO = clauses(CUT_SHORT, Message("flag_overwrites_it", flag="--force"))
CUT_SHORT_REVERT = clauses(CUT_SHORT, Message("anyway_restores_earlier"))
LINK_IN_PLACE = Message("link_in_place")
SPECIAL_IN_PLACE = Message("special_in_place")
EVICTED = Message("copy_evicted")
ALREADY_EARLIER = Message("already_earlier")
COPY_MISSING = Message("copy_missing")
GOES_TO_TRASH = Message("now_goes_to_trash")
OP_NOUNS = {
    "undo": Message("op_undo"),
    "revert": Message("op_revert"),
    "rollback": Message("op_rollback"),
    "resend": Message("op_resend"),
    "redo": Message("op_redo"),
}
SETUID_NOT_RESTORED = Message("setuid_not_restored")


@dataclass(slots=True)
class _Row:
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


class _Picture:
    """What each path holds now, and will hold as rows are applied in order.

    Project paths are relative and outside paths absolute, so one map holds both.
    """

    def __init__(self, store: Store, tree: Tree):
        self._store = store
        self._tree = tree
        self._states: dict[RelPath, FileState | TurnbackError] = {}
        self._planned: set[RelPath] = set()  # paths whose state is what an earlier row will put there
        self.blocked: dict[RelPath, _Row] = {}  # paths a skipped row stopped, by that row

    def get(self, path: RelPath, *, outside: bool) -> FileState | TurnbackError:
        if path not in self._states:
            tree, rel = tree_path(self._tree, path, outside=outside)
            try:
                self._states[path] = probe_state(tree, rel, self._store)
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


def _copy_available(store: Store, change: Change) -> Message | None:
    if change.not_covered:
        return Message("plain", text=change.not_covered)
    if change.evicted:
        return EVICTED
    if change.before.kind == "file" and (change.before.blob is None or not store.blobs.has(change.before.blob)):
        return COPY_MISSING
    return None


def _acting(target: FileState, current: FileState) -> RowAction:
    if current.same_as(target):
        return "mark"
    return "trash" if not target.exists else "restore"


def _row_for_change(
    picture: _Picture,
    store: Store,
    change: Change,
    turn_id: str | None,
    *,
    conflict_reason: Callable[[Change], Message],
    cut_short_reason: Message,
    overwrite: bool,
    hold: Callable[[Change], Message | None] = lambda _change: None,
) -> _Row:
    row = _plan_change(
        picture,
        store,
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
    picture: _Picture,
    store: Store,
    change: Change,
    turn_id: str | None,
    *,
    conflict_reason: Callable[[Change], Message],
    cut_short_reason: Message,
    overwrite: bool,
    hold: Callable[[Change], Message | None],
) -> _Row:
    """One change's row; *hold* names a reason to leave it for ``--force`` (a later call, a late job)."""
    path, target = change.path, change.before
    missing = _copy_available(store, change)
    if missing:
        return _Row(path, "not covered", None, None, [change.id], turn_id, missing)
    current = picture.get(path, outside=change.outside)
    if isinstance(current, TurnbackError):
        return _Row(path, "skip", None, None, [change.id], turn_id, current.message)
    blocked = picture.blocked.get(path)
    if blocked is not None:
        return _Row(
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
            return _Row(path, "skip", current, target, [change.id], turn_id, held, force_only=True, conflict=True)
    if current.same_as(target):
        return _Row(path, "mark", current, target, [change.id], turn_id, ALREADY_EARLIER)
    if change.after is not None and current.same_as(change.after):
        picture.set(path, target)
        return _Row(path, _acting(target, current), current, target, [change.id], turn_id)
    if current.kind == "special":
        return _Row(path, "skip", current, None, [change.id], turn_id, SPECIAL_IN_PLACE)
    if not target.exists and current.kind == "symlink" and (change.after is None or change.after.kind != "symlink"):
        return _Row(path, "skip", current, None, [change.id], turn_id, LINK_IN_PLACE)
    reason = cut_short_reason if change.after is None else conflict_reason(change)
    if not target.exists:
        reason = _for_created(reason)
    seen = picture.seen_with_content(path, current, outside=change.outside)
    if overwrite:
        picture.set(path, target)
        overwritten = clauses(first_clause(reason), GOES_TO_TRASH)
        return _Row(path, _acting(target, seen), seen, target, [change.id], turn_id, overwritten, conflict=True)
    return _Row(path, "skip", seen, target, [change.id], turn_id, reason, force_only=True, conflict=True)


_RESTORE_REMEDIES = {"anyway_restores_earlier", "anyway_restores_over_it"}


def _for_created(reason: Message) -> Message:
    """*reason* for a path the call created: what ``--anyway`` does there is delete it, not restore anything."""
    if reason.code in _RESTORE_REMEDIES:
        return Message("anyway_deletes_it")
    if reason.code == "clauses":
        parts = reason.params.get("parts")
        if isinstance(parts, tuple):
            return clauses(*(_for_created(part) if isinstance(part, Message) else part for part in parts))
    return reason


def _merge_chains(rows: list[_Row]) -> list[_Row]:
    """Join rows of one path that follow each other (each acting); the joined row takes the later place.

    The later place is the safe one: a folder is removed only after the rows
    that empty it, and a restore makes missing folders itself. A conflict row
    (one that overwrites a user's change with ``--force``) is never joined:
    the version it overwrites is put in place and goes to the trash, where a
    person can take it back.
    """
    merged: list[_Row | None] = list(rows)
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
            action = _acting(row.target, first.expect)
            conflict = first if first.conflict else row if row.conflict else None
            merged[index] = _Row(
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


def _finish_rows(rows: list[_Row]) -> tuple[PlanRow, ...]:
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


def _ref_rows(turns: Sequence[Turn], current: dict[str, str] | None) -> list[_Row]:
    """Rows that move back the git refs the turns moved, newest first; a ref moved since is left alone.

    Moves of one ref that chain become one move, like a file's rows.
    """
    if current is None:
        return []
    state: dict[str, str | None] = dict(current)
    rows: list[_Row] = []
    by_name: dict[str, int] = {}
    for turn in turns:
        for change in turn.refs:
            if change.reverted:
                continue
            now = state.get(change.name)
            name = RelPath(ref_short_name(change.name))
            update = RefUpdate(change.name, now, change.before)
            if now == change.before:
                rows.append(_Row(name, "mark", None, None, [change.id], turn.id, ALREADY_EARLIER, ref=update))
                continue
            if now != change.after:
                reason = Message("ref_moved_since_turn", now=ref_value_text(now))
                rows.append(_Row(name, "skip", None, None, [change.id], turn.id, reason, ref=update))
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
                _Row(
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


# -- undo ----------------------------------------------------------------------------------


def select_undo_turns(
    turns: Sequence[Turn], changed: set[str], *, number: int | None, from_number: int | None, force: bool
) -> list[Turn]:
    """The turns an undo acts on, newest first, by the stack rule (*changed*: ids of turns with changes).

    No number: the newest turn not undone. ``number``: that turn alone; a
    newer turn not undone refuses it unless ``force``. ``from_number``: that
    turn and every later one not yet fully undone.
    """
    with_changes = [turn for turn in turns if turn.id in changed]
    if number is not None and from_number is not None:
        raise UsageError(Message("turn_number_or_from"))
    if from_number is not None:
        if not any(turn.number == from_number for turn in turns):
            raise UsageError(Message("no_such_turn_number", number=from_number))
        chosen = [t for t in with_changes if t.number >= from_number and t.undone != "yes"]
        if not chosen:
            raise NothingToDoError(Message("nothing_to_undo_from", number=from_number))
        return sorted(chosen, key=lambda t: t.number, reverse=True)
    if number is not None:
        matches = [turn for turn in turns if turn.number == number]
        if not matches:
            raise UsageError(Message("no_such_turn_number", number=number))
        turn = matches[0]
        if turn.id not in changed:
            raise NothingToDoError(Message("nothing_to_undo_no_files", number=number))
        if turn.undone == "yes":
            raise NothingToDoError(Message("nothing_to_undo_already", number=number))
        newer = [t for t in with_changes if t.number > number and t.undone == "no"]
        if newer and not force:
            raise RefusedError(Message("undo_newer_first", newer=newer[-1].number, number=number))
        return [turn]
    pending = [turn for turn in with_changes if turn.undone == "no"]
    if not pending:
        if not with_changes:
            raise NothingToDoError(Message("nothing_to_undo_no_changes"))
        partly = [turn for turn in with_changes if turn.undone == "partly"]
        if partly:
            # A plain undo passes over a partly undone turn (its skipped rows would only be skipped again).
            newest = partly[-1].number
            raise NothingToDoError(Message("nothing_to_undo_but_kept", number=newest))
        raise NothingToDoError(Message("nothing_to_undo_all_undone"))
    return [pending[-1]]


def _overlapping(store: Store, project: Project, change: Change, kind: str) -> list[OverlappingCall]:
    """The calls a command's change may be: those running while the command ran that ended later (or run still)
    and changed the path too (or whose changes are not known yet).

    A command's change is what differs between its two scans: a job or another call running meanwhile may
    have made it, and that call's own end scan saw it too, so it is that call's. Only a file tool's call
    names what it wrote, so its rows are its own.
    """
    if kind not in ("command", "job"):
        return []
    return store.overlapping_calls_on_path(project.id, change.path, change.call_id, outside=change.outside)


def overlap_note(other: CallId, kind: str, running: bool) -> Message:
    """``may be background job 01a2…'s, which ran meanwhile``: whose a command's change may be."""
    what = {"job": Message("noun_background_job"), "command": Message("noun_command")}.get(kind, Message("noun_call"))
    return Message(
        "may_be_call_still_runs" if running else "may_be_call_ran_meanwhile", what=what, call=short_id(other)
    )


def change_overlap_note(store: Store, project: Project, change: Change, kind: str) -> Message | None:
    """Whose a change of a call of *kind* may be, when a call running meanwhile may have made it
    (:func:`_overlapping`)."""
    overlapping = [] if change.reverted else _overlapping(store, project, change, kind)
    return overlap_note(*overlapping[0]) if overlapping else None


def _overlap_hold(overlapping: Sequence[tuple[CallId, str, bool]], in_plan: Set[str], flag: str) -> Message | None:
    """Why a command's change is left for *flag*: a call not taken back with it may have made it."""
    for other in overlapping:
        if other[0] not in in_plan:
            return Message("overlap_hold", note=overlap_note(*other), flag=flag)
    return None


def _rows_for_turns(
    store: Store,
    tree: Tree,
    project: Project,
    turns: Sequence[Turn],
    *,
    force: bool,
    conflict_reason: Callable[[Change], Message],
    cut_short_reason: Message,
) -> list[_Row]:
    """Rows that take back *turns* (newest first): calls newest first, changes last first, then the refs."""
    picture = _Picture(store, tree)
    in_plan: set[str] = {call.id for turn in turns for call in turn.calls}
    overlaps: dict[int, list[OverlappingCall]] = {}
    late_jobs = {
        call.id: Message("noun_background_job" if call.kind == "job" else "noun_command_past_timeout")
        for turn in turns
        for call in turn.calls
        if call.late
    }
    checked: set[str] = set()

    def hold(change: Change) -> Message | None:
        if change.call_id in late_jobs:
            return Message(
                "late_changed_it", what=late_jobs[change.call_id], call=short_id(change.call_id), flag="--force"
            )
        overlap = _overlap_hold(overlaps.get(change.id, ()), in_plan, "--force")
        if overlap is not None:
            return overlap
        if change.path in checked:
            return None  # only a path's newest change in the plan can have a later call that stands
        checked.add(change.path)
        later = store.pending_later_call(project.id, change.path, change.call_id, in_plan, outside=change.outside)
        return Message("later_call_changed_it", call=short_id(later), flag="--force") if later else None

    rows: list[_Row] = []
    for turn in turns:
        for call in reversed(turn.calls):
            for change in reversed(call.changes):
                if change.reverted:
                    continue
                overlaps[change.id] = _overlapping(store, project, change, call.kind)
                if not force and any(other in late_jobs for other, _, _ in overlaps[change.id]):
                    continue  # the late job's change: its own row, held for --force, stands for this one
                rows.append(
                    _row_for_change(
                        picture,
                        store,
                        change,
                        turn.id,
                        conflict_reason=conflict_reason,
                        cut_short_reason=cut_short_reason,
                        overwrite=force,
                        hold=hold,
                    )
                )
    return _merge_chains(rows) + _ref_rows(turns, git.read_refs(project.root))


def plan_undo(
    store: Store,
    tree: Tree,
    session: Session,
    project: Project,
    turns: Sequence[Turn],
    *,
    force: bool,
    title_for: Callable[[Turn], Message | str],
    op_id: OpId,
) -> Plan:
    """Plan undoing *turns* (newest first): each turn's calls newest first, each call's changes last first."""
    rows = _rows_for_turns(
        store,
        tree,
        project,
        turns,
        force=force,
        conflict_reason=lambda _change: UNDO_CONFLICT,
        cut_short_reason=CUT_SHORT_UNDO,
    )
    return Plan(
        id=op_id,
        kind="undo",
        session_id=session.id,
        project_id=project.id,
        rows=_finish_rows(rows),
        sections=tuple(
            PlanSection(turn.id, Message("section_undo_turn", turn=short_id(turn.id), title=title_for(turn)))
            for turn in turns
        ),
        turn_ids=tuple(turn.id for turn in turns),
        force=force,
        created_at=store.now(),
    )


def plan_rollback(
    store: Store,
    tree: Tree,
    session: Session,
    project: Project,
    target: Turn | None,
    rewound: Sequence[Turn],
    *,
    title_for: Callable[[Turn], Message | str],
    op_id: OpId,
) -> Plan:
    """Plan rolling the session back to *target* (``None``: its start): every turn after it, newest first."""
    to_take_back = [turn for turn in rewound if turn.undone != "yes"]
    rows = _rows_for_turns(
        store,
        tree,
        project,
        to_take_back,
        force=False,
        conflict_reason=lambda _change: ROLLBACK_CONFLICT,
        cut_short_reason=CUT_SHORT_ROLLBACK,
    )
    where = (
        Message("section_roll_back_to", number=target.number, turn=short_id(target.id))
        if target
        else Message("section_roll_back_to_start")
    )
    sections = [PlanSection(None, where)]
    sections += [
        PlanSection(t.id, Message("section_rewind_turn", number=t.number, turn=short_id(t.id), title=title_for(t)))
        for t in rewound
    ]
    return Plan(
        id=op_id,
        kind="rollback",
        session_id=session.id,
        project_id=project.id,
        rows=_finish_rows(rows),
        sections=tuple(sections),
        turn_ids=tuple(turn.id for turn in rewound),
        created_at=store.now(),
        head_from=session.head,
        head_to=target.id if target else None,
        moves_head=True,
    )


def plan_resend(
    store: Store,
    tree: Tree,
    session: Session,
    project: Project,
    edited: Turn,
    dropped: Sequence[Turn],
    *,
    mode: str,
    op_id: OpId,
) -> Plan:
    """Plan editing and resending *edited*'s message: revert the calls of *dropped* (newest first) unless
    *mode* is ``keep``; applying then deletes those calls and moves the head to *edited*'s parent."""
    rows: list[_Row] = []
    if mode != "keep":
        rows = _rows_for_turns(
            store,
            tree,
            project,
            dropped,
            force=False,
            conflict_reason=lambda _change: RESEND_ANYWAY_CONFLICT if mode == "anyway" else RESEND_CONFLICT,
            cut_short_reason=CUT_SHORT,
        )
        rows = [row for row in rows if row.ref is None]  # resend takes back files, as Revert does
    return Plan(
        id=op_id,
        kind="resend",
        session_id=session.id,
        project_id=project.id,
        rows=_finish_rows(rows),
        sections=(PlanSection(None, Message("section_resend", number=edited.number, turn=short_id(edited.id))),),
        turn_ids=tuple(turn.id for turn in dropped),
        created_at=store.now(),
        head_from=session.head,
        head_to=edited.parent,
        moves_head=True,
        resend_turn=edited.id,
        resend_mode=mode,
    )


def plan_redo(store: Store, tree: Tree, session: Session, project: Project, op: Plan, *, op_id: OpId) -> Plan:
    """Plan taking back operation *op*: each row it applied, last first, from what it put back to what it displaced.

    A path that changed since *op* is skipped (compare-and-swap, no force);
    a copy that is gone makes the row not covered.
    """
    picture = _Picture(store, tree)
    rows: list[_Row] = []
    refs = git.read_refs(project.root) if any(row.ref for row in op.rows) else None
    for row in reversed(op.rows):
        if row.status != "done":
            continue
        if row.ref is not None:
            name = RelPath(ref_short_name(row.ref.name))
            if row.action == "mark":
                rows.append(
                    _Row(name, "mark", None, None, list(row.change_ids), row.turn_id, ALREADY_EARLIER, ref=row.ref)
                )
                continue
            now = (refs or {}).get(row.ref.name)
            update = RefUpdate(row.ref.name, row.ref.target, row.ref.expect)
            if now != row.ref.target:
                reason = Message("ref_moved_since_operation", now=ref_value_text(now))
                rows.append(_Row(name, "skip", None, None, list(row.change_ids), row.turn_id, reason, ref=update))
            else:
                rows.append(_Row(name, "ref", None, None, list(row.change_ids), row.turn_id, ref=update))
            continue
        if row.action == "mark":
            rows.append(
                _Row(row.path, "mark", row.expect, row.target, list(row.change_ids), row.turn_id, ALREADY_EARLIER)
            )
            continue
        assert row.expect is not None and row.target is not None
        back, put = row.target, row.expect
        current = picture.get(row.path, outside=row.outside)
        if isinstance(current, TurnbackError):
            rows.append(_Row(row.path, "skip", None, None, list(row.change_ids), row.turn_id, current.message))
        elif put.kind == "file" and (put.blob is None or not store.blobs.has(put.blob)):
            rows.append(_Row(row.path, "not covered", None, None, list(row.change_ids), row.turn_id, COPY_MISSING))
        elif current.same_as(put):
            rows.append(_Row(row.path, "mark", current, put, list(row.change_ids), row.turn_id, ALREADY_REDONE))
        elif current.same_as(back):
            picture.set(row.path, put)
            rows.append(_Row(row.path, _acting(put, current), current, put, list(row.change_ids), row.turn_id))
        else:
            rows.append(_Row(row.path, "skip", current, put, list(row.change_ids), row.turn_id, REDO_CONFLICT))
        rows[-1].outside = row.outside
    finished = tuple(
        plan_row._replace(unmark=not original.unmark)
        for plan_row, original in zip(
            _finish_rows(rows), [r for r in reversed(op.rows) if r.status == "done"], strict=True
        )
    )
    return Plan(
        id=op_id,
        kind="redo",
        session_id=session.id,
        project_id=project.id,
        rows=finished,
        sections=(PlanSection(None, Message("section_take_back", what=OP_NOUNS[op.kind], op=short_id(op.id))),),
        turn_ids=op.turn_ids,
        created_at=store.now(),
        head_from=op.head_to if op.moves_head else None,
        head_to=op.head_from if op.moves_head else None,
        moves_head=op.moves_head,
        reverses=op.id,
    )


# -- revert --------------------------------------------------------------------------------


def plan_revert(
    store: Store,
    tree: Tree,
    session: Session,
    project: Project,
    call: Call,
    turn: Turn,
    *,
    anyway: bool,
    title: Message | str,
    op_id: OpId,
) -> Plan:
    """Plan reverting one call: each path back to its state before the call, if it holds what the call wrote."""
    changes = [change for change in reversed(call.changes) if not change.reverted]
    if not changes:
        if call.changes:
            raise NothingToDoError(Message("nothing_to_revert_already", call=short_id(call.id)))
        raise NothingToDoError(Message("nothing_to_revert_no_files", call=short_id(call.id)))

    def conflict(change: Change) -> Message:
        later = store.later_calls_on_path(project.id, change.path, call.id, outside=change.outside)
        wrote_later = (Message("later_call_wrote_it", call=short_id(later[-1])),) if later else ()
        return clauses(Message("changed_since_call"), *wrote_later, Message("anyway_restores_over_it"))

    def hold(change: Change) -> Message | None:
        return _overlap_hold(_overlapping(store, project, change, call.kind), {call.id}, "--anyway")

    picture = _Picture(store, tree)
    rows = [
        _row_for_change(
            picture,
            store,
            change,
            turn.id,
            conflict_reason=conflict,
            cut_short_reason=CUT_SHORT_REVERT,
            overwrite=anyway,
            hold=hold,
        )
        for change in changes
    ]
    return Plan(
        id=op_id,
        kind="revert",
        session_id=session.id,
        project_id=project.id,
        rows=_finish_rows(_merge_chains(rows)),
        sections=(PlanSection(turn.id, Message("section_revert_call", call=short_id(call.id), title=title)),),
        turn_ids=(turn.id,),
        call_id=call.id,
        force=anyway,
        created_at=store.now(),
    )


__all__ = [
    "OP_NOUNS",
    "UNDO_CONFLICT",
    "change_overlap_note",
    "clauses",
    "first_clause",
    "plan_revert",
    "plan_undo",
    "select_undo_turns",
    "with_flag_command",
]

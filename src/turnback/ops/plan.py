"""Planning: what an undo, a rollback, a resend, a redo or a revert would do, row by row, without changing
anything. Which turns an undo takes (the stack rule), which calls a command's change may be (windows that
overlap), and each operation's rows (``ops/rows.py``) and sections.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence, Set

from turnback.capture import git
from turnback.capture.scan import load_snapshot
from turnback.catalog import Message
from turnback.errors import NothingToDoError, RefusedError, TurnbackError, UsageError
from turnback.fsio import Tree
from turnback.model import (
    OP_NOUNS,
    Call,
    CallId,
    Change,
    OpId,
    Plan,
    PlanSection,
    Project,
    RefUpdate,
    Session,
    Turn,
    ref_short_name,
    ref_value_text,
    short_id,
)
from turnback.ops.reasons import (
    ALREADY_EARLIER,
    ALREADY_REDONE,
    COPY_MISSING,
    CUT_SHORT,
    CUT_SHORT_REVERT,
    CUT_SHORT_ROLLBACK,
    CUT_SHORT_UNDO,
    REDO_CONFLICT,
    RESEND_ANYWAY_CONFLICT,
    RESEND_CONFLICT,
    ROLLBACK_CONFLICT,
    UNDO_CONFLICT,
    clauses,
    overlap_note,
)
from turnback.ops.rows import Picture, Row, acting, finish_rows, keep_reads, merge_chains, ref_rows, row_for_change
from turnback.paths import RelPath
from turnback.store.api import StoreBackend
from turnback.store.records import OverlappingCall, PathKey

# From this many changes on, a plan lets the project's last stat cache vouch for the files it looks at (the cache
# is decoded once, where the process does not hold it decoded already; fewer files are read and hashed sooner).
VOUCH_MIN_CHANGES = 64


@contextlib.contextmanager
def _picture(store: StoreBackend, tree: Tree, op_id: OpId, project: Project, changes: int) -> Iterator[Picture]:
    """A :class:`Picture` of *tree*, its folders held open while planning; what it read is kept for the apply of
    the plan *op_id* (``rows.keep_reads``). For a plan of many *changes*, the last stat cache vouches for files."""
    with tree.folders_held() as held:
        picture = Picture(store, held)
        if changes >= VOUCH_MIN_CHANGES:
            cached = store.latest_snapshot(project.id, data=False)
            stored = load_snapshot(store, cached.id) if cached is not None else None
            if stored is not None:
                picture.vouch_with(stored.snapshot)
        yield picture
    keep_reads(op_id, picture.read)


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


def _overlapping(store: StoreBackend, project: Project, change: Change, kind: str) -> list[OverlappingCall]:
    """The calls a command's change may be: those running while the command ran that ended later (or run still)
    and changed the path too (or whose changes are not known yet).

    A command's change is what differs between its two scans: a job or another call running meanwhile may
    have made it, and that call's own end scan saw it too, so it is that call's. Only a file tool's call
    names what it wrote, so its rows are its own.
    """
    if kind not in ("command", "job"):
        return []
    return store.overlapping_calls_on_path(project.id, change.path, change.call_id, outside=change.outside)


def _overlapping_paths(
    store: StoreBackend, project: Project, call: Call, keys: Sequence[PathKey]
) -> dict[PathKey, list[OverlappingCall]]:
    """:func:`_overlapping` of each of *call*'s changes at *keys* (path, outside), asked of the store at once."""
    if call.kind not in ("command", "job"):
        return {}
    return store.overlapping_calls_on_paths(project.id, call.id, keys)


def change_overlap_note(store: StoreBackend, project: Project, change: Change, kind: str) -> Message | None:
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
    store: StoreBackend,
    tree: Tree,
    project: Project,
    turns: Sequence[Turn],
    *,
    force: bool,
    conflict_reason: Callable[[Change], Message],
    cut_short_reason: Message,
    op_id: OpId,
) -> list[Row]:
    """Rows that take back *turns* (newest first): calls newest first, changes last first, then the refs."""
    count = sum(len(call.changes) for turn in turns for call in turn.calls)
    with _picture(store, tree, op_id, project, count) as picture:
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
            later = pending_later.get((change.path, change.outside))
            return Message("later_call_changed_it", call=short_id(later), flag="--force") if later else None

        rows: list[Row] = []
        pending_later: dict[PathKey, CallId] = {}
        for turn in turns:
            for call in reversed(turn.calls):
                changes = [change for change in reversed(call.changes) if not change.reverted]
                # The store is asked about the call's paths at once, not 6 questions a change.
                keys = [(change.path, change.outside) for change in changes]
                picture.know_copies(changes)
                unchecked = [key for key in keys if key[0] not in checked]
                pending_later = {} if force else store.pending_later_calls(project.id, call.id, unchecked, in_plan)
                overlapping = _overlapping_paths(store, project, call, keys)
                for change in changes:
                    overlaps[change.id] = overlapping.get((change.path, change.outside), [])
                    if not force and any(other in late_jobs for other, _, _ in overlaps[change.id]):
                        continue  # the late job's change: its own row, held for --force, stands for this one
                    rows.append(
                        row_for_change(
                            picture,
                            change,
                            turn.id,
                            conflict_reason=conflict_reason,
                            cut_short_reason=cut_short_reason,
                            overwrite=force,
                            hold=hold,
                        )
                    )
        # git runs only where a turn moved a ref: a turn of files alone needs no look at the repository.
        refs = git.read_refs(project.root) if any(turn.refs for turn in turns) else None
        return merge_chains(rows) + ref_rows(turns, refs)


def plan_undo(
    store: StoreBackend,
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
        op_id=op_id,
    )
    return Plan(
        id=op_id,
        kind="undo",
        session_id=session.id,
        project_id=project.id,
        rows=finish_rows(rows),
        sections=tuple(
            PlanSection(turn.id, Message("section_undo_turn", turn=short_id(turn.id), title=title_for(turn)))
            for turn in turns
        ),
        turn_ids=tuple(turn.id for turn in turns),
        force=force,
        created_at=store.now(),
    )


def plan_rollback(
    store: StoreBackend,
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
        op_id=op_id,
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
        rows=finish_rows(rows),
        sections=tuple(sections),
        turn_ids=tuple(turn.id for turn in rewound),
        created_at=store.now(),
        head_from=session.head,
        head_to=target.id if target else None,
        moves_head=True,
    )


def plan_resend(
    store: StoreBackend,
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
    rows: list[Row] = []
    if mode != "keep":
        rows = _rows_for_turns(
            store,
            tree,
            project,
            dropped,
            force=False,
            conflict_reason=lambda _change: RESEND_ANYWAY_CONFLICT if mode == "anyway" else RESEND_CONFLICT,
            cut_short_reason=CUT_SHORT,
            op_id=op_id,
        )
        rows = [row for row in rows if row.ref is None]  # resend takes back files, as Revert does
    return Plan(
        id=op_id,
        kind="resend",
        session_id=session.id,
        project_id=project.id,
        rows=finish_rows(rows),
        sections=(PlanSection(None, Message("section_resend", number=edited.number, turn=short_id(edited.id))),),
        turn_ids=tuple(turn.id for turn in dropped),
        created_at=store.now(),
        head_from=session.head,
        head_to=edited.parent,
        moves_head=True,
        resend_turn=edited.id,
        resend_mode=mode,
    )


def plan_redo(store: StoreBackend, tree: Tree, session: Session, project: Project, op: Plan, *, op_id: OpId) -> Plan:
    """Plan taking back operation *op*: each row it applied, last first, from what it put back to what it displaced.

    A path that changed since *op* is skipped (compare-and-swap, no force);
    a copy that is gone makes the row not covered.
    """
    with _picture(store, tree, op_id, project, len(op.rows)) as picture:
        rows: list[Row] = []
        refs = git.read_refs(project.root) if any(row.ref for row in op.rows) else None
        for row in reversed(op.rows):
            if row.status != "done":
                continue
            if row.ref is not None:
                name = RelPath(ref_short_name(row.ref.name))
                if row.action == "mark":
                    rows.append(
                        Row(name, "mark", None, None, list(row.change_ids), row.turn_id, ALREADY_EARLIER, ref=row.ref)
                    )
                    continue
                now = (refs or {}).get(row.ref.name)
                update = RefUpdate(row.ref.name, row.ref.target, row.ref.expect)
                if now != row.ref.target:
                    reason = Message("ref_moved_since_operation", now=ref_value_text(now))
                    rows.append(Row(name, "skip", None, None, list(row.change_ids), row.turn_id, reason, ref=update))
                else:
                    rows.append(Row(name, "ref", None, None, list(row.change_ids), row.turn_id, ref=update))
                continue
            if row.action == "mark":
                rows.append(
                    Row(row.path, "mark", row.expect, row.target, list(row.change_ids), row.turn_id, ALREADY_EARLIER)
                )
                continue
            assert row.expect is not None and row.target is not None
            back, put = row.target, row.expect
            current = picture.get(row.path, outside=row.outside)
            if isinstance(current, TurnbackError):
                rows.append(Row(row.path, "skip", None, None, list(row.change_ids), row.turn_id, current.message))
            elif put.kind == "file" and (put.blob is None or not store.blobs.has(put.blob)):
                rows.append(Row(row.path, "not covered", None, None, list(row.change_ids), row.turn_id, COPY_MISSING))
            elif current.same_as(put):
                rows.append(Row(row.path, "mark", current, put, list(row.change_ids), row.turn_id, ALREADY_REDONE))
            elif current.same_as(back):
                picture.set(row.path, put)
                rows.append(Row(row.path, acting(put, current), current, put, list(row.change_ids), row.turn_id))
            else:
                rows.append(Row(row.path, "skip", current, put, list(row.change_ids), row.turn_id, REDO_CONFLICT))
            rows[-1].outside = row.outside
        finished = tuple(
            plan_row._replace(unmark=not original.unmark)
            for plan_row, original in zip(
                finish_rows(rows), [r for r in reversed(op.rows) if r.status == "done"], strict=True
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
    store: StoreBackend,
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

    overlapping = _overlapping_paths(store, project, call, [(change.path, change.outside) for change in changes])

    def hold(change: Change) -> Message | None:
        return _overlap_hold(overlapping.get((change.path, change.outside), []), {call.id}, "--anyway")

    with _picture(store, tree, op_id, project, len(changes)) as picture:
        picture.know_copies(changes)
        rows = [
            row_for_change(
                picture,
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
            rows=finish_rows(merge_chains(rows)),
            sections=(PlanSection(turn.id, Message("section_revert_call", call=short_id(call.id), title=title)),),
            turn_ids=(turn.id,),
            call_id=call.id,
            force=anyway,
            created_at=store.now(),
        )


__all__ = [
    "change_overlap_note",
    "plan_revert",
    "plan_undo",
    "select_undo_turns",
]

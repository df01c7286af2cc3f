"""After an apply's rows: each outcome journaled, the refs moved together, each turn's undo state, and what
the operation itself does (a rollback or resend moves the head, a resend drops its calls, a redo marks what
it took back)."""

from __future__ import annotations

from collections.abc import Sequence

from turnback.capture import git
from turnback.catalog import Message
from turnback.errors import RefusedError, TurnbackError
from turnback.model import Plan, PlanRow, RowStatus, TurnId, short_id
from turnback.ops.reasons import with_flag_command
from turnback.store.api import StoreBackend

PLAN_AGAIN = Message("plan_again")
CHANGED_SINCE_PREVIEW = Message("changed_since_preview", then=PLAN_AGAIN)
REFS_TOGETHER = Message("refs_moved_together", then=PLAN_AGAIN)
# The outcomes that name a plan made again as what to do next; settle_turns names the command that makes it.
PLANS_AGAIN = ("changed_since_preview", "refs_moved_together")

Outcome = tuple[RowStatus, Message | None]
# What the journal holds for each row settled by this run (its status and note), by the row's seq.
Journal = dict[int, Outcome]


def journaled(plan: Plan, journal: Journal) -> Plan:
    """*plan* with the outcomes *journal* holds: what reading the plan back from the store gives, without the read."""
    rows = tuple(
        row._replace(status=journal[row.seq][0], note=journal[row.seq][1]) if row.seq in journal else row
        for row in plan.rows
    )
    return plan._replace(rows=rows)


def settle_rows(
    store: StoreBackend, plan: Plan, journal: Journal, settled: Sequence[tuple[PlanRow, RowStatus, Message | None]]
) -> None:
    """Journal rows' outcomes in one transaction (and in *journal* once committed); a row done marks the changes
    it took back reverted with it."""
    # The changes each row done takes back, by (is a ref's, reverted): one statement each, not two a row.
    reverted: dict[tuple[bool, bool], list[int]] = {}
    for row, status, _ in settled:
        if status == "done":
            reverted.setdefault((row.ref is not None, not row.unmark), []).extend(row.change_ids)
    with store.transaction():
        store.set_row_statuses(plan.id, [(row.seq, status, note) for row, status, note in settled])
        for (of_ref, flag), change_ids in reverted.items():
            if of_ref:
                store.mark_ref_changes_reverted(change_ids, reverted=flag)
            else:
                store.mark_changes_reverted(change_ids, reverted=flag)
    journal.update((row.seq, (status, note)) for row, status, note in settled)


def move_refs(root: str, rows: list[PlanRow]) -> list[tuple[RowStatus, Message | None]]:
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


def settle_turns(store: StoreBackend, plan: Plan, journal: Journal) -> None:
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
        plans_again = row.note is not None and row.note.code in PLANS_AGAIN
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
        journal[row.seq] = ("skipped", note)


def refuse_stale_head(store: StoreBackend, plan: Plan) -> None:
    """A rollback, resend or redo applies only to the head it was planned against."""
    head = store.session(plan.session_id).head
    if head != plan.head_from:
        raise RefusedError(Message("head_moved_since_preview", now=_head_name(head), seen=_head_name(plan.head_from)))


def _head_name(head: TurnId | None) -> Message:
    return Message("turn_id_shown", turn=short_id(head)) if head else Message("the_start")


def finish_operation(store: StoreBackend, plan: Plan) -> tuple[Message, ...]:
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

"""Contract: a plan reads back whole; an operation's status moves by compare-and-swap."""

from __future__ import annotations

import pytest

from tests.store.contract.conftest import file_state
from turnback.catalog import Message
from turnback.errors import UsageError
from turnback.model import FileState, OpId, Plan, PlanRow, PlanSection, RefUpdate, Session, Turn
from turnback.paths import RelPath
from turnback.store.api import StoreBackend


def _plan(backend: StoreBackend, session: Session, turn: Turn, **fields: object) -> Plan:
    expect = file_state(backend, b"what the agent wrote\n")
    target = file_state(backend, b"what was there before\n", 0o755)
    rows = (
        PlanRow(0, "restore", RelPath("src/main.py"), expect=expect, target=target, change_ids=(4, 7), turn_id=turn.id),
        PlanRow(1, "trash", RelPath("new file.txt"), expect=expect, target=FileState("absent"), trash_name="t-1"),
        PlanRow(
            2,
            "skip",
            RelPath("conflict.txt"),
            reason=Message(
                "clauses", parts=(Message("changed_after_turn"), Message("flag_overwrites_it", flag="--force"))
            ),
            force_only=True,
            conflict=True,
            warnings=(Message("setuid_not_restored"),),
        ),
        PlanRow(3, "ref", RelPath("refs/heads/main"), ref=RefUpdate("refs/heads/main", "bbb", "aaa")),
        PlanRow(4, "restore", RelPath("/etc/outside.conf"), target=target, outside=True, unmark=True),
    )
    values: dict[str, object] = {
        "id": OpId(backend.new_id()),
        "kind": "undo",
        "session_id": session.id,
        "project_id": session.project_id,
        "rows": rows,
        "sections": (
            PlanSection(turn.id, Message("section_undo_turn", turn="0a1b", title="fix the parser")),
            PlanSection(None, Message("section_roll_back_to_start")),
        ),
        "turn_ids": (turn.id,),
        "force": True,
        "created_at": backend.now(),
        "notes": (Message("nothing_resent", count=2),),
        "head_from": turn.id,
        "head_to": None,
        "moves_head": True,
        **fields,
    }
    return Plan(**values)  # type: ignore[arg-type]


def test_a_plan_reads_back_as_it_was_saved(backend: StoreBackend, session: Session, turn: Turn) -> None:
    plan = _plan(backend, session, turn, resend_turn=turn.id, resend_mode="keep")
    backend.save_plan(plan)
    assert backend.load_plan(plan.id) == plan
    with pytest.raises(UsageError, match="no operation"):
        backend.load_plan(OpId("0" * 26))


def test_an_operation_moves_from_the_status_the_caller_saw_only(
    backend: StoreBackend, session: Session, turn: Turn
) -> None:
    plan = _plan(backend, session, turn)
    backend.save_plan(plan)
    assert backend.set_op_status(plan.id, "applying", expect="planned")
    assert not backend.set_op_status(plan.id, "applying", expect="planned")  # a second apply is refused
    assert backend.load_plan(plan.id).status == "applying"
    assert not backend.set_op_status(plan.id, "done", expect="planned")
    assert backend.set_op_status(plan.id, "done", expect="applying")
    assert backend.load_plan(plan.id).status == "done"
    assert backend.set_op_status(plan.id, "planned")  # without expect: from any status


def test_row_results_and_the_operations_of_a_session(backend: StoreBackend, session: Session, turn: Turn) -> None:
    preview = _plan(backend, session, turn)
    applied = _plan(backend, session, turn)
    redo = _plan(backend, session, turn, kind="redo", reverses=applied.id)
    for plan in (preview, applied, redo):
        backend.save_plan(plan)
    backend.set_row_status(applied.id, 0, "done", Message("changed_since_preview", then=Message("plan_again")))
    backend.set_row_status(applied.id, 2, "skipped", None)
    rows = backend.load_plan(applied.id).rows
    assert [(r.status, r.note) for r in rows[:3]] == [
        ("done", Message("changed_since_preview", then=Message("plan_again"))),
        ("pending", None),
        ("skipped", None),
    ]
    # a batch's rows journaled in one statement, each with its own note
    backend.set_row_statuses(preview.id, [(1, "failed", Message("plain", text="disk full")), (2, "done", None)])
    assert [(r.status, r.note) for r in backend.load_plan(preview.id).rows[:3]] == [
        ("pending", None),
        ("failed", Message("plain", text="disk full")),
        ("done", None),
    ]
    assert backend.ops_of_session(session.id) == []  # previews are not listed
    assert backend.ops_in_status(session.id, "planned") == sorted([preview.id, applied.id, redo.id])
    assert backend.newest_op_to_take_back(session.id) is None
    backend.set_op_status(applied.id, "done")
    assert backend.newest_op_to_take_back(session.id) == applied.id
    backend.set_op_status(redo.id, "done")  # no row of it is done: it changed nothing
    assert backend.newest_op_to_take_back(session.id) == applied.id
    backend.set_taken_back(applied.id, redo.id)
    assert backend.newest_op_to_take_back(session.id) is None
    summaries = backend.ops_of_session(session.id)
    assert {s.id: (s.kind, s.status, s.reverses, s.taken_back_by) for s in summaries} == {
        applied.id: ("undo", "done", None, redo.id),
        redo.id: ("redo", "done", applied.id, None),
    }
    assert not backend.op_evicted(applied.id)

"""Contract: what changed, cheaply: a change counter another connection's commit moves, and each session's newest
turn, call and operation with a marker that moves whenever any of its records does (a front end polls them)."""

from __future__ import annotations

from collections.abc import Callable

from tests.store.contract.test_operations import _plan
from turnback.model import Session, Turn
from turnback.store.api import StoreBackend


def test_the_change_counter_moves_when_another_connection_commits(
    backend: StoreBackend, reopen: Callable[[], StoreBackend], session: Session
) -> None:
    watcher = reopen()
    seen = watcher.data_version()
    assert watcher.data_version() == seen  # reading changes nothing
    backend.create_turn(session.id, "a turn", holder_pid=None, holder_start=None)
    moved = watcher.data_version()
    assert moved != seen
    assert watcher.data_version() == moved


def test_each_sessions_newest_records_and_a_marker_that_moves_with_any_of_them(
    backend: StoreBackend, session: Session, turn: Turn
) -> None:
    empty = backend.create_session(session.project_id, actor=None, title=None, incognito=False)
    by_session = {item.session_id: item for item in backend.activity()}
    assert (by_session[empty.id].turn_id, by_session[empty.id].call_id, by_session[empty.id].op_id) == (
        None,
        None,
        None,
    )
    assert by_session[session.id].turn_id == turn.id
    markers = [by_session[session.id].marker]

    def moved() -> bool:
        now = {item.session_id: item for item in backend.activity()}[session.id]
        changed = now.marker != markers[-1]
        markers.append(now.marker)
        return changed

    call = backend.create_call(turn, "write", None)
    assert {item.session_id: item for item in backend.activity()}[session.id].call_id == call
    assert moved()
    assert not moved()  # nothing happened
    backend.finish_call(call, "done")
    assert moved()
    backend.end_turn(turn.id, "ended")
    assert moved()
    mark = backend.add_busy_mark(session.id, "compacting", None, None)
    assert moved()
    backend.remove_busy_mark(mark)
    assert moved()
    plan = _plan(backend, session, turn)
    backend.save_plan(plan)
    assert {item.session_id: item for item in backend.activity()}[session.id].op_id == plan.id
    assert moved()
    backend.set_op_status(plan.id, "applying", expect="planned")
    backend.set_op_status(plan.id, "done", expect="applying")
    assert moved()
    newer = backend.create_turn(session.id, "another", holder_pid=None, holder_start=None)
    assert {item.session_id: item for item in backend.activity()}[session.id].turn_id == newer.id
    assert moved()
    assert {item.session_id: item for item in backend.activity()}[empty.id].marker == by_session[empty.id].marker

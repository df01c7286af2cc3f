"""Contract: what the size caps, gc, verify and deleting a session read and change."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable

import pytest

from tests.store.contract.conftest import file_state
from turnback.errors import UsageError
from turnback.model import BlobId, FileState, OpId, Plan, PlanRow, ProjectId, Session, Turn
from turnback.ops import maintenance
from turnback.paths import RelPath
from turnback.procs import process_start
from turnback.store.api import StoreBackend


def _ended_turn_with_a_copy(backend: StoreBackend, session: Session, content: bytes) -> tuple[Turn, str, bytes]:
    turn = backend.create_turn(session.id, None, holder_pid=None, holder_start=None)
    call_id = backend.create_call(turn, "Write", "input text")
    before = file_state(backend, content)
    backend.add_change(call_id, 0, session.project_id, RelPath("a.txt"), before, FileState("absent"))
    backend.finish_call(call_id, "done")
    backend.end_turn(turn.id, "ended")
    assert before.blob is not None
    return turn, call_id, before.blob


def test_kept_copies_are_counted_and_an_evicted_call_keeps_none(backend: StoreBackend, session: Session) -> None:
    assert backend.kept_bytes() == 0
    old, old_call, old_copy = _ended_turn_with_a_copy(backend, session, b"x" * 1000)
    new, new_call, new_copy = _ended_turn_with_a_copy(backend, session, b"y" * 3000)
    with_input = backend.kept_bytes()
    assert with_input > 4000  # both copies' content, and the calls' sealed input
    assert backend.turn_kept_bytes(old.id) == 1000
    assert backend.kept_blob_ids() == {old_copy, new_copy}
    assert backend.newest_turn_ids() == {new.id}
    assert [(c.id, c.turn_id) for c in backend.evictable_calls()] == [(old_call, old.id), (new_call, new.id)]
    assert backend.call_kept_blobs(old_call) == {old_copy}
    with backend.transaction():
        backend.evict_call(old_call)
    assert backend.kept_bytes() < with_input - 1000
    assert backend.kept_blob_ids() == {new_copy}
    assert backend.call(old_call).input is None and backend.call(old_call).changes[0].evicted
    assert backend.call_kept_blobs(old_call) == set()
    assert [c.id for c in backend.evictable_calls()] == [new_call]
    assert backend.turn_kept_bytes(old.id) == 0
    assert [c.call_id for c in backend.kept_change_copies()] == [new_call]


def test_the_bound_on_a_turn_s_copies_is_never_below_them_whoever_records_them(
    backend: StoreBackend, session: Session, turn: Turn, reopen: Callable[[], StoreBackend]
) -> None:
    """The cap check trusts ``turn_kept_bytes_at_most`` when it says a copy fits: it must see what this
    connection and any other one (another process writing in the same turn) recorded since it last read."""
    other = reopen()
    same_turn = other.turn(turn.id)

    def record(store: StoreBackend, content: bytes, after: FileState | None = None) -> int:
        with store.transaction():
            call = store.create_call(same_turn, "Write", None)
            return store.add_change(call, 0, session.project_id, RelPath("a.txt"), file_state(store, content), after)

    def bound_holds(exact: int) -> None:
        assert backend.turn_kept_bytes(turn.id) == exact
        assert backend.turn_kept_bytes_at_most(turn.id) >= exact

    assert backend.turn_kept_bytes_at_most(turn.id) == 0
    record(backend, b"a" * 1000)
    bound_holds(1000)
    record(backend, b"b" * 2000)
    bound_holds(3000)
    record(other, b"c" * 4000)  # another process's call in the turn
    bound_holds(7000)
    assert backend.turn_kept_bytes_at_most(turn.id) == 7000
    change = record(other, b"d" * 100, None)  # a harness's before; its after comes later, from another process
    bound_holds(7100)
    with other.transaction():
        other.set_change_after(change, file_state(other, b"e" * 8000), partial=False)
    bound_holds(15100)
    change = record(backend, b"f" * 10, None)
    bound_holds(15110)
    with backend.transaction():
        backend.set_change_after(change, file_state(backend, b"g" * 500), partial=False)
    bound_holds(15610)


def test_a_pending_preview_keeps_its_copies_and_an_old_one_may_go(
    backend: StoreBackend, session: Session, turn: Turn
) -> None:
    def preview(created_at: int, content: bytes) -> Plan:
        target = file_state(backend, content)
        plan = Plan(
            OpId(backend.new_id()),
            "undo",
            session.id,
            session.project_id,
            (PlanRow(0, "restore", RelPath("a.txt"), target=target),),
            created_at=created_at,
        )
        backend.save_plan(plan)
        return plan

    older = preview(1_000, b"older preview")
    newest = preview(2_000, b"newest preview")
    older_copy, newest_copy = (p.rows[0].target and p.rows[0].target.blob for p in (older, newest))
    assert backend.pending_op_blobs(pending_since=10**18) == {newest_copy}  # only the session's newest
    assert backend.pending_op_blobs(pending_since=0) == {older_copy, newest_copy}  # both recent enough
    assert [op.id for op in backend.evictable_operations(pending_since=10**18)] == [older.id]
    backend.evict_operation(older.id)
    assert backend.op_evicted(older.id)
    assert backend.kept_blob_ids() == {newest_copy}
    assert backend.evictable_operations(pending_since=10**18) == []


def test_gc_sees_every_blob_and_deletes_the_ones_it_is_told(backend: StoreBackend, session: Session) -> None:
    _, _, kept = _ended_turn_with_a_copy(backend, session, b"kept")
    loose = backend.blobs.put_bytes(b"nothing needs this")
    assert {blob.id for blob in backend.blobs.stored()} == {kept, loose}
    assert all(blob.stored > 0 for blob in backend.blobs.stored())
    with backend.transaction():
        backend.blobs.delete(loose)
    assert backend.blobs.ids() == {kept}
    space = backend.free_space()
    assert 0 <= space.free_bytes <= space.total_bytes
    backend.compact()
    assert backend.blobs.read_bytes(BlobId(kept)) == b"kept"


def test_a_fresh_store_verifies_clean_and_lists_what_verify_reads(
    backend: StoreBackend, session: Session, turn: Turn
) -> None:
    call_id = backend.create_call(turn, "Write", None)
    backend.save_snapshot(session.project_id, b"cache", 1)
    lone_root = backend.project(session.project_id).root + "-other"
    lone = backend.register_project(lone_root).project
    assert backend.integrity_problems() == []
    assert backend.schema_mismatches() == []
    assert backend.dangling_references() == []
    assert backend.projects_without_sessions() == [lone.id]
    assert len(backend.snapshot_ids()) == 1
    assert backend.session_ids() == [session.id]
    assert backend.turn_ids(session.id) == [turn.id]
    assert backend.call_ids(session.id) == [call_id]
    assert backend.op_ids(session.id) == []
    assert [(r.purpose, r.project_id) for r in backend.snapshot_records()] == [("cache", session.project_id)]
    assert backend.cache_project_ids() == [session.project_id]


def test_deleting_a_session_deletes_what_it_owns_and_nothing_else(backend: StoreBackend, session: Session) -> None:
    other = backend.create_session(session.project_id, actor=None, title=None, incognito=False)
    turn, call_id, copy = _ended_turn_with_a_copy(backend, session, b"gone with the session")
    kept_turn, kept_call, kept_copy = _ended_turn_with_a_copy(backend, other, b"stays")
    backend.add_notices(session.id, [("a.txt", "Reverted the change to a.txt")])
    backend.add_busy_mark(session.id, "busy", None, None)
    backend.delete_session_records(session.id)
    with pytest.raises(UsageError):
        backend.session(session.id)
    with pytest.raises(UsageError):
        backend.turn(turn.id)
    with pytest.raises(UsageError):
        backend.call(call_id)
    assert backend.session_ids() == [other.id]
    assert backend.sealed_notices(session.id) == [] and backend.busy_marks(session.id) == []
    assert backend.kept_blob_ids() == {kept_copy}
    assert backend.blobs.has(BlobId(copy))  # the copy stays until a gc finds nothing needs it
    assert backend.call(kept_call).turn_id == kept_turn.id
    assert backend.dangling_references() == []


def test_gc_spares_what_a_running_process_holds_and_a_hold_whose_process_ended_holds_nothing(
    backend: StoreBackend, session: Session, reopen: Callable[[], StoreBackend]
) -> None:
    """A scan stores blobs before the record naming them is committed: gc (in any process) spares every blob
    stored, or stored again, since a running holder's hold began; an ended holder's hold is removed."""
    backend.blobs.put_bytes(b"stored before the hold, named by nothing")
    met_again = backend.blobs.put_bytes(b"stored before the hold, and met again by the scan")
    since = time.time_ns()
    ended = subprocess.Popen(["true"])
    ended.wait()
    dead = backend.add_blob_hold(session.project_id, ended.pid, 1, since - 10**12)
    live = backend.add_blob_hold(session.project_id, os.getpid(), process_start(os.getpid()), since)
    with backend.transaction():
        stored = backend.blobs.put_bytes(b"stored by the running scan")
        assert backend.blobs.put_bytes(b"stored before the hold, and met again by the scan") == met_again
    other = reopen()  # the gc of another process
    maintenance.gc(other)
    assert backend.blobs.ids() == {stored, met_again}
    assert [hold.id for hold in backend.blob_holds()] == [live]
    assert dead not in {hold.id for hold in other.blob_holds()}
    assert backend.blobs.read_bytes(stored) == b"stored by the running scan"
    backend.remove_blob_hold(live)
    maintenance.gc(other)
    assert backend.blobs.ids() == set()
    assert backend.blob_holds() == []


def test_a_hold_of_a_project_not_registered_is_judged_by_its_process_here(
    backend: StoreBackend, session: Session
) -> None:
    """With no project row to tell its host by, a live holder still holds (nothing it stored is lost) and an
    ended one's hold goes."""
    since = time.time_ns()
    ended = subprocess.Popen(["true"])
    ended.wait()
    unknown = ProjectId("f" * 32)
    backend.add_blob_hold(unknown, ended.pid, 1, since)
    live = backend.add_blob_hold(unknown, os.getpid(), process_start(os.getpid()), since)
    with backend.transaction():
        stored = backend.blobs.put_bytes(b"stored under a hold of a project not registered")
    reclaimed = maintenance.gc(backend)
    assert reclaimed.held == 1 and backend.blobs.ids() == {stored}
    assert [hold.id for hold in backend.blob_holds()] == [live]  # the dead one removed

"""Contract: turns, their state, the git refs they moved; turns numbered one by one under concurrent writers."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.store.contract.conftest import Backend, file_state
from turnback.model import RefChange, Session, Turn
from turnback.paths import RelPath
from turnback.store.api import StoreBackend


def test_turns_are_numbered_and_each_is_the_child_of_the_head(backend: StoreBackend, session: Session) -> None:
    first = backend.create_turn(session.id, "first", holder_pid=123, holder_start=456, refs={"HEAD": "abc"})
    second = backend.create_turn(session.id, None, holder_pid=None, holder_start=None)
    assert (first.number, first.parent, first.message, first.status, first.undone) == (
        1,
        None,
        "first",
        "running",
        "no",
    )
    assert (second.number, second.parent, second.message) == (2, first.id, None)
    assert backend.session(session.id).head == second.id
    assert backend.turn(first.id) == first
    assert backend.turn_by_number(session.id, 2) == second
    assert [t.id for t in backend.turns(session.id)] == [first.id, second.id]
    assert backend.refs_at_turn_start(first.id) == {"HEAD": "abc"}
    assert backend.refs_at_turn_start(second.id) is None


def test_the_last_turn_is_the_highest_numbered_of_its_session(backend: StoreBackend, session: Session) -> None:
    other = backend.create_session(session.project_id, actor=None, title=None, incognito=False)
    assert backend.last_turn(session.id) is None
    first = backend.create_turn(session.id, "first", holder_pid=None, holder_start=None)
    backend.end_turn(first.id, "ended")
    second = backend.create_turn(session.id, None, holder_pid=None, holder_start=None)
    backend.create_turn(other.id, None, holder_pid=None, holder_start=None)  # another session's is newer
    last = backend.last_turn(session.id)
    assert last is not None and (last.id, last.number, last.status) == (second.id, 2, "running")
    assert last == backend.turns(session.id)[-1]


def test_a_turn_ends_once_and_reopens_only_when_ended(backend: StoreBackend, session: Session) -> None:
    turn = backend.create_turn(session.id, "m", holder_pid=1, holder_start=2)
    assert backend.running_turns(session.id) == [(backend.turn(turn.id), 2)]
    assert not backend.reopen_turn(turn.id, holder_pid=3, holder_start=4)  # it runs: nothing to reopen
    backend.end_turn(turn.id, "ended")
    ended = backend.turn(turn.id)
    assert ended.status == "ended" and ended.ended_at is not None
    backend.end_turn(turn.id, "interrupted")  # only a running turn ends
    assert backend.turn(turn.id).status == "ended"
    assert backend.running_turns(session.id) == []
    assert backend.reopen_turn(turn.id, holder_pid=3, holder_start=4)
    assert not backend.reopen_turn(turn.id, holder_pid=5, holder_start=6)
    reopened = backend.running_turns(session.id)
    assert [(t.turn.status, t.turn.ended_at, t.turn.holder_pid, t.holder_start) for t in reopened] == [
        ("running", None, 3, 4)
    ]


def test_git_ref_moves_read_back_and_count_towards_the_undo_state(backend: StoreBackend, turn: Turn) -> None:
    backend.add_ref_changes(turn.id, [("refs/heads/main", "aaa", "bbb"), ("refs/tags/v1", None, "ccc")])
    moves = backend.ref_changes(turn.id)
    assert [(m.name, m.before, m.after, m.reverted) for m in moves] == [
        ("refs/heads/main", "aaa", "bbb", False),
        ("refs/tags/v1", None, "ccc", False),
    ]
    assert backend.turns_with_changes(turn.session_id) == {turn.id}
    assert backend.refresh_turn_undone(turn.id) == "no"
    backend.mark_ref_changes_reverted([moves[0].id])
    assert backend.refresh_turn_undone(turn.id) == "partly"
    backend.mark_ref_changes_reverted([m.id for m in moves])
    assert backend.refresh_turn_undone(turn.id) == "yes"
    assert backend.turn(turn.id).undone == "yes"
    assert backend.turn(turn.id, with_calls=True).refs == tuple(
        RefChange(m.id, m.turn_id, m.name, m.before, m.after, True) for m in moves
    )


def test_the_undo_state_follows_the_changes_taken_back(backend: StoreBackend, turn: Turn) -> None:
    project_id = backend.session(turn.session_id).project_id
    call_id = backend.create_call(turn, "Write", None)
    ids = [
        backend.add_change(
            call_id, seq, project_id, RelPath(path), file_state(backend, b"old"), file_state(backend, b"new")
        )
        for seq, path in enumerate(["a.txt", "b.txt"])
    ]
    backend.mark_changes_reverted(ids[:1])
    assert backend.refresh_turn_undone(turn.id) == "partly"
    backend.mark_changes_reverted(ids[:1], reverted=False)
    assert backend.refresh_turn_undone(turn.id) == "no"


def test_a_resent_turn_loses_its_calls_and_ref_moves(backend: StoreBackend, turn: Turn) -> None:
    project_id = backend.session(turn.session_id).project_id
    call_id = backend.create_call(turn, "Edit", '{"path": "a.txt"}')
    backend.add_change(call_id, 0, project_id, RelPath("a.txt"), file_state(backend, b"old"), None)
    backend.add_ref_changes(turn.id, [("HEAD", "a", "b")])
    backend.drop_calls_of_turns([turn.id])
    dropped = backend.turn(turn.id, with_calls=True)
    assert (dropped.calls, dropped.refs, dropped.resent) == ((), (), True)
    assert backend.turns_with_changes(turn.session_id) == set()


def test_writers_on_one_session_each_get_their_own_turn_number(
    backend: StoreBackend, session: Session, backend_kind: Backend, home: Path
) -> None:
    """Each connection reads the last number and writes the next in one transaction: none is given twice."""
    writers, each = 4, 5
    errors: list[BaseException] = []
    start = threading.Barrier(writers)

    def write() -> None:
        try:
            with backend_kind.open(home) as store:  # a connection of its own, as another process has
                start.wait()
                for _ in range(each):
                    store.create_turn(session.id, None, holder_pid=None, holder_start=None)
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=write) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(t.number for t in backend.turns(session.id)) == list(range(1, writers * each + 1))

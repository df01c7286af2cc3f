"""Contract: projects, sessions, their head, ids given in part, external ids, busy marks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from turnback.errors import UsageError
from turnback.model import Project, Session, SessionId, TurnId
from turnback.store.api import StoreBackend


def test_a_project_is_registered_once_and_found_from_a_folder_below_it(backend: StoreBackend, tmp_path: Path) -> None:
    root = tmp_path / "work"
    (root / "src" / "deep").mkdir(parents=True)
    first = backend.register_project(str(root))
    again = backend.register_project(str(root))
    assert first.new and not again.new
    assert again.project == first.project == Project(first.project.id, str(root))
    assert backend.project(first.project.id).root == str(root)
    assert backend.project_containing(str(root / "src" / "deep")) == first.project
    assert backend.project_containing(str(tmp_path)) is None
    assert backend.projects() == [first.project]


def test_a_session_reads_back_as_it_was_made(backend: StoreBackend, project: Project) -> None:
    made = backend.create_session(project.id, actor="claude", title="rename the module", incognito=True)
    read = backend.session(made.id)
    assert read == made
    assert (read.project_id, read.actor, read.title, read.incognito, read.head) == (
        project.id,
        "claude",
        "rename the module",
        True,
        None,
    )


def test_sessions_list_the_most_recently_active_first_and_by_project(
    backend: StoreBackend, project: Project, tmp_path: Path
) -> None:
    other_root = tmp_path / "other"
    other_root.mkdir()
    other = backend.register_project(str(other_root)).project
    older = backend.create_session(project.id, actor=None, title="older", incognito=False)
    newer = backend.create_session(project.id, actor=None, title="newer", incognito=False)
    elsewhere = backend.create_session(other.id, actor=None, title="elsewhere", incognito=False)
    assert [s.id for s in backend.sessions(project.id)] == [newer.id, older.id]
    backend.touch_session(older.id)
    assert [s.id for s in backend.sessions(project.id)] == [older.id, newer.id]
    assert {s.id for s in backend.sessions()} == {older.id, newer.id, elsewhere.id}


def test_a_missing_session_is_a_usage_error(backend: StoreBackend) -> None:
    with pytest.raises(UsageError, match="no session 0123"):
        backend.session(SessionId("0123"))


def test_the_head_moves_only_from_the_turn_the_caller_saw(
    backend: StoreBackend, session: Session, reopen: Callable[[], StoreBackend]
) -> None:
    first = backend.create_turn(session.id, "one", holder_pid=None, holder_start=None)
    second = backend.create_turn(session.id, "two", holder_pid=None, holder_start=None)
    assert backend.session(session.id).head == second.id
    assert not backend.set_head_if_equals(session.id, first.id, None)  # it is at the second turn, not the first
    assert backend.session(session.id).head == second.id
    assert backend.set_head_if_equals(session.id, second.id, first.id)
    assert reopen().session(session.id).head == first.id  # seen by another connection
    assert backend.set_head_if_equals(session.id, first.id, None)
    assert backend.session(session.id).head is None
    assert not backend.set_head_if_equals(session.id, first.id, TurnId(second.id))


def test_an_id_is_found_from_its_start(backend: StoreBackend, session: Session) -> None:
    assert backend.resolve_id("sessions", session.id[:8], "session") == session.id
    assert backend.resolve_id("sessions", session.id.upper() + " ", "session") == session.id
    with pytest.raises(UsageError, match="is not a session id"):
        backend.resolve_id("sessions", "xyz", "session")
    with pytest.raises(UsageError, match="no turn has an id starting with"):
        backend.resolve_id("turns", session.id, "turn")


def test_an_id_start_shared_by_several_is_refused(backend: StoreBackend, project: Project) -> None:
    ids = {backend.create_session(project.id, actor=None, title=None, incognito=False).id for _ in range(20)}
    shared = next(a[:1] for a in ids if sum(b.startswith(a[:1]) for b in ids) > 1)
    with pytest.raises(UsageError, match=f"{shared} is the start of several session ids"):
        backend.resolve_id("sessions", shared, "session")


def test_a_harness_id_finds_its_session_and_call(backend: StoreBackend, session: Session) -> None:
    turn = backend.create_turn(session.id, None, holder_pid=None, holder_start=None)
    external = backend.external_id("claude-session", "abc-123")
    assert external == backend.external_id("claude-session", "abc-123")
    assert external != backend.external_id("tool-use", "abc-123")
    assert backend.session_by_external_id(external) is None
    backend.set_session_external_id(session.id, external)
    assert backend.session_by_external_id(external) == backend.session(session.id)
    call_id = backend.create_call(turn, "Write", None)
    tool_use = backend.external_id("tool-use", "toolu_1")
    assert backend.call_by_external_id(session.id, tool_use) is None
    backend.set_call_external_id(call_id, tool_use)
    assert backend.call_by_external_id(session.id, tool_use) == call_id


def test_busy_marks_list_until_removed(backend: StoreBackend, session: Session) -> None:
    first = backend.add_busy_mark(session.id, "a job is running", 4242, 99)
    second = backend.add_busy_mark(session.id, "an apply is running", None, None)
    assert backend.busy_marks(session.id) == [
        (first, "a job is running", 4242, 99),
        (second, "an apply is running", None, None),
    ]
    assert backend.busy_marks(session.id)[0].reason == "a job is running"
    backend.remove_busy_mark(first)
    assert [mark.id for mark in backend.busy_marks(session.id)] == [second]

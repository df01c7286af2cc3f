"""Contract: notices to the assistant are taken once; a path it must read again stays until it is read."""

from __future__ import annotations

from turnback.model import Session
from turnback.store.api import StoreBackend


def test_notices_are_taken_once_and_a_repeated_one_once(backend: StoreBackend, session: Session) -> None:
    backend.add_notices(session.id, [("a.txt", "Reverted the change to a.txt"), ("b.txt", "Deleted b.txt")])
    backend.add_notices(session.id, [("a.txt", "Reverted the change to a.txt")])
    taken = backend.take_notices(session.id)
    assert taken == [("a.txt", "Reverted the change to a.txt"), ("b.txt", "Deleted b.txt")]
    assert taken[1].path == "b.txt" and taken[1].text == "Deleted b.txt"
    assert backend.take_notices(session.id) == []
    stored = backend.sealed_notices(session.id)  # delivered ones are kept, for verify
    assert [backend.open_notice(n.id, n.body) for n in stored] == [*taken, taken[0]]


def test_a_noticed_path_must_be_read_until_it_is(backend: StoreBackend, session: Session) -> None:
    other = backend.create_session(session.project_id, actor=None, title=None, incognito=False)
    assert not backend.must_read(session.id, "a.txt")
    backend.add_notices(session.id, [("a.txt", "Reverted the change to a.txt")])
    assert backend.must_read(session.id, "a.txt")
    assert not backend.must_read(other.id, "a.txt")
    backend.mark_read(session.id, "a.txt")
    assert not backend.must_read(session.id, "a.txt")

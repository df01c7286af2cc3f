"""Contract: a transaction is all or nothing, nested ones join it, and its lock is taken before it reads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.store.contract.conftest import Backend
from turnback.model import Session
from turnback.store.api import StoreBackend


class _Stop(Exception):
    pass


def test_a_transaction_that_fails_leaves_nothing(backend: StoreBackend, session: Session) -> None:
    with pytest.raises(_Stop), backend.transaction():
        backend.create_turn(session.id, "one", holder_pid=None, holder_start=None)
        with backend.transaction():  # joins the outer one: undone with it
            backend.add_busy_mark(session.id, "inner", None, None)
        raise _Stop
    assert backend.turns(session.id) == []
    assert backend.busy_marks(session.id) == []
    assert backend.session(session.id).head is None
    assert backend.create_turn(session.id, "again", holder_pid=None, holder_start=None).number == 1


def test_a_second_writer_waits_for_the_first(
    backend: StoreBackend, session: Session, backend_kind: Backend, home: Path
) -> None:
    """The write lock is taken when the transaction begins: another connection's write waits until it ends,
    so a check and the write that depends on it are one step."""
    started, written = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def second_writer() -> None:
        try:
            with backend_kind.open(home) as second:
                started.set()
                second.add_busy_mark(session.id, "second writer", None, None)
                written.set()
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    writer = threading.Thread(target=second_writer)
    with backend.transaction():
        assert backend.busy_marks(session.id) == []  # a check, and below the write that depends on it
        writer.start()
        assert started.wait(30)
        assert not written.wait(0.5)  # held back from the first read on, not only from the first write
        backend.add_busy_mark(session.id, "first writer", None, None)
    writer.join(30)
    assert errors == [] and written.is_set()
    assert [mark.reason for mark in backend.busy_marks(session.id)] == ["first writer", "second writer"]


def test_a_live_view_wakes_when_another_process_commits(
    backend: StoreBackend, session: Session, backend_kind: Backend, home: Path
) -> None:
    def write_elsewhere() -> None:
        with backend_kind.open(home) as other:  # its own connection, as another process has
            other.create_turn(session.id, "elsewhere", holder_pid=None, holder_start=None)

    assert backend.wait_for_change(0.3) is False  # nothing committed meanwhile
    writer = threading.Timer(0.3, write_elsewhere)
    writer.start()
    try:
        started = time.monotonic()
        assert backend.wait_for_change(10) is True
        assert time.monotonic() - started < 5
    finally:
        writer.join()
    assert [turn.message for turn in backend.turns(session.id)] == ["elsewhere"]

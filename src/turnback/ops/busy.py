"""What keeps a session busy, and the lock an undo holds while it applies.

A turn runs from ``turn begin`` to ``turn end``; it is held by a process
(the harness that began it). When that process is gone, the turn no longer
blocks anything: it is marked ``interrupted``. The apply lock is an
``flock`` on a file in the store's ``locks/`` folder, so the kernel frees
it when its holder dies, however it dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from turnback.errors import BusyError
from turnback.fsio import ensure_private_dir
from turnback.model import SessionId, Turn
from turnback.procs import process_alive
from turnback.store import Store


def live_running_turns(store: Store, session_id: SessionId) -> list[Turn]:
    """The session's running turns whose holder lives; a turn whose holder has ended is marked interrupted."""
    live = []
    for turn, holder_start in store.running_turns(session_id):
        if turn.holder_pid is not None and not process_alive(turn.holder_pid, holder_start):
            with store.transaction():
                store.end_turn(turn.id, "interrupted")
        else:
            live.append(turn)
    return live


def refuse_if_busy(store: Store, session_id: SessionId) -> None:
    """Raise :class:`BusyError` naming what runs in the session, if anything does."""
    running = live_running_turns(store, session_id)
    if running:
        turn = running[-1]
        holder = f" (held by process {turn.holder_pid})" if turn.holder_pid else ""
        raise BusyError(
            f"turn {turn.number} is running in this session{holder}; "
            "wait for it to end (turnback turn end) before taking changes back"
        )


@contextlib.contextmanager
def session_apply_lock(store: Store, session_id: SessionId) -> Iterator[None]:
    """Hold the session's apply lock; :class:`BusyError` naming the holder when another process has it."""
    ensure_private_dir(store.locks_dir)
    path = os.path.join(store.locks_dir, f"{session_id}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            named = f" (process {holder})" if holder else ""
            raise BusyError(f"an undo is being applied in this session{named}; wait for it to finish") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


__all__ = ["live_running_turns", "refuse_if_busy", "session_apply_lock"]

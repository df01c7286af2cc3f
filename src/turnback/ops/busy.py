"""What keeps a session busy, and the lock an undo holds while it applies.

A turn runs from ``turn begin`` to ``turn end``; it is held by a process
(the harness that began it). When that process is gone, the turn no longer
blocks anything: it is marked ``interrupted``. In a store shared by hosts,
only the project's own host sees its processes; another host takes them to
run while that host renews its lease, and to have ended once it ran out.
The apply lock is an ``flock`` on a file in the store's ``locks/`` folder,
so the kernel frees it when its holder dies, however it dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from typing import NamedTuple

from turnback.catalog import Message
from turnback.errors import BusyError, RecordDamagedError
from turnback.fsio import ensure_private_dir
from turnback.model import Call, ProjectId, SessionId, Turn, short_id
from turnback.procs import parent_and_name, process_alive
from turnback.store.api import StoreBackend


class _Holders(NamedTuple):
    """Who can tell whether a project's processes (the holders of its turns, busy marks and commands) run."""

    here: bool  # they are this host's: their process ids say
    gone: bool  # they are another host's, whose lease ran out: that host died, and they with it

    def ended(self, pid: int | None, pid_start: int | None) -> bool:
        """Whether the holder *pid* (started at *pid_start*) ended. Another host's live processes are not seen
        from here: taken to run."""
        if self.gone:
            return True
        return self.here and pid is not None and not process_alive(pid, pid_start)


def _holders(store: StoreBackend, project_id: ProjectId) -> _Holders:
    """In a store shared by hosts, a turn or command of a project on another host is held by a process there,
    which this host cannot see: it is taken to run while that host renews its lease, and to have ended once the
    lease ran out."""
    project = store.project(project_id)
    return _Holders(here=project.other_host is None, gone=project.other_host_gone)


def holder_ended(store: StoreBackend, project_id: ProjectId, pid: int | None, pid_start: int | None) -> bool:
    """Whether the process *pid* (started at *pid_start*), holding something of the project, ended (see
    ``_holders``). With no project to tell its host by (gone, or its row damaged), its process id is taken as
    this host's: a live one still holds, so nothing it holds is lost, and an ended one's hold goes."""
    try:
        holders = _holders(store, project_id)
    except RecordDamagedError:
        return pid is not None and not process_alive(pid, pid_start)
    return holders.ended(pid, pid_start)


def _session_holders(store: StoreBackend, session_id: SessionId) -> _Holders:
    return _holders(store, store.session(session_id).project_id)


def live_running_turns(store: StoreBackend, session_id: SessionId) -> list[Turn]:
    """The session's running turns whose holder lives (one whose holder ended runs no more)."""
    holders = _session_holders(store, session_id)
    return [
        turn
        for turn, holder_start in store.running_turns(session_id)
        if not holders.ended(turn.holder_pid, holder_start)
    ]


def settle_running_turns(store: StoreBackend, session_id: SessionId) -> tuple[list[Turn], list[Turn]]:
    """Mark the session's running turns whose holder has ended as interrupted; the turns marked, and the
    running turns whose holder lives (one look at the turns for both). In a store shared by hosts, the turns of
    a project on another host are held by processes there: taken to run, never ended from here, until that
    host's lease ran out."""
    holders = _session_holders(store, session_id)
    running = [
        (turn, holders.ended(turn.holder_pid, holder_start)) for turn, holder_start in store.running_turns(session_id)
    ]
    ended = [turn for turn, gone in running if gone]
    for turn in ended:
        with store.transaction():
            store.end_turn(turn.id, "interrupted")
    return ended, [turn for turn, gone in running if not gone]


def mark_interrupted_turns(store: StoreBackend, session_id: SessionId) -> list[Turn]:
    """Mark the session's running turns whose holder has ended as interrupted; the turns marked."""
    return settle_running_turns(store, session_id)[0]


HARNESS_GRACE_S = 1.0  # a command that just ended: its harness's Post event is on its way


def harness_command(call: Call) -> str:
    """The command text a harness gave :meth:`~turnback.engine.Engine.begin_command` (``sh -c TEXT``)."""
    try:
        argv = json.loads(call.input or "{}").get("command") or []
    except ValueError:
        argv = []
    return str(argv[-1]) if argv else ""


def _command_words(call: Call) -> list[bytes]:
    text = harness_command(call)
    # The harness's shell holds the command quoted ('\'' for each '): look for its longest unquoted piece.
    pieces = sorted((p.strip() for p in text.split("'")), key=len, reverse=True)
    return [pieces[0].encode()] if pieces and pieces[0] else []


def _descendants_cmdlines(pid: int) -> list[bytes]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            found = parent_and_name(int(entry))
            if found is not None:
                parents[int(entry)] = found[0]
    below = {pid}
    grew = True
    while grew:
        grew = False
        for child, parent in parents.items():
            if parent in below and child not in below:
                below.add(child)
                grew = True
    lines = []
    for child in below - {pid}:
        try:
            with open(f"/proc/{child}/cmdline", "rb") as handle:
                lines.append(handle.read())
        except OSError:
            continue
    return lines


def harness_runs(store: StoreBackend, calls: list[Call], holder_pid: int) -> bool:
    """Whether a process below the harness *holder_pid* still runs one of *calls* (commands the harness runs
    itself), or one of them was finished meanwhile. Where the OS does not tell, they are taken to run."""
    if not os.path.isdir("/proc/self"):
        return True
    for attempt in range(2):
        if attempt:
            time.sleep(HARNESS_GRACE_S)
            if any(store.call(call.id).status != "running" for call in calls):
                return True  # its Post event came: the harness is alive and well
        cmdlines = _descendants_cmdlines(holder_pid)
        for call in calls:
            words = _command_words(call)
            if not words or any(all(word in line for word in words) for line in cmdlines):
                return True
    return False


def _command_text(call: Call) -> str:
    try:
        argv = json.loads(call.input or "{}").get("command") or []
    except ValueError:
        argv = []
    text = " ".join(str(word) for word in argv)
    return text if len(text) <= 60 else text[:59] + "…"


def _command_states(store: StoreBackend, project_id: ProjectId) -> tuple[list[Call], list[Call]]:
    live, orphaned = [], []
    holders = _holders(store, project_id)
    if holders.gone:
        return [], []  # they ended with their host; only that host can record what they changed
    if not holders.here:
        return [command.call for command in store.running_commands(project_id)], []
    for call, pid_start, watcher, watcher_start in store.running_commands(project_id):
        command_alive = call.pid is not None and process_alive(call.pid, pid_start)
        watcher_alive = watcher is not None and process_alive(watcher, watcher_start)
        if command_alive or watcher_alive:
            live.append(call)
        elif watcher is not None:
            orphaned.append(call)
    return live, orphaned


def live_commands(store: StoreBackend, project_id: ProjectId) -> list[Call]:
    """The project's commands and jobs whose process (or the watcher that records them) still runs."""
    return _command_states(store, project_id)[0]


def orphaned_commands(store: StoreBackend, project_id: ProjectId) -> list[Call]:
    """Commands whose process and watcher both ended before the end was recorded (turnback was killed):
    the caller records them now, from the snapshot taken before they ran."""
    return _command_states(store, project_id)[1]


def refuse_if_busy(store: StoreBackend, session_id: SessionId) -> None:
    """Raise :class:`BusyError` naming what runs in the session, if anything does.

    That is: a turn of the session; a busy mark a harness set (compaction,
    an approval waiting); a command (one past its timeout) or a background
    job of the session, or of another session of the same project (it can
    write the same files).
    """
    running = live_running_turns(store, session_id)
    if running:
        turn = running[-1]
        if turn.holder_pid:
            raise BusyError(Message("busy_turn_held", number=turn.number, pid=turn.holder_pid))
        raise BusyError(Message("busy_turn", number=turn.number))
    holders = _session_holders(store, session_id)
    for _, reason, pid, pid_start in store.busy_marks(session_id):
        if holders.ended(pid, pid_start):
            continue  # its holder ended without ending it (see remove_dead_busy_marks)
        if pid:
            raise BusyError(Message("busy_mark_held", reason=Message.loads(reason), pid=pid))
        raise BusyError(Message("busy_mark", reason=Message.loads(reason)))
    session = store.session(session_id)
    for call in live_commands(store, session.project_id):
        own = call.session_id == session_id
        ident = short_id(call.id)
        command = _command_text(call)
        if call.kind == "job":
            code = "busy_job" if own else "busy_job_other_session"
            raise BusyError(Message(code, job=ident, command=command))
        code = "busy_command" if own else "busy_command_other_session"
        raise BusyError(Message(code, call=ident, command=command))


def remove_dead_busy_marks(store: StoreBackend, session_id: SessionId) -> None:
    """Remove the session's busy marks whose holder ended without ending them."""
    holders = _session_holders(store, session_id)
    for mark_id, _, pid, pid_start in store.busy_marks(session_id):
        if holders.ended(pid, pid_start):
            with store.transaction():
                store.remove_busy_mark(mark_id)


@contextlib.contextmanager
def session_apply_lock(store: StoreBackend, session_id: SessionId, *, wait_s: float = 0.0) -> Iterator[None]:
    """Hold the session's apply lock, waiting up to *wait_s* for it; then :class:`BusyError` naming the holder."""
    ensure_private_dir(store.locks_dir)
    path = os.path.join(store.locks_dir, f"{session_id}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                if holder:
                    raise BusyError(Message("busy_applying_held", pid=holder)) from None
                raise BusyError(Message("busy_applying")) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        try:
            with store.session_lock(session_id):  # a store shared by hosts: no other host applies meanwhile
                yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


__all__ = [
    "harness_command",
    "harness_runs",
    "holder_ended",
    "live_commands",
    "live_running_turns",
    "mark_interrupted_turns",
    "orphaned_commands",
    "refuse_if_busy",
    "remove_dead_busy_marks",
    "session_apply_lock",
    "settle_running_turns",
]

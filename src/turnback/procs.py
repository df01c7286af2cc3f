"""Whether a process that holds a turn or a lock is still alive.

A pid alone can be reused; on Linux the start time from ``/proc/PID/stat``
tells a new process from the one that was recorded.
"""

from __future__ import annotations

import os


def _stat_fields(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses; the fields after it follow the last ')'.
    return data[data.rfind(b")") + 2 :].split()


def parent_and_name(pid: int) -> tuple[int, str] | None:
    """The parent pid and the command name of process *pid*, where the OS tells them."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    name = data[data.find(b"(") + 1 : data.rfind(b")")].decode("utf-8", "replace")
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[1]), name
    except (IndexError, ValueError):
        return None


_own_start: dict[int, int | None] = {}  # this process's start time, by pid (a forked child has its own)


def process_start(pid: int) -> int | None:
    """The start time of process *pid* in clock ticks since boot, where the OS tells it."""
    if pid == os.getpid():  # asked at every tool call of an MCP server: read it once
        if pid not in _own_start:
            _own_start[pid] = _read_start(pid)
        return _own_start[pid]
    return _read_start(pid)


def _read_start(pid: int) -> int | None:
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def process_alive(pid: int, start: int | None) -> bool:
    """Whether *pid* runs and, when *start* is known, is the same process that was recorded."""
    if pid <= 0:
        return False
    if pid == os.getpid():  # this process, unless the start recorded is another's that had its pid
        return start is None or start == process_start(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    fields = _stat_fields(pid)
    if fields is None:
        return True  # no /proc here: the pid is all there is to go by
    if fields[:1] == [b"Z"]:
        return False  # a zombie has ended; only its parent has not collected it yet
    if start is None:
        return True
    try:
        return int(fields[19]) == start
    except (IndexError, ValueError):
        return True


def hide_own_environment() -> None:
    """Keep other processes of this user (an agent's command among them) from reading this process's memory
    and ``/proc/PID/environ``, where the store's key may be: Linux's ``PR_SET_DUMPABLE`` 0.

    An agent's command runs as the same user, so without this it could read the key from its parent
    (``turnback exec``, a job's runner, the MCP server). It is per process and kept until it ends; the
    commands it starts are dumpable again (exec resets it). Elsewhere, or if the call fails, nothing changes.
    """
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, SUID_DUMP_DISABLE
    except (OSError, AttributeError):
        pass


__all__ = ["hide_own_environment", "parent_and_name", "process_alive", "process_start"]

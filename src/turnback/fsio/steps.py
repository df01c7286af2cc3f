"""Fault injection for the reliability tests (read once, at import), and the count of durable steps it acts on.

- ``TURNBACK_FAULT_KILL_AFTER=N``: SIGKILL right after the N-th durable step
  (a rename, an unlink, a folder made or removed);
- ``TURNBACK_FAULT_KILL_AFTER_COMMIT=N``: SIGKILL right after the N-th
  committed store transaction (a snapshot's batches, a call's record);
- ``TURNBACK_FAULT=enospc@N``: the N-th write of file content fails with
  ENOSPC; ``eio@N``: the N-th fsync fails with EIO.

That is how the tests prove an interrupted or failing undo resumes and
loses nothing.
"""

from __future__ import annotations

import errno
import os
import signal


def _fault_kill_after(name: str = "TURNBACK_FAULT_KILL_AFTER") -> int | None:
    value = os.environ.get(name)
    return int(value) if value and value.isdigit() else None


def _fault_errors() -> dict[str, int]:
    """``TURNBACK_FAULT=enospc@3,eio@1``: which write or fsync (counting from 1) fails, by kind."""
    faults: dict[str, int] = {}
    for item in os.environ.get("TURNBACK_FAULT", "").split(","):
        kind, _, number = item.strip().partition("@")
        if kind in ("enospc", "eio") and number.isdigit():
            faults[kind] = int(number)
    return faults


class _Steps:
    """Counts durable file-system steps, writes and fsyncs; the fault hooks act on the N-th."""

    def __init__(self) -> None:
        self.count = 0
        self.kill_after = _fault_kill_after()
        self.kill_after_commit = _fault_kill_after("TURNBACK_FAULT_KILL_AFTER_COMMIT")
        self.commits = 0
        self.faults = _fault_errors()
        self.writes = 0
        self.fsyncs = 0

    def done(self) -> None:
        self.count += 1
        if self.kill_after is not None and self.count >= self.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    def committed(self) -> None:
        """A store transaction was committed (counted for ``TURNBACK_FAULT_KILL_AFTER_COMMIT``)."""
        self.commits += 1
        if self.kill_after_commit is not None and self.commits >= self.kill_after_commit:
            os.kill(os.getpid(), signal.SIGKILL)

    def write(self, fd: int, data: memoryview) -> int:
        self.writes += 1
        if self.faults.get("enospc") == self.writes:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        self.count_fsync()
        os.fsync(fd)

    def count_fsync(self) -> None:
        """Count one fsync (made now, or by a batch's sync); raises the injected EIO on the N-th."""
        self.fsyncs += 1
        if self.faults.get("eio") == self.fsyncs:
            raise OSError(errno.EIO, os.strerror(errno.EIO))


STEPS = _Steps()

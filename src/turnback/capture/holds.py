"""A hold on the blobs a scan stores before a record names them, so a gc meanwhile spares them.

A scan stores the content it reads in transactions of its own, as it goes;
the record that names that content (the new stat cache, a command's
snapshot, a call's changes) is committed only when the scan is done. A gc
run in between by another process (the end of another session's turn, a
session deleted, ``turnback gc``) would find those blobs named by nothing
and delete them: the cache would then name copies that are gone, and what a
command deleted could not be brought back. So a scan first records a hold,
in the transaction of its first blob: gc spares every blob stored since the
hold's time while its process runs, and a blob the scan meets already stored
is marked stored again (``blobs._INSERT_BLOB``). The hold is removed in the
transaction that commits the record, or when the scan fails; a process that
ends without removing it holds nothing (gc removes it). Planning an undo
holds the same way what it stores (a file changed since) until the plan is
saved.
"""

from __future__ import annotations

import os
import time

from turnback.model import ProjectId
from turnback.procs import process_start
from turnback.store.api import StoreBackend

# A hold spares what was stored a little before it too: the clock may be set back (by NTP) while a scan runs.
CLOCK_STEP_NS = 60 * 10**9


class BlobHold:
    """One scan's hold on *store*, for *project_id*: taken at most once (by its first blob, or at once by a
    caller that cannot tell when that comes, as planning); used once."""

    def __init__(self, store: StoreBackend, project_id: ProjectId):
        self._store = store
        self._project_id = project_id
        self._id: str | None = None

    def take(self) -> None:
        """Hold from now on, unless already held: called before the first blob is stored, in its transaction."""
        if self._id is None:
            pid = os.getpid()
            since = time.time_ns() - CLOCK_STEP_NS
            self._id = self._store.add_blob_hold(self._project_id, pid, process_start(pid), since)

    def release(self) -> None:
        """Hold no more: in the transaction that commits what names the blobs, or after the scan failed. Its id
        is kept: released again after that transaction was rolled back, it is removed then."""
        if self._id is not None:
            self._store.remove_blob_hold(self._id)


__all__ = ["BlobHold"]

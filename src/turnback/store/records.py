"""The named values the store hands back beyond the model's own records (every backend returns these).

Each is a ``NamedTuple``, so a caller may read it by field name or unpack it
as before; no store method returns a bare tuple.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from turnback.model import BlobId, Call, CallId, OpId, Project, ProjectId, SessionId, Turn, TurnId

IdTable = Literal["sessions", "turns", "calls", "ops"]  # the records a user names by an id, or its start


class SessionActivity(NamedTuple):
    """A session's newest turn, call and operation, and a marker that changes whenever any of its records does."""

    session_id: SessionId
    turn_id: TurnId | None
    call_id: CallId | None
    op_id: OpId | None
    marker: str


class RegisteredProject(NamedTuple):
    project: Project
    new: bool  # registered by this call


class RunningTurn(NamedTuple):
    turn: Turn
    holder_start: int | None  # the start time of the process holding the turn


class CallProcesses(NamedTuple):
    """A command call's process and the process that records its end, each with its start time."""

    pid: int | None
    pid_start: int | None
    watcher_pid: int | None
    watcher_start: int | None


class RunningCommand(NamedTuple):
    call: Call
    pid_start: int | None
    watcher_pid: int | None
    watcher_start: int | None


class CallSnapshots(NamedTuple):
    snapshot_id: str | None  # what the command's outside paths held before it ran
    baseline_id: str | None  # the stat cache it started from


# A change's path as the store names it: (path, outside), a project path or (outside) an absolute one.
PathKey = tuple[str, bool]


class OverlappingCall(NamedTuple):
    call_id: CallId
    kind: str
    running: bool


class OperationSummary(NamedTuple):
    id: OpId
    kind: str
    status: str
    reverses: str | None
    taken_back_by: str | None


class BusyMark(NamedTuple):
    id: str
    reason: str
    pid: int | None
    pid_start: int | None


class Notice(NamedTuple):
    path: str
    text: str


class SealedNotice(NamedTuple):
    """A notice's row as stored, for :meth:`open_notice` (``verify`` opens each on its own)."""

    id: int
    body: bytes


class CachedSnapshot(NamedTuple):
    id: str
    data: bytes | None  # None when not asked for
    watch_token: str | None  # the watcher's token the scan was taken at, if a watcher answered
    content_bytes: int | None  # what its copies hold (None: not counted when it was saved)


class SnapshotRecord(NamedTuple):
    id: str
    purpose: str  # "cache" or "call"
    project_id: ProjectId


class StoredContent(NamedTuple):
    blob: BlobId
    size: int


class StoredBlob(NamedTuple):
    id: bytes
    stored: int  # bytes it takes in the store (sealed and compressed)
    created_at: int  # when it was last stored (a store of content already there counts), this host's clock


class BlobHold(NamedTuple):
    """A process storing blobs no record names yet: gc spares every blob stored since *since* while it runs."""

    id: str
    project_id: ProjectId
    pid: int
    pid_start: int | None
    since: int  # the holder's clock (``time.time_ns``), the one its blobs' ``created_at`` is read from


class FreeSpace(NamedTuple):
    """Room inside the database file that deleted records left (what a compaction would give back)."""

    free_bytes: int
    total_bytes: int


class EvictableCall(NamedTuple):
    started_at: int
    id: CallId
    turn_id: TurnId


class EvictableOperation(NamedTuple):
    created_at: int
    id: OpId


class ChangeCopies(NamedTuple):
    """The copies one change not evicted needs, with the call and session it belongs to."""

    call_id: CallId
    session_id: SessionId
    before_blob: bytes | None
    after_blob: bytes | None


class SchemaObject(NamedTuple):
    kind: str  # "table", "index", ...
    name: str


class DanglingReference(NamedTuple):
    table: str  # a row of this table
    parent: str  # names a row of this table that is not there


class SealedBlob(NamedTuple):
    """One blob row ready to insert: compressed and sealed, no database needed to make it (a process that
    reads and seals files for another one, the writer, sends these)."""

    id: bytes
    kind: int
    size: int  # the content's size (a chunk list's is the whole content's, not its own)
    sealed: bytes


class PackedBlob(NamedTuple):
    """One blob row whose sealed bytes a worker wrote into a pack file (and synced) instead of sending them."""

    id: bytes
    kind: int
    size: int  # the content's size (a chunk list's is the whole content's)
    stored: int  # the sealed bytes' length in the pack
    pack: str  # the pack's file name
    at: int  # where they start in it


__all__ = [
    "BlobHold",
    "BusyMark",
    "CachedSnapshot",
    "CallProcesses",
    "CallSnapshots",
    "ChangeCopies",
    "DanglingReference",
    "EvictableCall",
    "EvictableOperation",
    "FreeSpace",
    "IdTable",
    "Notice",
    "OperationSummary",
    "OverlappingCall",
    "PackedBlob",
    "PathKey",
    "RegisteredProject",
    "RunningCommand",
    "RunningTurn",
    "SchemaObject",
    "SealedBlob",
    "SealedNotice",
    "SessionActivity",
    "SnapshotRecord",
    "StoredBlob",
    "StoredContent",
]

"""What the engine asks of a store: the interface every backend implements.

:class:`StoreBackend` is everything the engine, ``ops/`` and ``capture/`` call;
it is made of one protocol per kind of record, so a reader can see what each
concern needs. ``turnback.store.store.Store`` (SQLite, ``store/sqlite/``) and
``turnback.store.postgres.store.PgStore`` (PostgreSQL, shared by many hosts)
are the backends (``store/backends.py`` opens one); ``tests/store/contract/``
is the suite every backend must pass.

What a backend must keep, whatever it is built on:

- **Sealing is the caller's side**: every path, message, title, input, link
  target and plan row is sealed with :class:`~turnback.store.crypto.Crypto`
  before it reaches the database, with associated data naming the table,
  column and row; paths are found by keyed ids (``path_id``). A backend never
  holds a plain value the user or agent wrote or read.
- **Transactions**: ``transaction()`` takes the write lock before the first
  read, so a check and the write that depends on it are one atomic step
  across processes; nested calls join the outer one. ``durable=False`` may
  lose the commit on power failure, never make it partial.
- **Compare-and-swap**: ``set_head_if_equals``, ``set_op_status(expect=)``
  and ``reopen_turn`` change nothing and answer False when the record is not
  in the state the caller saw.
- **Order**: "oldest first" is the order records were written in (calls by
  their insertion, not their clock), as listed by each method.
- Missing records: a session, turn, call or operation the caller names but
  the store lacks is a :class:`~turnback.errors.UsageError`; a record that
  does not open or holds a value its column never holds is a
  :class:`~turnback.errors.RecordDamagedError` naming it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence, Set
from typing import Protocol, Self

from turnback.catalog import Message
from turnback.model import (
    BlobId,
    Call,
    CallId,
    CallKind,
    CallStatus,
    Change,
    FileState,
    OpId,
    OpStatus,
    Plan,
    Project,
    ProjectId,
    RefChange,
    RowStatus,
    Session,
    SessionId,
    Turn,
    TurnId,
    TurnStatus,
    UndoState,
)
from turnback.paths import RelPath
from turnback.store.crypto import Crypto
from turnback.store.records import (
    BlobHold,
    BusyMark,
    CachedSnapshot,
    CallProcesses,
    CallSnapshots,
    ChangeCopies,
    DanglingReference,
    EvictableCall,
    EvictableOperation,
    FreeSpace,
    IdTable,
    Notice,
    OperationSummary,
    OverlappingCall,
    PackedBlob,
    PathKey,
    RegisteredProject,
    RunningCommand,
    RunningTurn,
    SchemaObject,
    SealedBlob,
    SealedNotice,
    SessionActivity,
    SnapshotRecord,
    StoredBlob,
    StoredContent,
)


class BlobBackend(Protocol):
    """Content, stored once under its keyed hash, compressed and sealed; large content in checked chunks."""

    packs: str | None  # the folder of the store's pack files (``None``: the store keeps every blob in its rows)

    def put_bytes(self, data: bytes) -> BlobId:
        """Store *data* (once) and return its content id."""

    def put_chunks(self, chunks: Iterable[bytes]) -> StoredContent:
        """Store content given as pieces of any size (inside a transaction, so its chunks land with it)."""

    def seal_chunks(self, chunks: Iterable[bytes], out: Callable[[SealedBlob], None]) -> StoredContent:
        """What ``put_chunks`` stores, as sealed rows handed to *out*; no database asked (a forked process may)."""

    def put_sealed(self, rows: Sequence[SealedBlob]) -> None:
        """Store rows ``seal_chunks`` made (inside a transaction); a blob already stored stays as it is."""

    def put_packed(self, rows: Sequence[PackedBlob]) -> None:
        """Store the rows of blobs written into a synced pack (inside a transaction); one stored stays as it is."""

    def sealed(self, blob_id: bytes) -> bytes:
        """A blob's sealed bytes as stored, out of its row or its pack."""

    def has(self, blob_id: BlobId) -> bool: ...

    def present(self, blob_ids: Iterable[bytes]) -> set[bytes]:
        """Which of *blob_ids* are stored (a query per few hundred ids, not one each)."""

    def iter_content(self, blob_id: BlobId) -> Iterator[bytes]:
        """The content in pieces, each checked; the whole is checked before the last piece is given."""

    def read_bytes(self, blob_id: BlobId) -> bytes: ...

    def verify(self, blob_id: BlobId) -> bool:
        """Whether the content opens and matches its id."""

    def has_dictionary(self) -> bool: ...

    def train_dictionary(self, samples: list[bytes]) -> bool:
        """Give the store its compression dictionary (once); False when it has one or the samples are too few."""

    def stored(self) -> list[StoredBlob]: ...

    def ids(self) -> set[bytes]: ...

    def chunk_list_ids(self) -> list[bytes]: ...

    def chunks_listed(self, blob_ids: Iterable[bytes]) -> set[bytes]:
        """The chunks that the chunk lists among *blob_ids* name."""

    def delete(self, blob_id: bytes) -> None: ...

    def reclaim_packs(self, transaction: Callable[[], contextlib.AbstractContextManager[None]]) -> int:
        """Give back what idle packs hold that no row needs (folding a mostly unneeded one into its rows)."""


class ProjectStore(Protocol):
    """Projects: a root folder registered once, found by its keyed id."""

    def register_project(self, root: str) -> RegisteredProject:
        """The project at *root* (a real path), registering it if new; and whether it was new."""

    def project_by_root(self, root: str) -> Project | None: ...

    def project(self, project_id: ProjectId) -> Project: ...

    def project_containing(self, path: str) -> Project | None:
        """The registered project whose root is *path* or a folder above it."""

    def projects(self) -> list[Project]: ...


class SessionStore(Protocol):
    """Sessions, their head (moved by compare-and-swap), ids given in part, and a harness's own ids."""

    def create_session(
        self, project_id: ProjectId, *, actor: str | None, title: str | None, incognito: bool
    ) -> Session: ...

    def session(self, session_id: SessionId) -> Session: ...

    def sessions(self, project_id: ProjectId | None = None) -> list[Session]: ...

    def touch_session(self, session_id: SessionId) -> None: ...

    def set_head_if_equals(self, session_id: SessionId, old: TurnId | None, new: TurnId | None) -> bool:
        """Move the session's head from *old* to *new*; False (and nothing changed) when it is not at *old*."""

    def resolve_id(self, table: IdTable, prefix: str, noun: str) -> str:
        """The one id in *table* that starts with *prefix*; a clear error for none or several."""

    def external_id(self, kind: str, value: str) -> bytes:
        """A harness's own id (a Claude Code session id, a tool use id) as a keyed id: findable, never stored plain."""

    def session_by_external_id(self, external: bytes) -> Session | None: ...

    def set_session_external_id(self, session_id: SessionId, external: bytes) -> None: ...

    def call_by_external_id(self, session_id: SessionId, external: bytes) -> CallId | None: ...

    def set_call_external_id(self, call_id: CallId, external: bytes) -> None: ...


class BusyMarkStore(Protocol):
    """Busy marks: a session's work in progress that an undo must wait for."""

    def add_busy_mark(self, session_id: SessionId, reason: str, pid: int | None, pid_start: int | None) -> str: ...

    def busy_marks(self, session_id: SessionId) -> list[BusyMark]:
        """The session's busy marks: id, reason, holder pid and its start time."""

    def remove_busy_mark(self, mark_id: str) -> None: ...


class TurnStore(Protocol):
    """Turns and the git refs each moved."""

    def create_turn(
        self,
        session_id: SessionId,
        message: str | None,
        *,
        holder_pid: int | None,
        holder_start: int | None,
        refs: dict[str, str] | None = None,
    ) -> Turn:
        """A new running turn, child of the session's head; *refs* are the git refs at its start."""

    def turn(self, turn_id: TurnId, *, with_calls: bool = False) -> Turn: ...

    def turns(self, session_id: SessionId, *, with_calls: bool = False) -> list[Turn]: ...

    def turn_by_number(self, session_id: SessionId, number: int) -> Turn: ...

    def last_turn(self, session_id: SessionId) -> Turn | None:
        """The session's turn with the highest number, if it has any."""

    def turns_with_changes(self, session_id: SessionId) -> set[str]:
        """Ids of the session's turns that recorded at least one change of a file or a git ref."""

    def running_turns(self, session_id: SessionId) -> list[RunningTurn]:
        """Turns begun and not ended, with the start time of the process holding each."""

    def end_turn(self, turn_id: TurnId, status: TurnStatus) -> None: ...

    def reopen_turn(self, turn_id: TurnId, *, holder_pid: int | None, holder_start: int | None) -> bool:
        """Make an ended turn run again (an MCP server's turn runs only while a tool call does)."""

    def set_turn_undone(self, turn_id: TurnId, undone: UndoState) -> None: ...

    def refresh_turn_undone(self, turn_id: TurnId) -> UndoState:
        """Set a turn's undo state from its changes: all taken back, some, or none."""

    def drop_calls_of_turns(self, turn_ids: Sequence[TurnId]) -> None:
        """Edit and resend: delete the calls of *turn_ids* with their changes (their copies go at the next gc)."""

    def refs_at_turn_start(self, turn_id: TurnId) -> dict[str, str] | None: ...

    def add_ref_changes(self, turn_id: TurnId, moves: Sequence[tuple[str, str | None, str | None]]) -> None:
        """Record the refs a turn moved: (name, value before, value after)."""

    def ref_changes(self, turn_id: TurnId) -> tuple[RefChange, ...]: ...

    def mark_ref_changes_reverted(self, ids: Iterable[int], *, reverted: bool = True) -> None: ...


class CallStore(Protocol):
    """Calls, their changes, their processes, and the other calls on a path."""

    def create_call(
        self,
        turn: Turn,
        tool: str,
        raw_input: str | None,
        *,
        kind: CallKind = "tool",
        snapshot_id: str | None = None,
        baseline_id: str | None = None,
        unasked: bool = False,
    ) -> CallId: ...

    def finish_call(
        self,
        call_id: CallId,
        status: CallStatus,
        error: Message | None = None,
        *,
        exit_code: int | None = None,
        late: bool = False,
    ) -> None: ...

    def call(self, call_id: CallId) -> Call: ...

    def calls_of_turn(self, turn_id: TurnId) -> tuple[Call, ...]: ...

    def set_call_processes(
        self,
        call_id: CallId,
        *,
        pid: int | None = None,
        pid_start: int | None = None,
        watcher_pid: int | None = None,
        watcher_start: int | None = None,
    ) -> None:
        """Name the command's process and the process that will record its end."""

    def call_processes(self, call_id: CallId) -> CallProcesses:
        """A command call's pid and its start time, and its watcher's pid and start time."""

    def running_commands(self, project_id: ProjectId) -> list[RunningCommand]:
        """Commands and jobs of the project not recorded as ended: each with its pid's start time and its watcher."""

    def command_calls(self, *, session_id: SessionId | None, project_id: ProjectId | None) -> list[Call]:
        """Jobs and commands past their timeout (those with a watcher of their own), oldest first."""

    def call_snapshot_ids(self, call_id: CallId) -> CallSnapshots:
        """A command's own snapshot and the stat cache it started from."""

    def add_change(
        self,
        call_id: CallId,
        seq: int,
        project_id: ProjectId,
        path: RelPath,
        before: FileState,
        after: FileState | None,
        *,
        partial: bool = False,
        outside: bool = False,
        not_covered: Message | None = None,
    ) -> int: ...

    def set_change_after(self, change_id: int, after: FileState, *, partial: bool) -> None: ...

    def delete_change(self, change_id: int) -> None: ...

    def changes_of_call(self, call_id: CallId) -> tuple[Change, ...]: ...

    def mark_changes_reverted(self, change_ids: Iterable[int], *, reverted: bool = True) -> None: ...

    def later_calls_on_path(
        self, project_id: ProjectId, path: RelPath, call_id: CallId, *, outside: bool = False
    ) -> list[CallId]:
        """Calls after *call_id* (in any session of the project) that changed *path*, oldest first."""

    def pending_later_call(
        self, project_id: ProjectId, path: RelPath, call_id: CallId, excluding: set[str], *, outside: bool = False
    ) -> CallId | None:
        """The newest call after *call_id* (any session of the project, not in *excluding*) whose change
        of *path* is not taken back: while it stands, an undo of *call_id*'s change must not act."""

    def overlapping_calls_on_path(
        self, project_id: ProjectId, path: RelPath, call_id: CallId, *, outside: bool = False
    ) -> list[OverlappingCall]:
        """Other calls (any session of the project) that changed *path* and were running when *call_id* ended,
        or were file tools' calls running while it ran (or still run as a command or job, their changes not known
        yet): (id, kind, running), oldest first.

        A command's change is what differs between its scans; a call running meanwhile may have made it: a
        call whose own end scan, later, saw it too, or a file tool's call, which names what it wrote."""

    def pending_later_calls(
        self, project_id: ProjectId, call_id: CallId, paths: Iterable[PathKey], excluding: Set[str]
    ) -> dict[PathKey, CallId]:
        """:meth:`pending_later_call` of each of *paths* (path, outside) at once (a plan asks it once per call,
        not once per change); a path with no such call is not in the answer."""

    def overlapping_calls_on_paths(
        self, project_id: ProjectId, call_id: CallId, paths: Iterable[PathKey]
    ) -> dict[PathKey, list[OverlappingCall]]:
        """:meth:`overlapping_calls_on_path` of each of *paths* (path, outside) at once (a plan asks it once per
        command, not once per change)."""


class OperationStore(Protocol):
    """Operations: plans saved and loaded whole, their status moved by compare-and-swap."""

    def save_plan(self, plan: Plan) -> None: ...

    def load_plan(self, op_id: OpId) -> Plan: ...

    def set_op_status(self, op_id: OpId, status: OpStatus, *, expect: OpStatus | None = None) -> bool:
        """Move an operation to *status*; with *expect*, only from that status (compare-and-swap)."""

    def set_row_status(self, op_id: OpId, seq: int, status: RowStatus, note: Message | None) -> None: ...

    def set_row_statuses(self, op_id: OpId, rows: Sequence[tuple[int, RowStatus, Message | None]]) -> None:
        """:meth:`set_row_status` of each (seq, status, note) of *rows*, in one statement run for all."""

    def ops_of_session(self, session_id: SessionId) -> list[OperationSummary]:
        """The session's applied (or applying) operations, oldest first: id, kind, status, reverses, taken back by."""

    def ops_in_status(self, session_id: SessionId, status: OpStatus) -> list[OpId]: ...

    def newest_op_to_take_back(self, session_id: SessionId) -> OpId | None:
        """The newest applied operation of the session that changed something and is not taken back yet."""

    def set_taken_back(self, op_id: OpId, by: OpId) -> None: ...

    def op_evicted(self, op_id: OpId) -> bool:
        """Whether the store cap dropped the copies of operation *op_id*."""


class SnapshotStore(Protocol):
    """Tree snapshots (opaque to the store) and content put in the store."""

    def save_snapshot(
        self,
        project_id: ProjectId,
        data: bytes,
        entries: int,
        *,
        purpose: str = "cache",
        watch_token: str | None = None,
        content_bytes: int | None = None,
        base_id: str | None = None,
    ) -> str:
        """Keep a tree snapshot (opaque, compressed by the caller); *content_bytes*: what its copies hold.

        ``cache``: the project's stat cache; older caches are dropped once no
        running command started from them and no kept cache is built on them
        (*base_id*: the full cache a cache of only the changed entries needs).
        ``call``: what a command's outside paths held before it ran; dropped
        once the command has ended."""

    def snapshot(self, snapshot_id: str) -> bytes | None: ...

    def latest_snapshot(self, project_id: ProjectId, *, data: bool = True) -> CachedSnapshot | None:
        """The project's stat cache, if it has one (without *data*: all but its data, which stays unread: a
        process that holds it decoded reads only its id)."""

    def cache_content_bytes(self, project_id: ProjectId) -> int | None:
        """What the project's stat cache's copies hold, without reading it (None: not known)."""

    def put_content(self, chunks: Iterable[bytes]) -> StoredContent: ...


class NoticeStore(Protocol):
    """Notices to the assistant, each taken once, and the paths it must read again."""

    def add_notices(self, session_id: SessionId, items: Sequence[tuple[str, str]]) -> None:
        """Queue notices (path, text) for the assistant, and require it to read each path again."""

    def take_notices(self, session_id: SessionId) -> list[Notice]:
        """The session's pending notices, each delivered once (and a notice said twice, once)."""

    def sealed_notices(self, session_id: SessionId) -> list[SealedNotice]:
        """Every notice of the session as stored, delivered or not (``verify`` opens each on its own)."""

    def open_notice(self, notice_id: int, body: bytes) -> Notice:
        """A notice's path and text, from its sealed row."""

    def must_read(self, session_id: SessionId, path: str) -> bool: ...

    def mark_read(self, session_id: SessionId, path: str) -> None: ...


class MaintenanceStore(Protocol):
    """What the size caps, gc, verify and deleting a session ask (ops/maintenance.py decides)."""

    def kept_blob_ids(self) -> set[bytes]:
        """Every copy a change or an operation still needs (chunk lists as themselves, not their chunks)."""

    def kept_bytes(self) -> int:
        """The content size of every copy a change or an operation needs, and the calls' recorded input."""

    def turn_kept_bytes(self, turn_id: str) -> int:
        """The content size of the copies the turn's calls keep (each copy once)."""

    def turn_kept_bytes_at_most(self, turn_id: str) -> int:
        """No less than :meth:`turn_kept_bytes`, and cheaper to ask again and again: a file tool's cap check
        reads the exact figure only when this one says a copy may not fit."""

    def newest_turn_ids(self) -> set[str]:
        """Every running turn, and the turn that ended last."""

    def pending_op_blobs(self, pending_since: int) -> set[bytes]:
        """Copies an applying operation or a pending preview needs (one made at or after *pending_since*, or its
        session's newest)."""

    def evictable_calls(self) -> list[EvictableCall]:
        """Calls that still keep a copy or their input."""

    def evictable_operations(self, pending_since: int) -> list[EvictableOperation]:
        """Operations whose copies may go: applied ones, and previews no longer pending (see
        :meth:`pending_op_blobs`)."""

    def call_kept_blobs(self, call_id: CallId) -> set[bytes]:
        """The copies the call's changes not evicted keep."""

    def evict_call(self, call_id: CallId) -> None:
        """Drop a call's copies and input: its changes can no longer be reverted."""

    def evict_operation(self, op_id: OpId) -> None:
        """Drop an operation's copies: it can no longer be taken back (or applied)."""

    def cache_project_ids(self) -> list[ProjectId]:
        """The projects that have a stat cache."""

    def snapshot_records(self) -> list[SnapshotRecord]: ...

    def free_space(self) -> FreeSpace: ...

    def compact(self) -> None:
        """Give the free room inside the database back to the disk, and empty its log."""

    def integrity_problems(self) -> list[str]:
        """What the database's own integrity check finds (in its words)."""

    def schema_mismatches(self) -> list[SchemaObject]:
        """The tables and indexes whose definition is not what this version's migrations make."""

    def dangling_references(self) -> list[DanglingReference]:
        """Each (table, parent) where a row names a row of its parent that is not there."""

    def projects_without_sessions(self) -> list[ProjectId]: ...

    def snapshot_ids(self) -> list[str]: ...

    def session_ids(self) -> list[SessionId]: ...

    def turn_ids(self, session_id: SessionId) -> list[TurnId]: ...

    def call_ids(self, session_id: SessionId) -> list[CallId]: ...

    def op_ids(self, session_id: SessionId) -> list[OpId]: ...

    def kept_change_copies(self) -> list[ChangeCopies]:
        """The copies of every change not evicted, with its call and session."""

    def delete_session_records(self, session_id: SessionId) -> None:
        """Delete a session and every record it owns; its copies stay until a gc finds nothing needs them."""

    def add_blob_hold(self, project_id: ProjectId, pid: int, pid_start: int | None, since: int) -> str:
        """Record that process *pid* stores blobs of the project that no record names yet, since *since*."""

    def blob_holds(self) -> list[BlobHold]: ...

    def remove_blob_hold(self, hold_id: str) -> None: ...


class ActivityStore(Protocol):
    """What changed, cheaply (a front end that shows sessions live polls it)."""

    def data_version(self) -> int:
        """A number that changes whenever another connection (process) commits a change."""
        ...

    def activity(self) -> list[SessionActivity]:
        """Each session's newest turn, call and operation, with a marker that changes when any of its records do."""
        ...


class StoreBackend(
    ActivityStore,
    ProjectStore,
    SessionStore,
    BusyMarkStore,
    TurnStore,
    CallStore,
    OperationStore,
    SnapshotStore,
    NoticeStore,
    MaintenanceStore,
    Protocol,
):
    """An open store: its records, its blobs, its keys, and the folder beside it (trash, locks, log)."""

    home: str  # the store folder: trash, locks and the log live here, whatever holds the records
    crypto: Crypto
    key_secret: str | None  # the secret it was opened with, handed to turnback's own detached helpers
    database_url: str | None  # the database that holds the records when it is not the folder's SQLite file
    reserve_used: bool  # the disk was full and the space set aside was freed to go on

    @property
    def blobs(self) -> BlobBackend: ...

    @property
    def trash_root(self) -> str: ...

    @property
    def locks_dir(self) -> str: ...

    @property
    def log_path(self) -> str: ...

    def transaction(
        self, *, durable: bool = True, project: ProjectId | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """One write transaction, its lock taken before the first read; nested calls join it.

        *project*: it writes that project's records only (a file tool's call), and reads nothing another
        project's writes could change: it then waits only for the writes of that project and for unscoped
        ones, where the server can tell them apart (PostgreSQL); SQLite has one writer at a time anyway."""

    def session_lock(self, session_id: SessionId) -> contextlib.AbstractContextManager[None]:
        """Held while an operation applies to the session, beside the lock file in :attr:`locks_dir` (which
        serves one host): a store shared by hosts holds it for all of them, busy when another holds it."""

    def wait_for_change(self, timeout_s: float) -> bool:
        """Wait up to *timeout_s* for another process (on any host sharing the store) to commit a change;
        whether one did. What a live view (the web page's event stream, the TUI) waits on."""

    def truncate_log(self) -> None:
        """After a large write: give the disk back what the database's log grew to (nothing where it has none)."""

    def use_reserve(self) -> bool:
        """On a full disk, free the space set aside so a turn can still end; whether there was any."""

    def is_current(self) -> bool:
        """Whether opening the store again now would give this one, as it was opened (a process that keeps it
        open across requests opens it again when not)."""

    def new_id(self) -> str: ...

    def now(self) -> int: ...

    def path_id(self, scope: str, path: str) -> bytes:
        """The keyed id of *path* in *scope*: a project id, or ``outside`` for an absolute outside path."""

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


__all__ = [
    "ActivityStore",
    "BlobBackend",
    "BusyMarkStore",
    "CallStore",
    "MaintenanceStore",
    "NoticeStore",
    "OperationStore",
    "ProjectStore",
    "SessionStore",
    "SnapshotStore",
    "StoreBackend",
    "TurnStore",
]

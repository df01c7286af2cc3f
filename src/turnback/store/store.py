"""The store: one encrypted SQLite database per user, with its blobs, key and trash.

:class:`Store` opens (or creates) the store folder, checks the key, and
reads and writes the model's records. It seals every path, message, title,
input and link target it keeps; nothing here decides what an undo does.
"""

from __future__ import annotations

import contextlib
import json
import operator
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, get_args

from turnback.catalog import Message
from turnback.errors import BlobCorruptError, RecordDamagedError, StoreError, UsageError
from turnback.fsio import ensure_private_dir
from turnback.model import (
    BlobId,
    Call,
    CallId,
    CallKind,
    CallStatus,
    Change,
    FileState,
    IdSource,
    OpId,
    OpKind,
    OpStatus,
    Plan,
    PlanRow,
    PlanSection,
    Project,
    ProjectId,
    RefChange,
    RefUpdate,
    RowAction,
    RowStatus,
    Session,
    SessionId,
    StateKind,
    Turn,
    TurnId,
    TurnStatus,
    UndoState,
    short_id,
)
from turnback.paths import RelPath
from turnback.store import keys
from turnback.store.blobs import BlobStore
from turnback.store.crypto import ID_LEN, Crypto, Keys
from turnback.store.db import DAMAGED_READ_ONLY, Database
from turnback.store.schema import SCHEMA_VERSION

DB_NAME = "turnback.db"
OUTSIDE_SCOPE = "outside"  # the path-id scope of files outside any project (absolute paths)
TRASH_DIR = "trash"
LOCKS_DIR = "locks"
LOG_NAME = "turnback.log"
_README = """This folder is turnback's store: an encrypted database of the earlier
content of files that AI agents changed, and the trash of undo operations.
Do not edit it by hand. `turnback verify` checks it; `turnback gc` compacts it.
trash/ holds plain copies of files that undo operations displaced.
"""


RESERVE_NAME = "reserve"
RESERVE_BYTES = 4 << 20  # room SQLite needs to end a turn on a full disk: its shared-memory file, a few WAL frames
RESERVE_FULL = (
    "the disk holding the store is full: turnback used the space it keeps aside for this; "
    "free some space there (turnback gc reclaims copies nothing needs)"
)


def _disk_full(home: str) -> bool:
    try:
        st = os.statvfs(home)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < RESERVE_BYTES


def _keep_reserve(home: str) -> None:
    """Set aside ``RESERVE_BYTES`` in the store folder while the disk has plenty, so a full disk can still
    end a turn (:meth:`Store.use_reserve`). Best effort: without room, nothing is set aside."""
    path = os.path.join(home, RESERVE_NAME)
    if os.path.lexists(path):
        return
    try:
        st = os.statvfs(home)
        if st.f_bavail * st.f_frsize < 4 * RESERVE_BYTES:
            return
        temp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            block = bytes(1 << 20)
            for _ in range(RESERVE_BYTES >> 20):
                os.write(fd, block)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(f"{path}.{os.getpid()}.tmp")


def _release_reserve(home: str) -> bool:
    """Delete the space set aside; whether there was any to free."""
    try:
        os.unlink(os.path.join(home, RESERVE_NAME))
    except FileNotFoundError:
        return False
    return True


def _damaged(error: StoreError) -> bool:
    """Whether SQLite said the database file is damaged (rather than busy, or not turnback's)."""
    text = str(error)
    return "malformed" in text or "disk image" in text or "not a database" in text or "corrupt" in text


# What a sealed value's associated data names: its table's owner (and the item in it), for messages.
_SEALED_OWNERS = {
    "projects": ("project", None),
    "sessions": ("session", None),
    "turns": ("turn", None),
    "calls": ("call", None),
    "changes": ("call", "change"),
    "ops": ("operation", None),
    "op_rows": ("operation", "row"),
    "ref_changes": ("turn", "git ref change"),
    "busy_marks": ("busy mark", None),
    "notices": ("notice", None),
    "snapshots": ("snapshot", None),
}


def sealed_where(context: str) -> str:
    """``changes.path:CALL:SEQ`` as "the path of change SEQ of call CALL": where a sealed value belongs."""
    name, _, ids = context.partition(":")
    table, _, column = name.partition(".")
    owner, item = _SEALED_OWNERS.get(table, (table, None))
    first, _, seq = ids.partition(":")
    where = f"{owner} {short_id(first)}"
    if item:
        where = f"{item} {seq} of {where}"
    return f"the {column.replace('_', ' ')} of {where}" if column else where


def _one_of(value: Any, allowed: tuple[str, ...], what: str) -> Any:
    """*value* when it is one of *allowed*; else the record holding it is damaged (a flipped byte, a bad page)."""
    if value not in allowed:
        raise RecordDamagedError(what)
    return value


def _number(value: Any, what: str, *, optional: bool = True) -> Any:
    if (value is None and optional) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise RecordDamagedError(what)


def _blob_id(value: Any, what: str) -> BlobId | None:
    if value is None:
        return None
    if not isinstance(value, bytes) or len(value) != ID_LEN:
        raise RecordDamagedError(what)
    return BlobId(value)


_STATE_KINDS: tuple[str, ...] = get_args(StateKind)
_CALL_STATUSES: tuple[str, ...] = get_args(CallStatus)
_CALL_KINDS: tuple[str, ...] = get_args(CallKind)
_TURN_STATUSES: tuple[str, ...] = get_args(TurnStatus)
_UNDO_STATES: tuple[str, ...] = get_args(UndoState)
_ROW_ACTIONS: tuple[str, ...] = get_args(RowAction)
_ROW_STATUSES: tuple[str, ...] = get_args(RowStatus)
_OP_KINDS: tuple[str, ...] = get_args(OpKind)
_OP_STATUSES: tuple[str, ...] = get_args(OpStatus)


def _state_columns(state: FileState | None) -> tuple[Any, ...]:
    if state is None:
        return (None, None, None, None)
    return (state.kind, state.blob, state.size, state.mode)


def message_to_json(message: Message | None) -> dict[str, Any] | None:
    return message.to_json() if message is not None else None


def message_from_json(data: object) -> Message | None:
    """A message as saved; a plain string is a reason an older turnback saved as English text."""
    if data is None:
        return None
    return _message(data)


def _message(data: object) -> Message:
    if isinstance(data, dict):
        return Message.from_json(data)
    return Message("plain", text=str(data))


def state_to_json(state: FileState | None) -> dict[str, Any] | None:
    if state is None:
        return None
    return {
        "kind": state.kind,
        "blob": state.blob.hex() if state.blob else None,
        "size": state.size,
        "mode": state.mode,
        "target": state.target,
    }


def state_from_json(data: dict[str, Any] | None) -> FileState | None:
    if data is None:
        return None
    return FileState(
        kind=data["kind"],
        blob=BlobId(bytes.fromhex(data["blob"])) if data.get("blob") else None,
        size=data.get("size"),
        mode=data.get("mode"),
        target=data.get("target"),
    )


class CachedSnapshot(NamedTuple):
    id: str
    data: bytes
    watch_token: str | None  # the watcher's token the scan was taken at, if a watcher answered
    content_bytes: int | None  # what its copies hold (None: not counted when it was saved)


def _size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return None


def _refuse_emptied_database(home: str) -> None:
    """A store made before (it has its README) whose database is now empty lost it: never start afresh over it."""
    db_path = os.path.join(home, DB_NAME)
    made_before = os.path.isfile(os.path.join(home, "README.txt"))
    if _size(db_path) == 0 and made_before and not _size(db_path + "-wal"):
        raise StoreError(
            f"the database of the store at {home} is empty (truncated?): turnback will not start a new store over it. "
            f"Nothing was changed; the plain copies in {os.path.join(home, TRASH_DIR)} are intact. "
            "Restore the database from a backup, or move the folder away to start afresh"
        )


def _read_only_reason(home: str) -> str | None:
    """Why the store in *home* can only be read (a read-only mount, a folder or database it may not write);
    None when it can be written, or has no database yet."""
    db_path = os.path.join(home, DB_NAME)
    if not os.path.isfile(db_path):
        return None
    if os.access(home, os.W_OK) and os.access(db_path, os.W_OK):
        return None
    if os.statvfs(home).f_flag & os.ST_RDONLY:
        why = "it is on a read-only file system"
    else:
        why = "its folder or its database may not be written"
    return (
        f"the store at {home} is read-only ({why}): log, show, diff and verify work; "
        "this command needs to write to it, so nothing was done"
    )


class Store:
    """An open store. Use :meth:`open`; close with :meth:`close` or ``with``."""

    def __init__(
        self,
        home: str,
        db: Database,
        crypto: Crypto,
        *,
        clock: Callable[[], int] = time.time_ns,
        ids: IdSource | None = None,
    ):
        self.home = home
        self.db = db
        self.crypto = crypto
        self.blobs = BlobStore(db, crypto)
        # The TURNBACK_KEY-style secret the store was opened with, if any: turnback's own detached helpers
        # (a job runner, a watcher) are given it, as they would find it in the environment.
        self.key_secret: str | None = None
        self.clock = clock
        self.ids = ids or IdSource()
        self.reserve_used = False  # the disk was full and the space set aside was freed to go on

    def use_reserve(self) -> bool:
        """On a full disk, free the space set aside (so a turn can still end); whether there was any."""
        if not _disk_full(self.home) or not _release_reserve(self.home):
            return False
        self.reserve_used = True
        return True

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        home: str,
        *,
        key_secret: str | None = None,
        try_keyring: bool = True,
        clock: Callable[[], int] = time.time_ns,
        ids: IdSource | None = None,
    ) -> Store:
        """Open the store in *home*, creating it (folder, database, key) on first use.

        A damaged database that SQLite can still read is opened read-only, so
        ``verify`` can say what is damaged and what is intact still reverts
        by hand; nothing is ever deleted or rebuilt over it.
        """
        home = os.path.abspath(home)
        ensure_private_dir(home)
        _refuse_emptied_database(home)
        read_only = _read_only_reason(home)
        if read_only is not None:
            return cls._open_read_only(home, read_only, key_secret=key_secret, clock=clock, ids=ids)
        try:
            try:
                store = cls._open_writable(home, key_secret=key_secret, try_keyring=try_keyring, clock=clock, ids=ids)
                released = False
            except StoreError:
                # SQLite cannot even open its shared memory on a full disk: free the reserve and try once more.
                if not (_disk_full(home) and _release_reserve(home)):
                    raise
                store = cls._open_writable(home, key_secret=key_secret, try_keyring=try_keyring, clock=clock, ids=ids)
                released = True
            store.key_secret = key_secret
            store.reserve_used = released
            if not released:
                _keep_reserve(home)
            return store
        except StoreError as exc:
            if not _damaged(exc) or not os.path.isfile(os.path.join(home, DB_NAME)):
                raise
            unreadable = StoreError(
                f"the store at {home} is damaged and cannot be read ({str(exc).split(': ', 1)[-1]}); "
                f"nothing was changed or deleted, and the plain copies in {os.path.join(home, TRASH_DIR)} are intact"
            )
            try:
                return cls._open_read_only(home, DAMAGED_READ_ONLY, key_secret=key_secret, clock=clock, ids=ids)
            except StoreError as again:
                raise unreadable from again

    @classmethod
    def _open_read_only(
        cls,
        home: str,
        reason: str,
        *,
        key_secret: str | None,
        clock: Callable[[], int],
        ids: IdSource | None,
    ) -> Store:
        """The store opened for reading only; a write then fails with *reason*."""
        db = Database(os.path.join(home, DB_NAME), read_only=True, read_only_reason=reason)
        try:
            meta = {row[0]: bytes(row[1]) for row in db.all("SELECT key, value FROM meta")}
            master = keys.master_for_existing_store(
                home, keys.key_source(meta["key_source"]), meta["salt"], meta["store_id"].decode(), key_secret
            )
            crypto = Crypto(Keys.from_master(master))
            crypto.verify_key_check(meta["key_check"])
        except KeyError as exc:
            db.close()
            raise StoreError(f"the store at {home} lacks its key record ({exc})") from exc
        except BaseException:
            db.close()
            raise
        store = cls(home, db, crypto, clock=clock, ids=ids)
        store.key_secret = key_secret
        return store

    @classmethod
    def _open_writable(
        cls,
        home: str,
        *,
        key_secret: str | None,
        try_keyring: bool,
        clock: Callable[[], int],
        ids: IdSource | None,
    ) -> Store:
        db = Database(os.path.join(home, DB_NAME))
        try:
            # A store set up by this version is only read here: a process holding the write lock (a long write,
            # or one stopped mid-way) must not keep every other command from opening the store.
            ready = db.schema_version() == SCHEMA_VERSION and db.one("SELECT 1 FROM meta WHERE key='key_check'")
            with contextlib.nullcontext() if ready else db.transaction():
                db.migrate()
                meta = {row[0]: bytes(row[1]) for row in db.all("SELECT key, value FROM meta")}
                if "key_check" not in meta:
                    store_id = IdSource().new()
                    salt = os.urandom(16)
                    master, source = keys.master_for_new_store(
                        home, salt, store_id, key_secret, try_keyring=try_keyring
                    )
                    crypto = Crypto(Keys.from_master(master))
                    db.executemany(
                        "INSERT INTO meta(key, value) VALUES(?, ?)",
                        [
                            ("store_id", store_id.encode()),
                            ("salt", salt),
                            ("key_source", source.encode()),
                            ("key_check", crypto.make_key_check()),
                        ],
                    )
                    readme = os.path.join(home, "README.txt")
                    if not os.path.lexists(readme):
                        with open(readme, "w", encoding="utf-8") as handle:
                            handle.write(_README)
                else:
                    master = keys.master_for_existing_store(
                        home,
                        keys.key_source(meta["key_source"]),
                        meta["salt"],
                        meta["store_id"].decode(),
                        key_secret,
                    )
                    crypto = Crypto(Keys.from_master(master))
                    crypto.verify_key_check(meta["key_check"])
        except BaseException:
            db.close()
            raise
        return cls(home, db, crypto, clock=clock, ids=ids)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def transaction(self, *, durable: bool = True) -> contextlib.AbstractContextManager[None]:
        """One write transaction on the store (``BEGIN IMMEDIATE``); nested calls join it."""
        return self.db.transaction(durable=durable)

    @property
    def trash_root(self) -> str:
        return os.path.join(self.home, TRASH_DIR)

    @property
    def locks_dir(self) -> str:
        return os.path.join(self.home, LOCKS_DIR)

    @property
    def log_path(self) -> str:
        return os.path.join(self.home, LOG_NAME)

    def new_id(self) -> str:
        return self.ids.new()

    def now(self) -> int:
        return self.clock()

    # -- sealing helpers -------------------------------------------------------------------

    def _seal(self, text: str | None, context: str) -> bytes | None:
        return self.crypto.seal_text(text, context)

    def _open(self, sealed: bytes | None, context: str) -> str | None:
        if sealed is None:
            return None
        return self._open_bytes(sealed, context).decode("utf-8", "surrogateescape")

    def _open_bytes(self, sealed: bytes, context: str) -> bytes:
        """Open a sealed column value; a damaged one (or one moved from another row) says which record it is."""
        if not isinstance(sealed, bytes):
            raise RecordDamagedError(sealed_where(context))
        try:
            return self.crypto.open(sealed, context.encode("utf-8", "surrogateescape"))
        except BlobCorruptError as exc:
            raise RecordDamagedError(sealed_where(context)) from exc

    def _open_json_or_none(self, sealed: bytes | None, context: str) -> Any:
        """A sealed JSON value, or (an older turnback's result notes) its text as it is."""
        text = self._open(sealed, context)
        if text is None:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text

    def _open_json(self, sealed: bytes, context: str) -> Any:
        return json.loads(self._open_bytes(sealed, context).decode("utf-8", "surrogateescape"))

    def path_id(self, scope: str, path: str) -> bytes:
        """The keyed id of *path* in *scope*: a project id, or ``OUTSIDE_SCOPE`` for an absolute outside path."""
        return self.crypto.path_id(scope, path)

    # -- projects --------------------------------------------------------------------------

    def register_project(self, root: str) -> tuple[Project, bool]:
        """The project at *root* (a real path), registering it if new; and whether it was new."""
        root_id = self.crypto.path_id("root", root)
        with self.transaction():
            row = self.db.one("SELECT id FROM projects WHERE root_id=?", (root_id,))
            if row:
                return Project(ProjectId(row[0]), root), False
            project_id = ProjectId(self.new_id())
            self.db.execute(
                "INSERT INTO projects(id, root_id, root_enc, created_at) VALUES(?,?,?,?)",
                (project_id, root_id, self._seal(root, f"projects.root:{project_id}"), self.now()),
            )
        return Project(project_id, root), True

    def project_by_root(self, root: str) -> Project | None:
        row = self.db.one("SELECT id FROM projects WHERE root_id=?", (self.crypto.path_id("root", root),))
        return Project(ProjectId(row[0]), root) if row else None

    def project(self, project_id: ProjectId) -> Project:
        row = self.db.one("SELECT id, root_enc FROM projects WHERE id=?", (project_id,))
        if row is None:  # every project id comes from a stored record (a session's, a plan's)
            raise RecordDamagedError(f"project {short_id(project_id)}, which a stored record names, is missing")
        root = self._open(row[1], f"projects.root:{row[0]}")
        assert root is not None
        return Project(ProjectId(row[0]), root)

    def project_containing(self, path: str) -> Project | None:
        """The registered project whose root is *path* or a folder above it."""
        current = os.path.realpath(path)
        while True:
            project = self.project_by_root(current)
            if project:
                return project
            parent = os.path.dirname(current)
            if parent == current:
                return None
            current = parent

    def projects(self) -> list[Project]:
        return [self.project(ProjectId(row[0])) for row in self.db.all("SELECT id FROM projects ORDER BY id")]

    # -- sessions --------------------------------------------------------------------------

    def _session_from_row(self, row: Sequence[Any]) -> Session:
        sid = row[0]
        return Session(
            id=SessionId(sid),
            project_id=ProjectId(row[1]),
            actor=self._open(row[2], f"sessions.actor:{sid}"),
            title=self._open(row[3], f"sessions.title:{sid}"),
            incognito=bool(row[4]),
            head=TurnId(row[5]) if row[5] else None,
            created_at=row[6],
            active_at=row[7],
        )

    _SESSION_COLUMNS = "id, project_id, actor_enc, title_enc, incognito, head, created_at, active_at"

    def create_session(
        self, project_id: ProjectId, *, actor: str | None, title: str | None, incognito: bool
    ) -> Session:
        session_id = SessionId(self.new_id())
        now = self.now()
        with self.transaction():
            self.db.execute(
                "INSERT INTO sessions(id, project_id, actor_enc, title_enc, incognito, head, created_at, active_at)"
                " VALUES(?,?,?,?,?,NULL,?,?)",
                (
                    session_id,
                    project_id,
                    self._seal(actor, f"sessions.actor:{session_id}"),
                    self._seal(title, f"sessions.title:{session_id}"),
                    int(incognito),
                    now,
                    now,
                ),
            )
        return self.session(session_id)

    def external_id(self, kind: str, value: str) -> bytes:
        """A harness's own id (a Claude Code session id, a tool use id) as a keyed id: findable, never stored plain."""
        return self.crypto.path_id("external:" + kind, value)

    def session_by_external_id(self, external: bytes) -> Session | None:
        row = self.db.one(f"SELECT {self._SESSION_COLUMNS} FROM sessions WHERE external_id=?", (external,))
        return self._session_from_row(row) if row else None

    def set_session_external_id(self, session_id: SessionId, external: bytes) -> None:
        self.db.execute("UPDATE sessions SET external_id=? WHERE id=?", (external, session_id))

    def call_by_external_id(self, session_id: SessionId, external: bytes) -> CallId | None:
        row = self.db.one(
            "SELECT id FROM calls WHERE session_id=? AND external_id=? ORDER BY rowid DESC", (session_id, external)
        )
        return CallId(row[0]) if row else None

    def set_call_external_id(self, call_id: CallId, external: bytes) -> None:
        self.db.execute("UPDATE calls SET external_id=? WHERE id=?", (external, call_id))

    def session(self, session_id: SessionId) -> Session:
        row = self.db.one(f"SELECT {self._SESSION_COLUMNS} FROM sessions WHERE id=?", (session_id,))
        if row is None:
            raise UsageError(f"no session {session_id}")
        return self._session_from_row(row)

    def sessions(self, project_id: ProjectId | None = None) -> list[Session]:
        if project_id is None:
            rows = self.db.all(f"SELECT {self._SESSION_COLUMNS} FROM sessions ORDER BY active_at DESC, id DESC")
        else:
            rows = self.db.all(
                f"SELECT {self._SESSION_COLUMNS} FROM sessions WHERE project_id=? ORDER BY active_at DESC, id DESC",
                (project_id,),
            )
        return [self._session_from_row(row) for row in rows]

    def touch_session(self, session_id: SessionId) -> None:
        self.db.execute("UPDATE sessions SET active_at=? WHERE id=?", (self.now(), session_id))

    def resolve_id(self, table: str, prefix: str, noun: str) -> str:
        """The one id in *table* that starts with *prefix*; a clear error for none or several."""
        cleaned = prefix.strip().lower()
        if not cleaned or any(c not in "0123456789abcdef" for c in cleaned):
            raise UsageError(f"{prefix!r} is not a {noun} id")
        rows = self.db.all(
            f"SELECT id FROM {table} WHERE id >= ? AND id < ? ORDER BY id LIMIT 6",
            (cleaned, cleaned + "g"),
        )
        if not rows:
            raise UsageError(f"no {noun} has an id starting with {cleaned}")
        if len(rows) > 1:
            shown = ", ".join(row[0][:20] for row in rows[:5])
            raise UsageError(f"{cleaned} is the start of several {noun} ids ({shown}); give more of it")
        return str(rows[0][0])

    # -- turns -----------------------------------------------------------------------------

    _TURN_COLUMNS = (
        "id, session_id, number, parent, message_enc, status, undone, started_at, ended_at, holder_pid, holder_start,"
        " resent"
    )

    def _turn_from_row(self, row: Sequence[Any], calls: tuple[Call, ...] = (), *, with_refs: bool = False) -> Turn:
        what = f"turn {short_id(str(row[0]))}"
        return Turn(
            id=TurnId(row[0]),
            session_id=SessionId(row[1]),
            number=_number(row[2], what, optional=False),
            parent=TurnId(row[3]) if row[3] else None,
            message=self._open(row[4], f"turns.message:{row[0]}"),
            status=_one_of(row[5], _TURN_STATUSES, what),
            undone=_one_of(row[6], _UNDO_STATES, what),
            started_at=_number(row[7], what, optional=False),
            ended_at=_number(row[8], what),
            holder_pid=_number(row[9], what),
            calls=calls,
            refs=self.ref_changes(TurnId(row[0])) if with_refs else (),
            resent=bool(row[11]),
        )

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
        turn_id = TurnId(self.new_id())
        with self.transaction():
            session = self.session(session_id)
            row = self.db.one("SELECT COALESCE(MAX(number), 0) FROM turns WHERE session_id=?", (session_id,))
            number = int(row[0]) + 1
            self.db.execute(
                f"INSERT INTO turns({self._TURN_COLUMNS}) VALUES(?,?,?,?,?,?,?,?,?,?,?,0)",
                (
                    turn_id,
                    session_id,
                    number,
                    session.head,
                    self._seal(message, f"turns.message:{turn_id}"),
                    "running",
                    "no",
                    self.now(),
                    None,
                    holder_pid,
                    holder_start,
                ),
            )
            if refs is not None:
                self.db.execute(
                    "UPDATE turns SET refs_before_enc=? WHERE id=?",
                    (self.crypto.seal(json.dumps(refs).encode(), f"turns.refs_before:{turn_id}".encode()), turn_id),
                )
            self.db.execute("UPDATE sessions SET head=?, active_at=? WHERE id=?", (turn_id, self.now(), session_id))
        return self.turn(turn_id)

    def refs_at_turn_start(self, turn_id: TurnId) -> dict[str, str] | None:
        row = self.db.one("SELECT refs_before_enc FROM turns WHERE id=?", (turn_id,))
        if row is None or row[0] is None:
            return None
        data: dict[str, str] = self._open_json(row[0], f"turns.refs_before:{turn_id}")
        return data

    def add_ref_changes(self, turn_id: TurnId, moves: Sequence[tuple[str, str | None, str | None]]) -> None:
        """Record the refs a turn moved: (name, value before, value after)."""
        self.db.executemany(
            "INSERT INTO ref_changes(turn_id, seq, body_enc) VALUES(?,?,?)",
            [
                (
                    turn_id,
                    seq,
                    self.crypto.seal(
                        json.dumps([name, before, after]).encode(), f"ref_changes:{turn_id}:{seq}".encode()
                    ),
                )
                for seq, (name, before, after) in enumerate(moves)
            ],
        )

    def ref_changes(self, turn_id: TurnId) -> tuple[RefChange, ...]:
        changes = []
        for change_id, seq, body, reverted in self.db.all(
            "SELECT id, seq, body_enc, reverted FROM ref_changes WHERE turn_id=? ORDER BY seq", (turn_id,)
        ):
            name, before, after = self._open_json(body, f"ref_changes:{turn_id}:{seq}")
            changes.append(RefChange(change_id, turn_id, name, before, after, bool(reverted)))
        return tuple(changes)

    def mark_ref_changes_reverted(self, ids: Iterable[int], *, reverted: bool = True) -> None:
        self.db.executemany("UPDATE ref_changes SET reverted=? WHERE id=?", [(int(reverted), i) for i in ids])

    def turn(self, turn_id: TurnId, *, with_calls: bool = False) -> Turn:
        row = self.db.one(f"SELECT {self._TURN_COLUMNS} FROM turns WHERE id=?", (turn_id,))
        if row is None:
            raise UsageError(f"no turn {turn_id}")
        calls = self.calls_of_turn(turn_id) if with_calls else ()
        return self._turn_from_row(row, calls, with_refs=with_calls)

    def turns(self, session_id: SessionId, *, with_calls: bool = False) -> list[Turn]:
        rows = self.db.all(f"SELECT {self._TURN_COLUMNS} FROM turns WHERE session_id=? ORDER BY number", (session_id,))
        return [
            self._turn_from_row(row, self.calls_of_turn(TurnId(row[0])) if with_calls else (), with_refs=with_calls)
            for row in rows
        ]

    def turn_by_number(self, session_id: SessionId, number: int) -> Turn:
        row = self.db.one(
            f"SELECT {self._TURN_COLUMNS} FROM turns WHERE session_id=? AND number=?", (session_id, number)
        )
        if row is None:
            raise UsageError(f"the session has no turn {number}")
        return self._turn_from_row(row)

    def turns_with_changes(self, session_id: SessionId) -> set[str]:
        """Ids of the session's turns that recorded at least one change of a file or a git ref."""
        rows = self.db.all(
            "SELECT DISTINCT calls.turn_id FROM calls JOIN changes ON changes.call_id = calls.id"
            " WHERE calls.session_id=?"
            " UNION SELECT DISTINCT ref_changes.turn_id FROM ref_changes JOIN turns ON turns.id = ref_changes.turn_id"
            " WHERE turns.session_id=?",
            (session_id, session_id),
        )
        return {row[0] for row in rows}

    def running_turns(self, session_id: SessionId) -> list[tuple[Turn, int | None]]:
        """Turns begun and not ended, with the start time of the process holding each."""
        rows = self.db.all(
            f"SELECT {self._TURN_COLUMNS} FROM turns WHERE session_id=? AND status='running' ORDER BY number",
            (session_id,),
        )
        return [(self._turn_from_row(row), row[10]) for row in rows]

    def end_turn(self, turn_id: TurnId, status: TurnStatus) -> None:
        self.db.execute(
            "UPDATE turns SET status=?, ended_at=? WHERE id=? AND status='running'",
            (status, self.now(), turn_id),
        )

    def reopen_turn(self, turn_id: TurnId, *, holder_pid: int | None, holder_start: int | None) -> bool:
        """Make an ended turn run again (an MCP server's turn runs only while a tool call does)."""
        cursor = self.db.execute(
            "UPDATE turns SET status='running', ended_at=NULL, holder_pid=?, holder_start=?"
            " WHERE id=? AND status='ended'",
            (holder_pid, holder_start, turn_id),
        )
        return cursor.rowcount == 1

    def set_turn_undone(self, turn_id: TurnId, undone: UndoState) -> None:
        self.db.execute("UPDATE turns SET undone=? WHERE id=?", (undone, turn_id))

    # -- calls and changes -----------------------------------------------------------------

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
    ) -> CallId:
        call_id = CallId(self.new_id())
        self.db.execute(
            "INSERT INTO calls(id, turn_id, session_id, tool, input_enc, status, started_at, kind, snapshot_id,"
            " baseline_id, unasked)"
            " VALUES(?,?,?,?,?,?,?,?,?,?,?)",
            (
                call_id,
                turn.id,
                turn.session_id,
                tool,
                self._seal(raw_input, f"calls.input:{call_id}"),
                "running",
                self.now(),
                kind,
                snapshot_id,
                baseline_id,
                int(unasked),
            ),
        )
        return call_id

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
        if pid is not None:
            self.db.execute("UPDATE calls SET pid=?, pid_start=? WHERE id=?", (pid, pid_start, call_id))
        if watcher_pid is not None:
            self.db.execute(
                "UPDATE calls SET watcher_pid=?, watcher_start=? WHERE id=?", (watcher_pid, watcher_start, call_id)
            )

    def running_commands(self, project_id: ProjectId) -> list[tuple[Call, int | None, int | None, int | None]]:
        """Commands and jobs of the project not recorded as ended: each with its pid's start time and its watcher."""
        rows = self.db.all(
            f"SELECT {self._CALL_COLUMNS}, calls.pid_start, calls.watcher_pid, calls.watcher_start FROM calls"
            " JOIN sessions ON sessions.id = calls.session_id"
            " WHERE calls.status='running' AND calls.kind IN ('command', 'job') AND sessions.project_id=?"
            " ORDER BY calls.rowid",
            (project_id,),
        )
        n = len(self._CALL_COLUMNS.split(","))
        return [(self._call_from_row(row, with_changes=False), row[n], row[n + 1], row[n + 2]) for row in rows]

    def call_processes(self, call_id: CallId) -> tuple[int | None, int | None, int | None, int | None]:
        """A command call's pid and its start time, and its watcher's pid and start time."""
        row = self.db.one("SELECT pid, pid_start, watcher_pid, watcher_start FROM calls WHERE id=?", (call_id,))
        return (None, None, None, None) if row is None else (row[0], row[1], row[2], row[3])

    def command_calls(self, *, session_id: SessionId | None, project_id: ProjectId | None) -> list[Call]:
        """Jobs and commands past their timeout (those with a watcher of their own), oldest first."""
        where = "calls.session_id=?" if session_id else "sessions.project_id=?"
        rows = self.db.all(
            f"SELECT {self._CALL_COLUMNS} FROM calls JOIN sessions ON sessions.id = calls.session_id"
            f" WHERE {where} AND (calls.kind='job' OR (calls.kind='command' AND calls.watcher_pid IS NOT NULL"
            " AND calls.exit_code IS NULL AND calls.status<>'failed')) ORDER BY calls.rowid",
            (session_id or project_id,),
        )
        return [self._call_from_row(row) for row in rows]

    def call_snapshot_ids(self, call_id: CallId) -> tuple[str | None, str | None]:
        """A command's own snapshot and the stat cache it started from."""
        row = self.db.one("SELECT snapshot_id, baseline_id FROM calls WHERE id=?", (call_id,))
        return (None, None) if row is None else (row[0], row[1])

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
        not_covered: str | None = None,
    ) -> int:
        where = f"{call_id}:{seq}"
        cursor = self.db.execute(
            "INSERT INTO changes(call_id, seq, project_id, path_id, path_enc,"
            " before_kind, before_blob, before_size, before_mode, before_target_enc,"
            " after_kind, after_blob, after_size, after_mode, after_target_enc, partial, outside, not_covered_enc)"
            " VALUES(?,?,?,?,?, ?,?,?,?,?, ?,?,?,?,?, ?,?,?)",
            (
                call_id,
                seq,
                project_id,
                self.path_id(OUTSIDE_SCOPE if outside else project_id, path),
                self._seal(path, f"changes.path:{where}"),
                *_state_columns(before),
                self._seal(before.target, f"changes.before_target:{where}"),
                *_state_columns(after),
                self._seal(after.target if after else None, f"changes.after_target:{where}"),
                int(partial),
                int(outside),
                self._seal(not_covered, f"changes.not_covered:{where}"),
            ),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def set_change_after(self, change_id: int, after: FileState, *, partial: bool) -> None:
        row = self.db.one("SELECT call_id, seq FROM changes WHERE id=?", (change_id,))
        where = f"{row[0]}:{row[1]}"
        self.db.execute(
            "UPDATE changes SET after_kind=?, after_blob=?, after_size=?, after_mode=?, after_target_enc=?, partial=?"
            " WHERE id=?",
            (
                *_state_columns(after),
                self._seal(after.target, f"changes.after_target:{where}"),
                int(partial),
                change_id,
            ),
        )

    def delete_change(self, change_id: int) -> None:
        self.db.execute("DELETE FROM changes WHERE id=?", (change_id,))

    def finish_call(
        self,
        call_id: CallId,
        status: CallStatus,
        error: str | None = None,
        *,
        exit_code: int | None = None,
        late: bool = False,
    ) -> None:
        self.db.execute(
            "UPDATE calls SET status=?, ended_at=?, error_enc=?, exit_code=?, late=? WHERE id=?",
            (status, self.now(), self._seal(error, f"calls.error:{call_id}"), exit_code, int(late), call_id),
        )

    _CHANGE_COLUMNS = (
        "id, call_id, seq, path_enc, before_kind, before_blob, before_size, before_mode, before_target_enc,"
        " after_kind, after_blob, after_size, after_mode, after_target_enc, partial, evicted, reverted,"
        " outside, not_covered_enc"
    )

    def _change_from_row(self, row: Sequence[Any]) -> Change:
        where = f"{row[1]}:{row[2]}"
        what = f"change {row[2]} of call {short_id(str(row[1]))}"
        path = self._open(row[3], f"changes.path:{where}")
        if path is None:
            raise RecordDamagedError(what)
        before = FileState(
            kind=_one_of(row[4], _STATE_KINDS, what),
            blob=_blob_id(row[5], what),
            size=_number(row[6], what),
            mode=_number(row[7], what),
            target=self._open(row[8], f"changes.before_target:{where}"),
        )
        after = None
        if row[9] is not None:
            after = FileState(
                kind=_one_of(row[9], _STATE_KINDS, what),
                blob=_blob_id(row[10], what),
                size=_number(row[11], what),
                mode=_number(row[12], what),
                target=self._open(row[13], f"changes.after_target:{where}"),
            )
        return Change(
            id=row[0],
            call_id=CallId(row[1]),
            seq=row[2],
            path=RelPath(path),
            before=before,
            after=after,
            partial=bool(row[14]),
            evicted=bool(row[15]),
            reverted=bool(row[16]),
            outside=bool(row[17]),
            not_covered=self._open(row[18], f"changes.not_covered:{where}"),
        )

    def changes_of_call(self, call_id: CallId) -> tuple[Change, ...]:
        rows = self.db.all(f"SELECT {self._CHANGE_COLUMNS} FROM changes WHERE call_id=? ORDER BY seq", (call_id,))
        return tuple(self._change_from_row(row) for row in rows)

    _CALL_COLUMNS = (
        "calls.id, calls.turn_id, calls.session_id, calls.tool, calls.input_enc, calls.status, calls.started_at,"
        " calls.ended_at, calls.error_enc, calls.kind, calls.exit_code, calls.pid, calls.late, calls.unasked"
    )

    def _call_from_row(self, row: Sequence[Any], *, with_changes: bool = True) -> Call:
        call_id = CallId(row[0])
        what = f"call {short_id(call_id)}"
        if not isinstance(row[3], str):
            raise RecordDamagedError(what)
        return Call(
            id=call_id,
            turn_id=TurnId(row[1]),
            session_id=SessionId(row[2]),
            tool=row[3],
            input=self._open(row[4], f"calls.input:{call_id}"),
            status=_one_of(row[5], _CALL_STATUSES, what),
            started_at=_number(row[6], what, optional=False),
            ended_at=_number(row[7], what),
            error=self._open(row[8], f"calls.error:{call_id}"),
            changes=self.changes_of_call(call_id) if with_changes else (),
            kind=_one_of(row[9], _CALL_KINDS, what),
            exit_code=_number(row[10], what),
            pid=_number(row[11], what),
            late=bool(row[12]),
            unasked=bool(row[13]),
        )

    def call(self, call_id: CallId) -> Call:
        row = self.db.one(f"SELECT {self._CALL_COLUMNS} FROM calls WHERE id=?", (call_id,))
        if row is None:
            raise UsageError(f"no call {call_id}")
        return self._call_from_row(row)

    def calls_of_turn(self, turn_id: TurnId) -> tuple[Call, ...]:
        rows = self.db.all(f"SELECT {self._CALL_COLUMNS} FROM calls WHERE turn_id=? ORDER BY calls.rowid", (turn_id,))
        return tuple(self._call_from_row(row) for row in rows)

    def later_calls_on_path(
        self, project_id: ProjectId, path: RelPath, call_id: CallId, *, outside: bool = False
    ) -> list[CallId]:
        """Calls after *call_id* (in any session of the project) that changed *path*, oldest first."""
        rows = self.db.all(
            "SELECT DISTINCT calls.id, calls.rowid FROM changes JOIN calls ON calls.id = changes.call_id"
            " WHERE changes.project_id=? AND changes.path_id=?"
            " AND calls.rowid > (SELECT rowid FROM calls WHERE id=?) ORDER BY calls.rowid",
            (project_id, self.path_id(OUTSIDE_SCOPE if outside else project_id, path), call_id),
        )
        return [CallId(row[0]) for row in rows]

    def pending_later_call(
        self, project_id: ProjectId, path: RelPath, call_id: CallId, excluding: set[str], *, outside: bool = False
    ) -> CallId | None:
        """The newest call after *call_id* (any session of the project, not in *excluding*) whose change
        of *path* is not taken back: while it stands, an undo of *call_id*'s change must not act."""
        rows = self.db.all(
            "SELECT calls.id FROM changes JOIN calls ON calls.id = changes.call_id"
            " WHERE changes.project_id=? AND changes.path_id=? AND changes.reverted=0"
            " AND calls.rowid > (SELECT rowid FROM calls WHERE id=?) ORDER BY calls.rowid DESC",
            (project_id, self.path_id(OUTSIDE_SCOPE if outside else project_id, path), call_id),
        )
        for row in rows:
            if row[0] not in excluding:
                return CallId(row[0])
        return None

    def overlapping_calls_on_path(
        self, project_id: ProjectId, path: RelPath, call_id: CallId, *, outside: bool = False
    ) -> list[tuple[CallId, str, bool]]:
        """Other calls (any session of the project) that changed *path* and were running when *call_id* ended,
        or were file tools' calls running while it ran (or still run as a command or job, their changes not known
        yet): (id, kind, running), oldest first.

        A command's change is what differs between its scans; a call running meanwhile may have made it: a
        call whose own end scan, later, saw it too, or a file tool's call, which names what it wrote.
        """
        window = self.db.one("SELECT started_at, ended_at FROM calls WHERE id=?", (call_id,))
        if window is None:
            return []
        start, end = window[0], window[1] if window[1] is not None else self.now()
        changed = self.db.all(
            "SELECT DISTINCT calls.id, calls.kind, calls.status = 'running', calls.rowid"
            " FROM changes JOIN calls ON calls.id = changes.call_id"
            " WHERE changes.project_id=? AND changes.path_id=? AND changes.reverted=0 AND calls.id<>?"
            " AND calls.started_at < ? AND (calls.ended_at IS NULL OR calls.ended_at > ?"
            " OR (calls.kind = 'tool' AND calls.ended_at > ?))",
            (project_id, self.path_id(OUTSIDE_SCOPE if outside else project_id, path), call_id, end, end, start),
        )
        running = self.db.all(
            "SELECT calls.id, calls.kind, 1, calls.rowid FROM calls JOIN sessions ON sessions.id = calls.session_id"
            " WHERE calls.status = 'running' AND calls.kind IN ('command', 'job') AND sessions.project_id=?"
            " AND calls.id<>? AND calls.started_at < ?",
            (project_id, call_id, end),
        )
        rows = sorted({row[0]: row for row in [*changed, *running]}.values(), key=operator.itemgetter(3))
        return [(CallId(row[0]), str(row[1]), bool(row[2])) for row in rows]

    def mark_changes_reverted(self, change_ids: Iterable[int], *, reverted: bool = True) -> None:
        ids = list(change_ids)
        if ids:
            self.db.executemany("UPDATE changes SET reverted=? WHERE id=?", [(int(reverted), cid) for cid in ids])

    def refresh_turn_undone(self, turn_id: TurnId) -> UndoState:
        """Set a turn's undo state from its changes: all taken back, some, or none."""
        row = self.db.one(
            "SELECT COUNT(*), COALESCE(SUM(changes.reverted), 0) FROM changes JOIN calls ON calls.id = changes.call_id"
            " WHERE calls.turn_id=?",
            (turn_id,),
        )
        refs = self.db.one("SELECT COUNT(*), COALESCE(SUM(reverted), 0) FROM ref_changes WHERE turn_id=?", (turn_id,))
        total, reverted = int(row[0]) + int(refs[0]), int(row[1]) + int(refs[1])
        state: UndoState = "no" if reverted == 0 else ("yes" if reverted == total else "partly")
        self.set_turn_undone(turn_id, state)
        return state

    # -- plans and operations --------------------------------------------------------------

    def save_plan(self, plan: Plan) -> None:
        spec = {
            "sections": [[s.turn_id, message_to_json(s.title)] for s in plan.sections],
            "turn_ids": list(plan.turn_ids),
            "call_id": plan.call_id,
            "force": plan.force,
            "notes": [message_to_json(note) for note in plan.notes],
            "head_from": plan.head_from,
            "head_to": plan.head_to,
            "moves_head": plan.moves_head,
            "resend_turn": plan.resend_turn,
            "resend_mode": plan.resend_mode,
        }
        with self.transaction():
            self.db.execute(
                "INSERT INTO ops(id, session_id, project_id, kind, status, spec_enc, created_at, reverses)"
                " VALUES(?,?,?,?,?,?,?,?)",
                (
                    plan.id,
                    plan.session_id,
                    plan.project_id,
                    plan.kind,
                    plan.status,
                    self.crypto.seal(json.dumps(spec).encode(), f"ops.spec:{plan.id}".encode()),
                    plan.created_at,
                    plan.reverses,
                ),
            )
            self.db.executemany(
                "INSERT INTO op_rows(op_id, seq, action, status, body_enc, expect_blob, target_blob)"
                " VALUES(?,?,?,?,?,?,?)",
                [
                    (
                        plan.id,
                        row.seq,
                        row.action,
                        row.status,
                        self.crypto.seal(
                            json.dumps(self._row_body(row)).encode("utf-8", "surrogateescape"),
                            f"op_rows.body:{plan.id}:{row.seq}".encode(),
                        ),
                        row.expect.blob if row.expect else None,
                        row.target.blob if row.target else None,
                    )
                    for row in plan.rows
                ],
            )

    @staticmethod
    def _row_body(row: PlanRow) -> dict[str, Any]:
        return {
            "path": row.path,
            "reason": message_to_json(row.reason),
            "expect": state_to_json(row.expect),
            "target": state_to_json(row.target),
            "change_ids": list(row.change_ids),
            "turn_id": row.turn_id,
            "force_only": row.force_only,
            "conflict": row.conflict,
            "warnings": [message_to_json(warning) for warning in row.warnings],
            "trash_name": row.trash_name,
            "ref": [row.ref.name, row.ref.expect, row.ref.target] if row.ref else None,
            "outside": row.outside,
            "unmark": row.unmark,
        }

    def load_plan(self, op_id: OpId) -> Plan:
        op = self.db.one(
            "SELECT id, session_id, project_id, kind, status, spec_enc, created_at, reverses FROM ops WHERE id=?",
            (op_id,),
        )
        if op is None:
            raise UsageError(f"no operation {op_id}")
        what = f"operation {short_id(op_id)}"
        _one_of(op[3], _OP_KINDS, what)
        _one_of(op[4], _OP_STATUSES, what)
        spec = self._open_json(op[5], f"ops.spec:{op_id}")
        rows: list[PlanRow] = []
        for seq, action, status, body_enc, result_enc in self.db.all(
            "SELECT seq, action, status, body_enc, result_enc FROM op_rows WHERE op_id=? ORDER BY seq",
            (op_id,),
        ):
            body = self._open_json(body_enc, f"op_rows.body:{op_id}:{seq}")
            note = message_from_json(self._open_json_or_none(result_enc, f"op_rows.result:{op_id}:{seq}"))
            _one_of(action, _ROW_ACTIONS, f"row {seq} of {what}")
            _one_of(status, _ROW_STATUSES, f"row {seq} of {what}")
            rows.append(
                PlanRow(
                    seq=seq,
                    action=action,
                    path=RelPath(body["path"]),
                    reason=message_from_json(body["reason"]),
                    expect=state_from_json(body["expect"]),
                    target=state_from_json(body["target"]),
                    change_ids=tuple(body["change_ids"]),
                    turn_id=body["turn_id"],
                    force_only=body["force_only"],
                    conflict=body["conflict"],
                    warnings=tuple(_message(warning) for warning in body["warnings"]),
                    trash_name=body["trash_name"],
                    status=status,
                    note=note,
                    ref=RefUpdate(*body["ref"]) if body.get("ref") else None,
                    outside=body.get("outside", False),
                    unmark=body.get("unmark", False),
                )
            )
        return Plan(
            id=OpId(op[0]),
            kind=op[3],
            session_id=SessionId(op[1]),
            project_id=ProjectId(op[2]),
            rows=tuple(rows),
            sections=tuple(PlanSection(TurnId(t) if t else None, _message(title)) for t, title in spec["sections"]),
            turn_ids=tuple(TurnId(t) for t in spec["turn_ids"]),
            call_id=CallId(spec["call_id"]) if spec["call_id"] else None,
            force=spec["force"],
            status=op[4],
            created_at=op[6],
            notes=tuple(_message(note) for note in spec.get("notes", ())),
            head_from=spec.get("head_from"),
            head_to=spec.get("head_to"),
            moves_head=spec.get("moves_head", False),
            reverses=op[7],
            resend_turn=spec.get("resend_turn"),
            resend_mode=spec.get("resend_mode"),
        )

    def set_op_status(self, op_id: OpId, status: OpStatus, *, expect: OpStatus | None = None) -> bool:
        """Move an operation to *status*; with *expect*, only from that status (compare-and-swap)."""
        column = {"applying": "applied_at", "done": "finished_at", "planned": "created_at"}[status]
        if expect is None:
            cursor = self.db.execute(f"UPDATE ops SET status=?, {column}=? WHERE id=?", (status, self.now(), op_id))
        else:
            cursor = self.db.execute(
                f"UPDATE ops SET status=?, {column}=? WHERE id=? AND status=?",
                (status, self.now(), op_id, expect),
            )
        return cursor.rowcount == 1

    def set_row_status(self, op_id: OpId, seq: int, status: RowStatus, note: Message | None) -> None:
        result = json.dumps(message_to_json(note)) if note is not None else None
        self.db.execute(
            "UPDATE op_rows SET status=?, result_enc=? WHERE op_id=? AND seq=?",
            (status, self._seal(result, f"op_rows.result:{op_id}:{seq}"), op_id, seq),
        )

    def ops_of_session(self, session_id: SessionId) -> list[tuple[OpId, str, str, str | None, str | None]]:
        """The session's applied (or applying) operations, oldest first: id, kind, status, reverses, taken back by."""
        rows = self.db.all(
            "SELECT id, kind, status, reverses, taken_back_by FROM ops WHERE session_id=? AND status<>'planned'"
            " ORDER BY id",
            (session_id,),
        )
        return [(OpId(r[0]), r[1], r[2], r[3], r[4]) for r in rows]

    def newest_op_to_take_back(self, session_id: SessionId) -> OpId | None:
        """The newest applied operation of the session that changed something and is not taken back yet."""
        row = self.db.one(
            "SELECT ops.id FROM ops WHERE ops.session_id=? AND ops.status='done' AND ops.taken_back_by IS NULL"
            " AND EXISTS (SELECT 1 FROM op_rows WHERE op_rows.op_id = ops.id AND op_rows.status='done')"
            " ORDER BY ops.id DESC LIMIT 1",
            (session_id,),
        )
        return OpId(row[0]) if row else None

    def set_taken_back(self, op_id: OpId, by: OpId) -> None:
        self.db.execute("UPDATE ops SET taken_back_by=? WHERE id=?", (by, op_id))

    def set_head_if_equals(self, session_id: SessionId, old: TurnId | None, new: TurnId | None) -> bool:
        """Move the session's head from *old* to *new*; False (and nothing changed) when it is not at *old*."""
        cursor = self.db.execute("UPDATE sessions SET head=? WHERE id=? AND head IS ?", (new, session_id, old))
        return cursor.rowcount == 1

    def drop_calls_of_turns(self, turn_ids: Sequence[TurnId]) -> None:
        """Edit and resend: delete the calls of *turn_ids* with their changes (their copies go at the next gc)."""
        for turn_id in turn_ids:
            self.db.execute("DELETE FROM changes WHERE call_id IN (SELECT id FROM calls WHERE turn_id=?)", (turn_id,))
            self.db.execute("DELETE FROM calls WHERE turn_id=?", (turn_id,))
            self.db.execute("DELETE FROM ref_changes WHERE turn_id=?", (turn_id,))
            self.db.execute("UPDATE turns SET resent=1 WHERE id=?", (turn_id,))

    # -- busy marks -------------------------------------------------------------------------

    def add_busy_mark(self, session_id: SessionId, reason: str, pid: int | None, pid_start: int | None) -> str:
        mark_id = self.new_id()
        with self.transaction():
            self.db.execute(
                "INSERT INTO busy_marks(id, session_id, reason_enc, pid, pid_start, created_at) VALUES(?,?,?,?,?,?)",
                (mark_id, session_id, self._seal(reason, f"busy_marks.reason:{mark_id}"), pid, pid_start, self.now()),
            )
        return mark_id

    def busy_marks(self, session_id: SessionId) -> list[tuple[str, str, int | None, int | None]]:
        """The session's busy marks: id, reason, holder pid and its start time."""
        rows = self.db.all(
            "SELECT id, reason_enc, pid, pid_start FROM busy_marks WHERE session_id=? ORDER BY created_at",
            (session_id,),
        )
        return [(row[0], self._open(row[1], f"busy_marks.reason:{row[0]}") or "", row[2], row[3]) for row in rows]

    def remove_busy_mark(self, mark_id: str) -> None:
        self.db.execute("DELETE FROM busy_marks WHERE id=?", (mark_id,))

    # -- notices to the assistant ------------------------------------------------------------

    def add_notices(self, session_id: SessionId, items: Sequence[tuple[str, str]]) -> None:
        """Queue notices (path, text) for the assistant, and require it to read each path again."""
        for path, text in items:
            cursor = self.db.execute(
                "INSERT INTO notices(session_id, body_enc, created_at) VALUES(?, X'00', ?)", (session_id, self.now())
            )
            notice_id = cursor.lastrowid
            body = self.crypto.seal(
                json.dumps([path, text]).encode("utf-8", "surrogateescape"), f"notices:{notice_id}".encode()
            )
            self.db.execute("UPDATE notices SET body_enc=? WHERE id=?", (body, notice_id))
            self.db.execute(
                "INSERT OR IGNORE INTO must_read(session_id, path_id) VALUES(?,?)",
                (session_id, self.path_id(session_id, path)),
            )

    def take_notices(self, session_id: SessionId) -> list[tuple[str, str]]:
        """The session's pending notices, each delivered once (and a notice said twice, once)."""
        with self.transaction():
            rows = self.db.all(
                "SELECT id, body_enc FROM notices WHERE session_id=? AND delivered=0 ORDER BY id", (session_id,)
            )
            self.db.executemany("UPDATE notices SET delivered=1 WHERE id=?", [(row[0],) for row in rows])
        items = []
        for notice_id, body in rows:
            path, text = self.open_notice(notice_id, body)
            if (path, text) not in items:
                items.append((path, text))
        return items

    def open_notice(self, notice_id: int, body: bytes) -> tuple[str, str]:
        """A notice's path and text, from its sealed row."""
        path, text = self._open_json(body, f"notices:{notice_id}")
        return str(path), str(text)

    def must_read(self, session_id: SessionId, path: str) -> bool:
        row = self.db.one(
            "SELECT 1 FROM must_read WHERE session_id=? AND path_id=?", (session_id, self.path_id(session_id, path))
        )
        return row is not None

    def mark_read(self, session_id: SessionId, path: str) -> None:
        self.db.execute(
            "DELETE FROM must_read WHERE session_id=? AND path_id=?", (session_id, self.path_id(session_id, path))
        )

    def op_evicted(self, op_id: OpId) -> bool:
        """Whether the store cap dropped the copies of operation *op_id*."""
        row = self.db.one("SELECT evicted FROM ops WHERE id=?", (op_id,))
        return bool(row and row[0])

    def ops_in_status(self, session_id: SessionId, status: OpStatus) -> list[OpId]:
        rows = self.db.all("SELECT id FROM ops WHERE session_id=? AND status=? ORDER BY id", (session_id, status))
        return [OpId(row[0]) for row in rows]

    # -- tree snapshots (the stat cache) ----------------------------------------------------

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
        once the command has ended.
        """
        snapshot_id = self.new_id()
        with self.transaction():
            self.db.execute(
                "INSERT INTO snapshots(id, project_id, purpose, created_at, entries, data_enc, watch_token,"
                " content_bytes, base_id) VALUES(?,?,?,?,?,?,?,?,?)",
                (
                    snapshot_id,
                    project_id,
                    purpose,
                    self.now(),
                    entries,
                    self.crypto.seal(data, f"snapshots:{snapshot_id}".encode()),
                    watch_token,
                    content_bytes,
                    base_id,
                ),
            )
            # A base still protected by a row deleted here goes with the next save.
            self.db.execute(
                "DELETE FROM snapshots WHERE project_id=? AND id<>? AND (purpose<>'cache' OR ?='cache')"
                " AND id NOT IN (SELECT snapshot_id FROM calls WHERE status='running' AND snapshot_id IS NOT NULL)"
                " AND id NOT IN (SELECT baseline_id FROM calls WHERE status='running' AND baseline_id IS NOT NULL)"
                " AND id NOT IN (SELECT base_id FROM snapshots WHERE project_id=? AND base_id IS NOT NULL)",
                (project_id, snapshot_id, purpose, project_id),
            )
        return snapshot_id

    def snapshot(self, snapshot_id: str) -> bytes | None:
        row = self.db.one("SELECT data_enc FROM snapshots WHERE id=?", (snapshot_id,))
        return None if row is None else self._open_bytes(row[0], f"snapshots:{snapshot_id}")

    def latest_snapshot(self, project_id: ProjectId) -> CachedSnapshot | None:
        """The project's stat cache, if it has one."""
        row = self.db.one(
            "SELECT id, data_enc, watch_token, content_bytes FROM snapshots WHERE project_id=? AND purpose='cache'"
            " ORDER BY created_at DESC, id DESC LIMIT 1",
            (project_id,),
        )
        if row is None:
            return None
        return CachedSnapshot(row[0], self._open_bytes(row[1], f"snapshots:{row[0]}"), row[2], row[3])

    def cache_content_bytes(self, project_id: ProjectId) -> int | None:
        """What the project's stat cache's copies hold, without reading it (None: not known)."""
        row = self.db.one(
            "SELECT content_bytes FROM snapshots WHERE project_id=? AND purpose='cache'"
            " ORDER BY created_at DESC, id DESC LIMIT 1",
            (project_id,),
        )
        return None if row is None else row[0]

    def put_content(self, chunks: Iterable[bytes]) -> tuple[BlobId, int]:
        return self.blobs.put_chunks(chunks)


__all__ = ["DB_NAME", "CachedSnapshot", "Store", "state_from_json", "state_to_json"]

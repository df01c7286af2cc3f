"""The PostgreSQL connection: the queries' ``?`` as psycopg's placeholders, the write locks, and busy as busy.

``transaction()`` takes a transaction-scoped advisory lock before its first
statement, as SQLite's ``BEGIN IMMEDIATE`` takes the write lock: a check and
the write that depends on it are one step across every process on every
host, and reads see everything committed before it. The database's write
lock is taken exclusive by a transaction that may touch anything; a
transaction of one project's records (``project=``: a file tool's call)
takes it shared, and that project's lock exclusive: the calls of different
projects (the sessions of a fleet) commit side by side, as they could not
on one write lock, while each project's records still see one writer at a
time (the order of its calls is the order they were written in) and
anything unscoped (``gc``, the cap's eviction, an undo's plan) still waits
for every writer. Reads outside a transaction run as single statements. A process
that keeps connections (an MCP or web server opening a store per request)
takes them from a pool per database.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import threading
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import psycopg
import psycopg.errors
from psycopg.adapt import Loader

from turnback.catalog import Message
from turnback.errors import BusyError, StoreError
from turnback.fsio import STEPS
from turnback.paths import shown_location
from turnback.store.postgres.schema import MIGRATIONS
from turnback.store.sql import Params, migrate_schema

LOCK_TIMEOUT_MS = 60_000  # as long as SQLite's busy timeout: then "busy", never a wait without end
CONNECT_TIMEOUT_S = 10
# The advisory locks' namespace ("turn" in ASCII); the second key is 0 for the write lock, a session's hash else.
LOCK_SPACE = 0x7475726E
PROJECT_LOCK_SPACE = 0x7475726F  # a project's write lock: the second key is a hash of its id
WRITE_LOCK = 0
SCHEMA_LOCK = 1  # held while the tables are made or migrated
CHANGES_CHANNEL = "turnback_changes"  # every write transaction notifies it (LISTEN/NOTIFY): live views wake on it


class Row(dict[str, Any]):
    """A row's columns by name, and by position (as SQLite's rows are)."""

    def __getitem__(self, key: str | int) -> Any:
        if isinstance(key, int):
            return list(self.values())[key]
        return super().__getitem__(key)


def _rows(cursor: psycopg.Cursor[Any]) -> Callable[[Sequence[Any]], Row]:
    names = [column.name for column in cursor.description or ()]
    return lambda values: Row(zip(names, values, strict=True))


Connection = psycopg.Connection[Row]


class _WholeNumber(Loader):
    """``SUM`` of a ``BIGINT`` column is a ``numeric``; every number the store keeps is whole, as in SQLite."""

    def load(self, data: Any) -> int:
        return int(Decimal(bytes(data).decode("ascii")))


@lru_cache(maxsize=256)
def _placeholders(sql: str) -> str:
    """The queries' ``?`` as psycopg's ``%s`` (no query holds a ``?`` or ``%`` of its own in a literal)."""
    return sql.replace("%", "%%").replace("?", "%s")


def _project_lock_key(project: str) -> int:
    """A project's lock key: 32 bits of a hash of its id (signed, as the server's advisory lock keys are)."""
    return int.from_bytes(hashlib.blake2b(project.encode(), digest_size=4).digest(), "big", signed=True)


def _said(exc: Exception) -> str:
    """What the server or libpq said, on one line (its messages span several, with tabs)."""
    return " ".join(str(exc).split())


def _map_error(exc: psycopg.Error) -> Exception:
    if isinstance(
        exc, psycopg.errors.LockNotAvailable | psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure
    ):
        return BusyError(Message("store_locked"))
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return StoreError(Message("pg_read_only"))
    return StoreError(Message("store_database_failed", reason=_said(exc)))


# The server asks a silent host's connection after a minute, then every 10 s, 6 times: a host that died (no FIN
# sent) loses its connection, and the session locks it held, in some two minutes rather than TCP's two hours.
KEEPALIVE_SETTINGS = "SET tcp_keepalives_idle = 60; SET tcp_keepalives_interval = 10; SET tcp_keepalives_count = 6"


def _configure(conn: Connection) -> None:
    conn.adapters.register_loader("numeric", _WholeNumber)
    conn.execute(f"SET lock_timeout = {LOCK_TIMEOUT_MS}; {KEEPALIVE_SETTINGS}")


if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

_POOLS: dict[str, ConnectionPool[Connection]] = {}
_OPENED: set[str] = set()  # the databases this process opened a store of: the second time, from a pool
_POOLS_LOCK = threading.Lock()


def _pool(url: str) -> ConnectionPool[Connection] | None:
    """The pool of *url*'s connections, once this process opens a second store there (a server that opens one
    per request); a command that opens one store connects once, without a pool's threads."""
    with _POOLS_LOCK:
        if url not in _OPENED:
            _OPENED.add(url)
            return None
        pool = _POOLS.get(url)
        if pool is None:
            from psycopg_pool import ConnectionPool

            if not _POOLS:
                atexit.register(close_pools)
            pool = ConnectionPool(
                url,
                min_size=1,
                max_size=16,
                kwargs={"autocommit": True, "row_factory": _rows, "connect_timeout": CONNECT_TIMEOUT_S},
                configure=_configure,
                connection_class=psycopg.Connection,
                open=False,
                name="turnback",
            )
            pool.open(wait=False)
            _POOLS[url] = pool
        return pool


def close_pools() -> None:
    """Close this process's connection pools, ending their threads (at exit; a forking scan of a tree runs in
    one process while any thread runs); a store opened later connects again."""
    with _POOLS_LOCK:
        for pool in _POOLS.values():
            pool.close(timeout=1)
        _POOLS.clear()


class PgCursor:
    def __init__(self, rowcount: int):
        self._rowcount = rowcount

    @property
    def rowcount(self) -> int:
        return self._rowcount


class PgDatabase:
    """One connection to the store's database (taken from the pool of its URL), in autocommit between
    transactions."""

    def __init__(self, url: str):
        self.url = url
        self._pool = _pool(url)
        try:
            self._conn = self._connect()
        except psycopg.Error as exc:
            raise StoreError(Message("pg_unreachable", url=shown_location(url), reason=_said(exc))) from exc
        self._depth = 0
        self._locked_sessions = 0  # session locks held: they live in this connection, never in another
        self._listener: Connection | None = None

    def wait_for_change(self, timeout_s: float) -> bool:
        """Wait up to *timeout_s* for a write transaction of any host to commit; whether one did."""
        try:
            if self._listener is None:
                self._listener = psycopg.connect(
                    self.url, autocommit=True, row_factory=_rows, connect_timeout=CONNECT_TIMEOUT_S
                )
                self._listener.execute(f"LISTEN {CHANGES_CHANNEL}")
            return any(True for _ in self._listener.notifies(timeout=timeout_s, stop_after=1))
        except psycopg.Error as exc:
            raise _map_error(exc) from exc

    def _connect(self) -> Connection:
        if self._pool is None:
            conn = psycopg.connect(self.url, autocommit=True, row_factory=_rows, connect_timeout=CONNECT_TIMEOUT_S)
            _configure(conn)
            return conn
        from psycopg_pool import PoolTimeout

        try:
            return self._pool.getconn(timeout=CONNECT_TIMEOUT_S)
        except PoolTimeout as exc:
            raise psycopg.OperationalError(str(exc)) from exc

    def _reconnect_if_lost(self) -> None:
        """A connection the server dropped (a restart, a network cut) is replaced before the next statement
        outside a transaction; the statement that met the loss failed, and nothing it began was committed.
        Never while this connection holds a session's lock: the lock went with it."""
        if self._depth or not self._conn.broken:
            return
        if self._locked_sessions:
            raise StoreError(Message("pg_connection_lost_while_locked"))
        if self._pool is not None:
            self._pool.putconn(self._conn)  # the pool discards a broken connection
        else:
            self._conn.close()
        try:
            self._conn = self._connect()
        except psycopg.Error as exc:
            raise StoreError(Message("pg_unreachable", url=shown_location(self.url), reason=_said(exc))) from exc

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
        if self._pool is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.execute("SELECT pg_advisory_unlock_all()")
            self._pool.putconn(self._conn)
        else:
            self._conn.close()

    def truncate_log(self) -> None:
        """PostgreSQL recycles its own write-ahead log: nothing to give back here."""

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    @contextlib.contextmanager
    def transaction(self, *, durable: bool = True, project: str | None = None) -> Iterator[None]:
        """One write transaction, the database's write lock taken first (shared, and *project*'s exclusive,
        for one project's records); nested calls join the outer one, whatever they say.

        ``durable=False`` commits without waiting for the server's log to reach its disk
        (``synchronous_commit=off``): atomic, possibly lost if the server's machine loses power. The
        statements that begin it go in one round trip, as do the notification and the commit.
        """
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._reconnect_if_lost()
        begin = ["BEGIN"]
        if not durable:
            begin.append("SET LOCAL synchronous_commit = off")
        if project is None:
            begin.append(f"SELECT pg_advisory_xact_lock({LOCK_SPACE}, {WRITE_LOCK})")
        else:  # the write lock first, always: no two transactions wait for each other's second lock
            begin.append(f"SELECT pg_advisory_xact_lock_shared({LOCK_SPACE}, {WRITE_LOCK})")
            begin.append(f"SELECT pg_advisory_xact_lock({PROJECT_LOCK_SPACE}, {_project_lock_key(project)})")
        try:
            self._conn.execute("; ".join(begin))
        except psycopg.Error as exc:
            self._rollback()
            raise _map_error(exc) from exc
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            self._rollback()
            raise
        self._depth = 0
        try:
            self._conn.execute(f"SELECT pg_notify('{CHANGES_CHANNEL}', ''); COMMIT")  # sent when the commit is
        except psycopg.Error as exc:
            self._rollback()
            raise _map_error(exc) from exc
        STEPS.committed()

    def _rollback(self) -> None:
        with contextlib.suppress(psycopg.Error):
            self._conn.execute("ROLLBACK")

    def _cursor(self, sql: str, params: Params) -> psycopg.Cursor[Row]:
        self._reconnect_if_lost()
        try:
            if not params:  # a statement without parameters goes as written
                return self._conn.execute(sql)
            return self._conn.execute(_placeholders(sql), params)
        except psycopg.Error as exc:
            raise _map_error(exc) from exc

    def execute(self, sql: str, params: Params = ()) -> PgCursor:
        return PgCursor(self._cursor(sql, params).rowcount)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        self._reconnect_if_lost()
        try:
            with self._conn.cursor() as cursor:
                cursor.executemany(_placeholders(sql), rows)
        except psycopg.Error as exc:
            raise _map_error(exc) from exc

    def one(self, sql: str, params: Params = ()) -> Row | None:
        try:
            return self._cursor(sql, params).fetchone()
        except psycopg.Error as exc:
            raise _map_error(exc) from exc

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        try:
            return self._cursor(sql, params).fetchall()
        except psycopg.Error as exc:
            raise _map_error(exc) from exc

    # -- locks that outlive a transaction ---------------------------------------------------------

    def try_lock_session(self, session_id: str) -> bool:
        """Take the session's lock for this connection (until :meth:`unlock_session`); False when another holds it."""
        row = self.one("SELECT pg_try_advisory_lock(?, hashtext(?)) AS taken", (LOCK_SPACE, session_id))
        taken = bool(row and row["taken"])
        self._locked_sessions += taken
        return taken

    def unlock_session(self, session_id: str) -> None:
        self._locked_sessions -= 1
        if not self._conn.broken:  # a lost connection took its locks with it
            self.execute("SELECT pg_advisory_unlock(?, hashtext(?))", (LOCK_SPACE, session_id))

    # -- the schema ---------------------------------------------------------------------------------

    def schema_version(self) -> int:
        row = self.one("SELECT to_regclass('meta') IS NOT NULL AS present")
        if not row or not row["present"]:
            return 0
        version = self.one("SELECT value FROM meta WHERE key='schema_version'")
        return int(bytes(version["value"])) if version else 0

    @contextlib.contextmanager
    def schema_lock(self) -> Iterator[None]:
        """Held while the schema is checked and migrated. Taken outside any transaction, so the transaction
        begun after it sees the tables another process made meanwhile (a transaction that waited for a lock
        inside it may not)."""
        self.execute("SELECT pg_advisory_lock(?, ?)", (LOCK_SPACE, SCHEMA_LOCK))
        try:
            yield
        finally:
            self.execute("SELECT pg_advisory_unlock(?, ?)", (LOCK_SPACE, SCHEMA_LOCK))

    def migrate(self) -> None:
        """Bring the schema up to this version of turnback (call inside ``schema_lock()`` and ``transaction()``)."""
        migrate_schema(self, self.schema_version(), MIGRATIONS, shown_location(self.url))


__all__ = ["PgDatabase", "close_pools"]

"""The SQLite connection: WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE`` and a busy timeout.

``transaction()`` takes the write lock before the first read, so a check and
the write that depends on it are one atomic step even with several
processes on one store. SQLite's "database is locked" after the timeout
becomes :class:`BusyError` here, where it is met.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any

from turnback.catalog import Message
from turnback.errors import BusyError, StoreError
from turnback.fsio import STEPS
from turnback.store.schema import MIGRATIONS
from turnback.store.sql import migrate_schema

BUSY_TIMEOUT_MS = 60_000
WAL_LIMIT_BYTES = 4 << 20


DAMAGED_READ_ONLY = Message("store_damaged_read_only")


# SQLite's primary result codes (sqlite.org/rescode.html); an extended code keeps its primary in the low byte.
_BUSY, _LOCKED, _READONLY, _CORRUPT, _NOTADB = 5, 6, 8, 11, 26


def _map_error(exc: sqlite3.Error, read_only_reason: Message = DAMAGED_READ_ONLY) -> Exception:
    """What an SQLite error means for turnback, decided by SQLite's result code, never by its text (``no such
    table: locked_rows`` is no lock). An error Python raises itself has no code: the database failed."""
    text = str(exc)
    primary = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if primary in (_BUSY, _LOCKED):
        return BusyError(Message("store_locked"))
    if primary == _READONLY:
        return StoreError(read_only_reason)
    if primary in (_CORRUPT, _NOTADB):
        return StoreError(Message("store_database_damaged", reason=text))
    return StoreError(Message("store_database_failed", reason=text))


def _read_only_uri(path: str) -> str:
    """The URI that opens *path* for reading only.

    A WAL database opened read-only needs its ``-shm`` file, or a folder it
    can create it in (sqlite.org/wal.html, "Read-Only Databases"). Where it
    has neither (a read-only mount, a folder it may not write) and no ``-wal``
    holds commits not yet in the database, ``immutable=1`` reads the file as
    it is, without the shared memory.
    """
    uri = f"file:{urllib.parse.quote(path)}?mode=ro"
    folder_writable = os.access(os.path.dirname(path) or ".", os.W_OK)
    if not folder_writable and not os.access(path + "-shm", os.F_OK) and not _size(path + "-wal"):
        uri += "&immutable=1"
    return uri


def _file_id(path: str) -> tuple[int, int] | None:
    """The device and inode of the non-empty file at *path*; None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if st.st_size else None


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class Database:
    def __init__(self, path: str, *, read_only: bool = False, read_only_reason: Message = DAMAGED_READ_ONLY):
        """*read_only_reason*: what a write to a read-only database says (why it is open read-only)."""
        self.path = path
        self.read_only = read_only
        self.read_only_reason = read_only_reason
        try:
            if read_only:
                self._conn = sqlite3.connect(
                    _read_only_uri(path), uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000
                )
            else:
                self._conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
            self._conn.row_factory = sqlite3.Row  # every reader names the columns it reads
            self._conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            if not read_only:
                self._conn.execute("PRAGMA journal_mode=WAL")
                # A first snapshot writes hundreds of MB through the WAL; without a limit the file keeps that size.
                self._conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise _map_error(exc, self.read_only_reason) from exc
        self._depth = 0
        self.file_id = _file_id(path)  # the file opened (connected first: SQLite made it, when it was not there)

    def is_same_file(self) -> bool:
        """Whether *path* still names the file this database has open, and it is not empty (a database deleted, or
        made again or emptied in its place, is another: a new opening says what became of it)."""
        return self.file_id is not None and _file_id(self.path) == self.file_id

    def close(self) -> None:
        self._conn.close()

    def truncate_log(self) -> None:
        """Write the WAL into the database and empty its file (after a large write), unless a reader holds it."""
        with contextlib.suppress(StoreError):
            self.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    @contextlib.contextmanager
    def transaction(self, *, durable: bool = True, project: str | None = None) -> Iterator[None]:
        """One write transaction (``BEGIN IMMEDIATE``); nested calls join the outer one. *project* changes
        nothing: SQLite has one writer at a time, whatever it writes.

        ``durable=False`` commits with ``synchronous=NORMAL``: the commit is
        atomic and consistent but may be lost on power failure (the next
        durable commit makes it durable). Only for records whose loss leaves a
        state turnback already handles.
        """
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        try:
            if not durable:
                self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise _map_error(exc, self.read_only_reason) from exc
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
                if not durable:
                    self._conn.execute("PRAGMA synchronous=FULL")
            raise
        self._depth = 0
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            raise _map_error(exc, self.read_only_reason) from exc
        finally:
            if not durable:
                self._conn.execute("PRAGMA synchronous=FULL")
        STEPS.committed()

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise _map_error(exc, self.read_only_reason) from exc

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        try:
            self._conn.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise _map_error(exc, self.read_only_reason) from exc

    def one(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> sqlite3.Row | None:
        cursor = self.execute(sql, params)
        try:  # SQLite reads most pages while stepping, not when the statement starts: damage shows up here
            row: sqlite3.Row | None = cursor.fetchone()
            return row
        except sqlite3.Error as exc:
            raise _map_error(exc, self.read_only_reason) from exc

    def all(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        cursor = self.execute(sql, params)
        try:
            rows: list[sqlite3.Row] = cursor.fetchall()
            return rows
        except sqlite3.Error as exc:
            raise _map_error(exc, self.read_only_reason) from exc

    def schema_version(self) -> int:
        has_meta = self.one("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'")
        if not has_meta:
            return 0
        row = self.one("SELECT value FROM meta WHERE key='schema_version'")
        return int(row["value"]) if row else 0

    def migrate(self) -> None:
        """Bring the schema up to this version of turnback (call inside ``transaction()``)."""
        migrate_schema(self, self.schema_version(), MIGRATIONS, self.path)


__all__ = ["Database"]

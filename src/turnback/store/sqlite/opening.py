"""Opening a store folder: the database, the key, a damaged or read-only database, the disk's reserve.

Nothing here reads the records; the query classes do, once the store is open.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable
from typing import NamedTuple, Self

from turnback.catalog import Message
from turnback.errors import StoreError
from turnback.fsio import ensure_private_dir
from turnback.model import IdSource, SessionId
from turnback.store import keys
from turnback.store.crypto import Crypto, Keys
from turnback.store.db import DAMAGED_READ_ONLY, Database
from turnback.store.schema import SCHEMA_VERSION
from turnback.store.sql import SqlDatabase
from turnback.store.sqlite.base import TRASH_DIR, SqliteRecords

DB_NAME = "turnback.db"
_README = """This folder is turnback's store: an encrypted database of the earlier
content of files that AI agents changed, and the trash of undo operations.
Do not edit it by hand. `turnback verify` checks it; `turnback gc` compacts it.
trash/ holds plain copies of files that undo operations displaced.
"""

RESERVE_NAME = "reserve"
RESERVE_BYTES = 4 << 20  # room SQLite needs to end a turn on a full disk: its shared-memory file, a few WAL frames
CHANGE_POLL_S = 0.1  # how often wait_for_change looks: SQLite tells no one of a commit


def _disk_full(home: str) -> bool:
    try:
        st = os.statvfs(home)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < RESERVE_BYTES


def _keep_reserve(home: str) -> None:
    """Set aside ``RESERVE_BYTES`` in the store folder while the disk has plenty, so a full disk can still
    end a turn (:meth:`StoreOpening.use_reserve`). Best effort: without room, nothing is set aside."""
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
    return error.code == "store_database_damaged"


def _size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return None


def _refuse_lost_database(home: str) -> None:
    """A store made before (it has its README) whose database is now gone or empty lost it: never start afresh
    over it, which would drop its history without a word (and take a log left beside it for the new file's)."""
    if not os.path.isfile(os.path.join(home, "README.txt")):
        return
    db_path = os.path.join(home, DB_NAME)
    size = _size(db_path)
    trash = os.path.join(home, TRASH_DIR)
    if size is None:
        raise StoreError(Message("store_database_missing", home=home, database=db_path, trash=trash))
    if size == 0 and not _size(db_path + "-wal"):
        raise StoreError(Message("store_database_emptied", home=home, trash=trash))


def _key_check(db: Database) -> bytes | None:
    row = db.one("SELECT value FROM meta WHERE key='key_check'")
    return None if row is None else bytes(row["value"])


def _read_only_reason(home: str) -> Message | None:
    """Why the store in *home* can only be read (a read-only mount, a folder or database it may not write);
    None when it can be written, or has no database yet."""
    db_path = os.path.join(home, DB_NAME)
    if not os.path.isfile(db_path):
        return None
    if os.access(home, os.W_OK) and os.access(db_path, os.W_OK):
        return None
    if os.statvfs(home).f_flag & os.ST_RDONLY:
        why = Message("store_on_read_only_mount")
    else:
        why = Message("store_not_writable")
    return Message("store_read_only", home=home, why=why)


class _Opened(NamedTuple):
    db: Database
    crypto: Crypto


def store_meta(db: SqlDatabase) -> dict[str, bytes]:
    """The store's ``meta``: its id, salt, key source, key check, schema version, dictionary."""
    return {row["key"]: bytes(row["value"]) for row in db.all("SELECT key, value FROM meta")}


def existing_crypto(home: str, meta: dict[str, bytes], key_secret: str | None) -> Crypto:
    """The keys of a store set up before, checked against the value sealed when it was made."""
    master = keys.master_for_existing_store(
        home, keys.key_source(meta["key_source"]), meta["salt"], meta["store_id"].decode(), key_secret
    )
    crypto = Crypto(Keys.from_master(master))
    crypto.verify_key_check(meta["key_check"])
    return crypto


def new_crypto(db: SqlDatabase, home: str, key_secret: str | None, *, try_keyring: bool) -> Crypto:
    """The keys of a store made now: a new id and salt, the key from its source, the check value; kept in meta."""
    store_id = IdSource().new()
    salt = os.urandom(16)
    master, source = keys.master_for_new_store(home, salt, store_id, key_secret, try_keyring=try_keyring)
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
    return crypto


def _open_read_only(home: str, reason: Message, key_secret: str | None) -> _Opened:
    """The database opened for reading only; a write then fails with *reason*."""
    db = Database(os.path.join(home, DB_NAME), read_only=True, read_only_reason=reason)
    try:
        crypto = existing_crypto(home, store_meta(db), key_secret)
    except KeyError as exc:
        db.close()
        raise StoreError(Message("store_key_record_missing", home=home, record=str(exc))) from exc
    except BaseException:
        db.close()
        raise
    return _Opened(db, crypto)


def _open_writable(home: str, key_secret: str | None, *, try_keyring: bool) -> _Opened:
    db = Database(os.path.join(home, DB_NAME))
    try:
        # A store set up by this version is only read here: a process holding the write lock (a long write,
        # or one stopped mid-way) must not keep every other command from opening the store.
        ready = db.schema_version() == SCHEMA_VERSION and db.one("SELECT 1 FROM meta WHERE key='key_check'")
        with contextlib.nullcontext() if ready else db.transaction():
            db.migrate()
            meta = store_meta(db)
            if "key_check" in meta:
                return _Opened(db, existing_crypto(home, meta, key_secret))
            crypto = new_crypto(db, home, key_secret, try_keyring=try_keyring)
            readme = os.path.join(home, "README.txt")
            if not os.path.lexists(readme):
                with open(readme, "w", encoding="utf-8") as handle:
                    handle.write(_README)
            return _Opened(db, crypto)
    except BaseException:
        db.close()
        raise


class StoreOpening(SqliteRecords):
    """Opening and closing a store folder, and the space it keeps aside on its disk."""

    database_url: str | None = None  # the records are in the folder's own file
    database: Database  # ``db``, as the SQLite database it is
    key_check: bytes | None  # the keys' check value the store was opened with (another: the keys were replaced)

    @classmethod
    def open(
        cls,
        home: str,
        *,
        key_secret: str | None = None,
        try_keyring: bool = True,
        clock: Callable[[], int] = time.time_ns,
        ids: IdSource | None = None,
    ) -> Self:
        """Open the store in *home*, creating it (folder, database, key) on first use.

        A damaged database that SQLite can still read is opened read-only, so
        ``verify`` can say what is damaged and what is intact still reverts
        by hand; nothing is ever deleted or rebuilt over it.
        """
        home = os.path.abspath(home)
        ensure_private_dir(home)
        _refuse_lost_database(home)
        made = functools.partial(cls._made, home, key_secret=key_secret, clock=clock, ids=ids)
        read_only = _read_only_reason(home)
        if read_only is not None:
            return made(_open_read_only(home, read_only, key_secret))
        try:
            try:
                opened = _open_writable(home, key_secret, try_keyring=try_keyring)
                released = False
            except StoreError:
                # SQLite cannot even open its shared memory on a full disk: free the reserve and try once more.
                if not (_disk_full(home) and _release_reserve(home)):
                    raise
                opened = _open_writable(home, key_secret, try_keyring=try_keyring)
                released = True
            if not released:
                _keep_reserve(home)
            return made(opened, released=released)
        except StoreError as exc:
            if not _damaged(exc) or not os.path.isfile(os.path.join(home, DB_NAME)):
                raise
            unreadable = StoreError(
                Message(
                    "store_unreadable",
                    home=home,
                    reason=exc.message.params["reason"],
                    trash=os.path.join(home, TRASH_DIR),
                )
            )
            try:
                return made(_open_read_only(home, DAMAGED_READ_ONLY, key_secret))
            except StoreError as again:
                raise unreadable from again

    @classmethod
    def _made(
        cls,
        home: str,
        opened: _Opened,
        *,
        key_secret: str | None,
        clock: Callable[[], int],
        ids: IdSource | None,
        released: bool = False,
    ) -> Self:
        store = cls(home, opened.db, opened.crypto, clock=clock, ids=ids)
        store.database = opened.db
        store.key_check = _key_check(opened.db)
        store.key_secret = key_secret
        store.reserve_used = released
        return store

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def session_lock(self, session_id: SessionId) -> contextlib.AbstractContextManager[None]:
        """Nothing beyond the session's lock file: a SQLite store serves the one host its folder is on."""
        return contextlib.nullcontext()

    def wait_for_change(self, timeout_s: float) -> bool:
        """Wait up to *timeout_s* for another connection to commit a change (SQLite's ``data_version`` moves)."""
        deadline = time.monotonic() + timeout_s
        seen = self.db.one("PRAGMA data_version")["data_version"]
        while time.monotonic() < deadline:
            time.sleep(min(CHANGE_POLL_S, max(0.0, deadline - time.monotonic())))
            if self.db.one("PRAGMA data_version")["data_version"] != seen:
                return True
        return False

    def is_current(self) -> bool:
        """Whether opening the store's folder again now would give this store, as it was opened: the same
        database file, writable, at this version's schema, sealed with the same keys, with none of the space set
        aside used."""
        return (
            not self.database.read_only
            and not self.reserve_used
            and self.database.is_same_file()
            and _read_only_reason(self.home) is None
            and self.database.schema_version() == SCHEMA_VERSION
            and _key_check(self.database) == self.key_check
        )

    def use_reserve(self) -> bool:
        """On a full disk, free the space set aside (so a turn can still end); whether there was any."""
        if not _disk_full(self.home) or not _release_reserve(self.home):
            return False
        self.reserve_used = True
        return True


__all__ = ["DB_NAME", "StoreOpening", "existing_crypto", "new_crypto", "store_meta"]

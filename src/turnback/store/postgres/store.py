"""The PostgreSQL store: one database many hosts share, its values sealed on each host as SQLite's are.

:class:`PgStore` is a :class:`turnback.store.api.StoreBackend` built from the
same query classes as the SQLite store (``store/sqlite/``, written in the SQL
both speak) on a :class:`PgDatabase`; what differs is here: opening (the key
check in the database's ``meta``, the key itself never sent), the host each
project lives on and the lease each host renews (``store/hosts.py``), a
session's lock across hosts, and what ``verify`` and ``gc`` ask of the
server. The store folder on each host keeps what stays local: the trash, the
lock files, the log, a key file if the store has one.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from typing import Self

from turnback.catalog import Message
from turnback.errors import BusyError, RecordDamagedError
from turnback.fsio import ensure_private_dir
from turnback.model import IdSource, Project, ProjectId, SessionId, short_id
from turnback.store.crypto import Crypto
from turnback.store.hosts import LocalHost, local_host
from turnback.store.postgres.database import PgDatabase
from turnback.store.postgres.lease import RENEW_LEASE, hold_lease, lease_ns, release_lease
from turnback.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION, SERVER_NOW_NS
from turnback.store.records import DanglingReference, FreeSpace, SchemaObject
from turnback.store.sqlite.activity import ActivityQueries
from turnback.store.sqlite.base import SqliteRecords
from turnback.store.sqlite.calls import CallQueries
from turnback.store.sqlite.maintenance import MaintenanceQueries
from turnback.store.sqlite.notices import NoticeQueries
from turnback.store.sqlite.opening import existing_crypto, new_crypto, store_meta
from turnback.store.sqlite.operations import OperationQueries
from turnback.store.sqlite.sessions import ProjectQueries, SessionQueries
from turnback.store.sqlite.snapshots import SnapshotQueries
from turnback.store.sqlite.turns import TurnQueries


def _crypto(db: PgDatabase, home: str, key_secret: str | None, *, try_keyring: bool) -> Crypto:
    """The store's keys, checked against the value sealed when it was made; made here on first use."""
    ready = db.schema_version() == SCHEMA_VERSION and db.one("SELECT 1 FROM meta WHERE key='key_check'")
    with contextlib.ExitStack() as making:
        if not ready:
            making.enter_context(db.schema_lock())
            making.enter_context(db.transaction())
        db.migrate()
        meta = store_meta(db)
        if "key_check" in meta:
            return existing_crypto(home, meta, key_secret)
        return new_crypto(db, home, key_secret, try_keyring=try_keyring)


class PgOpening(SqliteRecords):
    """Opening a shared store from this host, and the locks only a server can hold for every host."""

    pg: PgDatabase
    database_url: str | None
    host: LocalHost
    host_key: bytes  # this host's keyed id, as the database knows it
    lease_held = False  # whether this store has this process renew the host's lease (until it is closed)

    @classmethod
    def open(
        cls,
        url: str,
        home: str,
        *,
        key_secret: str | None = None,
        try_keyring: bool = True,
        clock: Callable[[], int] = time.time_ns,
        ids: IdSource | None = None,
        host: LocalHost | None = None,
    ) -> Self:
        """Open the store in the database at *url* from this host, creating its tables and key on first use;
        *home* is this host's store folder (trash, locks, log)."""
        home = os.path.abspath(home)
        ensure_private_dir(home)
        db = PgDatabase(url)
        try:
            store = cls(home, db, _crypto(db, home, key_secret, try_keyring=try_keyring), clock=clock, ids=ids)
            store.pg = db
            store.database_url = url
            store.key_secret = key_secret
            store.host = host or local_host()
            store.host_key = store.crypto.path_id("host", store.host.id)
            store._record_host()
        except BaseException:
            db.close()
            raise
        hold_lease(url, store.host, store.host_key)
        store.lease_held = True
        return store

    def packs_folder(self) -> str | None:
        """None: every host reads the shared store's blobs, so none is kept in a file of one host's folder."""
        return None

    def close(self) -> None:
        if self.lease_held:  # once, however often the store is closed
            self.lease_held = False
            release_lease(self.pg.url, self.host_key)
        super().close()

    def adopt_keys(self) -> None:
        """This host as the copied keys know it (its keyed id and sealed name follow the keys)."""
        super().adopt_keys()
        self.db.execute("DELETE FROM hosts WHERE id=?", (self.host_key,))
        release_lease(self.pg.url, self.host_key)
        self.host_key = self.crypto.path_id("host", self.host.id)
        self._record_host()
        hold_lease(self.pg.url, self.host, self.host_key)

    def identities_follow(self, tables: tuple[str, ...]) -> None:
        """After rows were copied with their integer ids: each table's identity counts on from its largest."""
        for table in tables:
            self.db.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), COALESCE(MAX(id), 0) + 1, false) FROM {table}"
            )

    def _record_host(self) -> None:
        """This host in ``hosts`` (on its first opening), its lease renewed when a ``renew_s`` passed since."""
        lease = lease_ns(self.host)
        row = self.db.one(f"SELECT lease_until - {SERVER_NOW_NS} AS lease_left FROM hosts WHERE id=?", (self.host_key,))
        if row is None:
            with self.transaction():
                self.db.execute(
                    "INSERT INTO hosts(id, name_enc, created_at, lease_until)"
                    f" VALUES(?,?,?,{SERVER_NOW_NS} + ?) ON CONFLICT DO NOTHING",
                    (self.host_key, self._seal(self.host.name, f"hosts.name:{self.host_key.hex()}"), self.now(), lease),
                )
        elif row["lease_left"] < lease - self.host.renew_s * 1e9:
            self.db.execute(RENEW_LEASE, (lease, self.host_key))  # one row: no lock to take

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_for_change(self, timeout_s: float) -> bool:
        return self.pg.wait_for_change(timeout_s)

    def use_reserve(self) -> bool:
        """The records are on the server: a full disk here keeps none of them from being written."""
        return False

    def is_current(self) -> bool:
        """Never vouched for: a shared store is opened for each request (its host's lease, the server's state)."""
        return False

    @contextlib.contextmanager
    def session_lock(self, session_id: SessionId) -> Iterator[None]:
        """Hold the session's lock on the server, so no other host applies to it meanwhile; busy if one does."""
        if not self.pg.try_lock_session(session_id):
            raise BusyError(Message("busy_applying"))
        try:
            yield
        finally:
            self.pg.unlock_session(session_id)


class PgProjectQueries(ProjectQueries, PgOpening):
    """A project lives on one host: its root is found only from there, and names that host elsewhere (and
    whether its lease ran out)."""

    def _root_id(self, root: str) -> bytes:
        return self.crypto.path_id("root:" + self.host_key.hex(), root)

    def _insert_project(self, project_id: ProjectId, root_id: bytes, root: str, created_at: int) -> None:
        self.db.execute(
            "INSERT INTO projects(id, root_id, root_enc, created_at, host_id) VALUES(?,?,?,?,?)",
            (project_id, root_id, self._seal(root, f"projects.root:{project_id}"), created_at, self.host_key),
        )

    def project(self, project_id: ProjectId) -> Project:
        row = self.db.one(
            "SELECT projects.id AS id, root_enc, host_id, hosts.name_enc AS host_name_enc,"
            f" hosts.lease_until < {SERVER_NOW_NS} AS lease_ended"
            " FROM projects JOIN hosts ON hosts.id = projects.host_id WHERE projects.id=?",
            (project_id,),
        )
        if row is None:
            raise RecordDamagedError(Message("record_project_missing", project=short_id(project_id)))
        root = self._open(row["root_enc"], f"projects.root:{row['id']}")
        assert root is not None
        host_id = bytes(row["host_id"])
        if host_id == self.host_key:
            return Project(ProjectId(row["id"]), root)
        other = self._open(bytes(row["host_name_enc"]), f"hosts.name:{host_id.hex()}")
        name = other or host_id.hex()[:12]
        return Project(ProjectId(row["id"]), root, other_host=name, other_host_gone=bool(row["lease_ended"]))


class PgMaintenanceQueries(MaintenanceQueries, PgOpening):
    """What ``verify`` and ``gc`` ask of the server rather than of a file."""

    def turn_kept_bytes_at_most(self, turn_id: str) -> int:
        """The exact figure: the server's change counter moves with this connection's own commits too, so a
        reading could never be reused, and asking the counter would cost a round trip more."""
        return self.turn_kept_bytes(turn_id)

    def free_space(self) -> FreeSpace:
        """The server reuses the room deleted rows leave (autovacuum): none waits for a compaction."""
        row = self.db.one("SELECT pg_database_size(current_database()) AS total")
        return FreeSpace(0, int(row["total"]) if row else 0)

    def compact(self) -> None:
        """Ask the server to reclaim the room deleted blobs left now rather than at its next autovacuum."""
        self.db.execute("VACUUM blobs")

    def integrity_problems(self) -> list[str]:
        """The server checks its own pages (and their checksums, where the cluster has them) as it reads them:
        a damaged one fails the read that meets it, which ``verify`` reports where it happens."""
        return []

    def schema_mismatches(self) -> list[SchemaObject]:
        """The tables and indexes whose definition is not what this version's migrations make (made again as
        temporary tables, in a transaction that is rolled back, and compared)."""
        found = self._schema_definitions("current_schema()")
        expected: dict[SchemaObject, object] = {}
        with contextlib.suppress(_Rollback), self.transaction():
            for statements in MIGRATIONS:
                for statement in statements:
                    self.db.execute(statement.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))
            expected = self._schema_definitions("(SELECT nspname FROM pg_namespace WHERE oid = pg_my_temp_schema())")
            raise _Rollback
        return [name for name, definition in sorted(expected.items()) if found.get(name) != definition]

    def _schema_definitions(self, schema: str) -> dict[SchemaObject, object]:
        """Each table's columns and each index's definition in *schema* (an SQL expression naming it)."""
        definitions: dict[SchemaObject, object] = {}
        for row in self.db.all(
            "SELECT table_name, column_name, data_type, is_nullable, column_default, collation_name"
            f" FROM information_schema.columns WHERE table_schema = {schema} ORDER BY table_name, column_name"
        ):
            columns = definitions.setdefault(SchemaObject("table", row.pop("table_name")), [])
            assert isinstance(columns, list)
            columns.append(tuple(row.values()))
        for row in self.db.all(f"SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = {schema}"):
            # the table as the definition names it, without its schema (whose name differs, the definition may not)
            definitions[SchemaObject("index", row["indexname"])] = _TABLE_SCHEMA.sub(" ON ", row["indexdef"], count=1)
        return definitions

    def dangling_references(self) -> list[DanglingReference]:
        """None can dangle: the server enforces every reference the schema declares, at every write."""
        return []


_TABLE_SCHEMA = re.compile(r" ON [^ .]+\.")


class _Rollback(Exception):
    """Ends the transaction that made the expected schema, so it is rolled back."""


class PgActivity(ActivityQueries, PgOpening):
    """What changed, for a live front end: the sessions' activity as SQLite's; the change counter is the
    server's write-ahead log position, which any commit that writes moves, from any host or connection."""

    def data_version(self) -> int:
        row = self.db.one("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn) AS written")
        assert row is not None  # a SELECT of a function always answers one row
        return int(row["written"])


class PgStore(
    PgActivity,
    PgProjectQueries,
    PgMaintenanceQueries,
    TurnQueries,
    CallQueries,
    SessionQueries,
    OperationQueries,
    SnapshotQueries,
    NoticeQueries,
):
    """An open shared store. Use :meth:`open`; close with :meth:`close` or ``with``."""


__all__ = ["PgStore"]

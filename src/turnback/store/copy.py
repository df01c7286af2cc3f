"""Copying a whole store to another backend (SQLite to PostgreSQL, and back), every blob checked on the way.

The records are copied as they are stored, sealed: the target takes the
source's key material (its ``meta``: salt, key check, dictionary), so the
key that opens the source opens the copy, and nothing is opened but what
must be: a project's root, whose keyed id the target scopes its own way (a
shared store by host), and every blob, checked against its id before it is
written. The target must be new (no project yet).
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

from turnback.catalog import Message
from turnback.errors import BlobCorruptError, UsageError
from turnback.model import BlobId, ProjectId
from turnback.store import keys
from turnback.store.api import StoreBackend
from turnback.store.schema import MIGRATIONS
from turnback.store.sqlite.base import SqliteRecords
from turnback.store.sqlite.opening import store_meta
from turnback.store.sqlite.sessions import ProjectQueries

# The tables after projects, parents first, with the columns both backends have (calls in the order written).
_TABLES: tuple[tuple[str, str], ...] = (
    ("sessions", "ORDER BY id"),
    ("turns", "ORDER BY id"),
    ("calls", "ORDER BY rowid"),
    ("changes", "ORDER BY id"),
    ("ref_changes", "ORDER BY id"),
    ("ops", "ORDER BY id"),
    ("op_rows", "ORDER BY op_id, seq"),
    ("snapshots", "ORDER BY id"),
    ("busy_marks", "ORDER BY id"),
    ("notices", "ORDER BY id"),
    ("must_read", "ORDER BY session_id, path_id"),
)
_IDENTITIES = ("changes", "ref_changes", "notices")  # integer ids the copy keeps: the target counts on from them
_PACK_COLUMNS = ("pack", "pack_at")  # a copied blob is put into its row, never left in a pack
_KEY_META = ("store_id", "salt", "key_source", "key_check", "zstd_dictionary")


class StoreCopied(NamedTuple):
    projects: int
    sessions: int
    blobs: int


def _columns(table: str) -> list[str]:
    """The columns of *table* as this version's SQLite schema has them (the PostgreSQL one has them too)."""
    made = sqlite3.connect(":memory:")
    made.row_factory = sqlite3.Row
    try:
        for statements in MIGRATIONS:
            for statement in statements:
                made.execute(statement)
        return [row["name"] for row in made.execute(f"PRAGMA table_info({table})")]
    finally:
        made.close()


def copy_store(source_backend: StoreBackend, target_backend: StoreBackend) -> StoreCopied:
    """Copy every record and blob of *source_backend* into the new store *target_backend* (reopen it after)."""
    # Both backends are built on the shared query classes: the copy reads and writes their rows as stored.
    assert isinstance(source_backend, ProjectQueries) and isinstance(target_backend, ProjectQueries)
    source, target = source_backend, target_backend
    if target.db.one("SELECT 1 AS found FROM projects LIMIT 1") or target.db.one(
        "SELECT 1 AS found FROM blobs LIMIT 1"
    ):
        raise UsageError(Message("pg_copy_target_not_new"))
    blob_ids = sorted(source.blobs.ids())
    for blob_id in blob_ids:  # every copy opens and matches its id before anything is written
        if not source.blobs.verify(BlobId(blob_id)):
            raise BlobCorruptError(Message("pg_copy_blob_damaged", blob=blob_id[:6].hex()))
    meta = store_meta(source.db)
    with target.transaction():
        for key in _KEY_META:
            target.db.execute("DELETE FROM meta WHERE key=?", (key,))
            if key in meta:
                target.db.execute("INSERT INTO meta(key, value) VALUES(?, ?)", (key, meta[key]))
        target.crypto = source.crypto  # the copy is sealed with the source's keys from here on
        target.adopt_keys()
        projects = source.projects()
        for project in projects:
            target.copy_project(ProjectId(project.id), project.root, _created_at(source, project.id))
        sessions = 0
        for table, order in _TABLES:
            columns = _columns(table)
            rows = source.db.all(f"SELECT {', '.join(columns)} FROM {table} {order}")
            sessions += len(rows) if table == "sessions" else 0
            marks = ", ".join("?" for _ in columns)
            target.db.executemany(
                f"INSERT INTO {table}({', '.join(columns)}) VALUES({marks})",
                [tuple(row[column] for column in columns) for row in rows],
            )
        columns = [column for column in _columns("blobs") if column not in _PACK_COLUMNS]
        for blob_id in blob_ids:
            row = source.db.one(f"SELECT {', '.join(columns)} FROM blobs WHERE id=?", (blob_id,))
            assert row is not None  # listed and verified above, in this process
            # A packed blob's bytes go into its row: the target's folder (or host) has no pack of the source's.
            values = {column: row[column] for column in columns}
            values["data"] = source.blobs.sealed(blob_id)
            target.db.execute(
                f"INSERT INTO blobs({', '.join(columns)}) VALUES({', '.join('?' for _ in columns)})",
                tuple(values[column] for column in columns),
            )
        target.identities_follow(_IDENTITIES)
    _copy_key_file(source.home, target.home, meta)
    return StoreCopied(len(projects), sessions, len(blob_ids))


def _created_at(store: SqliteRecords, project_id: str) -> int:
    row = store.db.one("SELECT created_at FROM projects WHERE id=?", (project_id,))
    assert row is not None  # the project was just listed
    return int(row["created_at"])


def _copy_key_file(source_home: str, target_home: str, meta: dict[str, bytes]) -> None:
    """A store whose key is its folder's key file: the copy's folder gets the same key (a file of mode 0600)."""
    if meta.get("key_source") != b"file" or keys.read_key_file(target_home) is not None:
        return
    key = keys.read_key_file(source_home)
    if key is not None:
        keys.write_key_file(target_home, key)


__all__ = ["StoreCopied", "copy_store"]

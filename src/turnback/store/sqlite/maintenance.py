"""The queries behind the size caps, gc, verify and deleting a session (``ops/maintenance.py`` holds the policy:
what to drop, in what order, what counts as damage)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import NamedTuple

from turnback.model import CallId, OpId, ProjectId, SessionId, TurnId
from turnback.store.records import (
    BlobHold,
    ChangeCopies,
    DanglingReference,
    EvictableCall,
    EvictableOperation,
    FreeSpace,
    SchemaObject,
    SnapshotRecord,
)
from turnback.store.schema import MIGRATIONS
from turnback.store.sqlite.base import SqliteRecords

# Every copy a change not evicted or an operation not evicted needs.
_KEPT_SQL = (
    "SELECT before_blob AS id FROM changes WHERE evicted=0 AND before_blob IS NOT NULL"
    " UNION SELECT after_blob FROM changes WHERE evicted=0 AND after_blob IS NOT NULL"
    " UNION SELECT expect_blob FROM op_rows JOIN ops ON ops.id = op_rows.op_id"
    " WHERE ops.evicted=0 AND expect_blob IS NOT NULL"
    " UNION SELECT target_blob FROM op_rows JOIN ops ON ops.id = op_rows.op_id"
    " WHERE ops.evicted=0 AND target_blob IS NOT NULL"
)

# A preview still pending: the newest operation of its session (nothing planned or applied since), or one
# created at or after the time given.
_PENDING_SQL = (
    "ops.status='planned' AND (ops.created_at>=? OR ops.created_at ="
    " (SELECT MAX(newer.created_at) FROM ops AS newer WHERE newer.session_id = ops.session_id))"
)

_SCHEMA_SQL = "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"

# What a session owns, children first; deleting a session deletes these rows.
_SESSION_ROWS = (
    ("changes", "call_id IN (SELECT id FROM calls WHERE session_id=?)"),
    ("calls", "session_id=?"),
    ("ref_changes", "turn_id IN (SELECT id FROM turns WHERE session_id=?)"),
    ("turns", "session_id=?"),
    ("op_rows", "op_id IN (SELECT id FROM ops WHERE session_id=?)"),
    ("ops", "session_id=?"),
    ("busy_marks", "session_id=?"),
    ("notices", "session_id=?"),
    ("must_read", "session_id=?"),
    ("sessions", "id=?"),
)


def _blob_ids(rows: list[sqlite3.Row]) -> set[bytes]:
    return {bytes(row["id"]) for row in rows if row["id"] is not None}


def _total(row: sqlite3.Row | None) -> int:
    assert row is not None  # an aggregate always gives a row
    return int(row["total"])


class _KeptReading(NamedTuple):
    """A turn's kept bytes as read, with the database's change counter before the read and this connection's
    ``copy_bytes_recorded`` at it."""

    turn_id: str
    version: int
    kept: int
    recorded: int


class MaintenanceQueries(SqliteRecords):
    _kept_reading: _KeptReading | None = None
    data_version: Callable[[], int]  # ActivityQueries'

    # -- what is kept, and what the caps may drop ----------------------------------------------

    def kept_blob_ids(self) -> set[bytes]:
        """Every copy a change or an operation still needs (chunk lists as themselves, not their chunks)."""
        return _blob_ids(self.db.all(_KEPT_SQL))

    def kept_bytes(self) -> int:
        """The content size of every copy a change or an operation needs, and the calls' recorded input."""
        copies = self.db.one(f"SELECT COALESCE(SUM(size), 0) AS total FROM blobs WHERE id IN ({_KEPT_SQL})")
        inputs = self.db.one(
            "SELECT COALESCE(SUM(length(input_enc)), 0) AS total FROM calls WHERE input_enc IS NOT NULL"
        )
        return _total(copies) + _total(inputs)

    def turn_kept_bytes(self, turn_id: str) -> int:
        """The content size of the copies the turn's calls keep (each copy once)."""
        copies = (
            "SELECT before_blob FROM changes JOIN calls ON calls.id = changes.call_id"
            " WHERE calls.turn_id=? AND changes.evicted=0 AND before_blob IS NOT NULL"
            " UNION SELECT after_blob FROM changes JOIN calls ON calls.id = changes.call_id"
            " WHERE calls.turn_id=? AND changes.evicted=0 AND after_blob IS NOT NULL"
        )
        return _total(
            self.db.one(f"SELECT COALESCE(SUM(size), 0) AS total FROM blobs WHERE id IN ({copies})", (turn_id, turn_id))
        )

    def turn_kept_bytes_at_most(self, turn_id: str) -> int:
        """No less than :meth:`turn_kept_bytes`, and cheap while no other connection commits: the last reading
        of the turn's copies plus the copies this connection's change rows named since. The turn's copies grow
        only by change rows; rows another connection wrote move ``data_version`` (read before the copies, so a
        commit in between is read again next time), and this connection's removals only make it larger."""
        version = self.data_version()
        reading = self._kept_reading
        if reading is not None and reading.turn_id == turn_id and reading.version == version:
            return reading.kept + self.copy_bytes_recorded - reading.recorded
        recorded = self.copy_bytes_recorded
        kept = self.turn_kept_bytes(turn_id)
        self._kept_reading = _KeptReading(turn_id, version, kept, recorded)
        return kept

    def newest_turn_ids(self) -> set[str]:
        """Every running turn, and the turn that ended last."""
        rows = self.db.all(
            "SELECT id FROM turns WHERE status='running'"
            " UNION SELECT id FROM"
            " (SELECT id FROM turns ORDER BY COALESCE(ended_at, started_at) DESC LIMIT 1) AS newest"
        )
        return {row["id"] for row in rows}

    def pending_op_blobs(self, pending_since: int) -> set[bytes]:
        """Copies an applying operation or a pending preview needs (one made at or after *pending_since*, or its
        session's newest)."""
        where = f"ops.evicted=0 AND (ops.status='applying' OR {_PENDING_SQL})"
        return _blob_ids(
            self.db.all(
                f"SELECT expect_blob AS id FROM op_rows JOIN ops ON ops.id = op_rows.op_id WHERE {where}"
                f" UNION SELECT target_blob FROM op_rows JOIN ops ON ops.id = op_rows.op_id WHERE {where}",
                (pending_since, pending_since),
            )
        )

    def evictable_calls(self) -> list[EvictableCall]:
        """Calls that still keep a copy or their input."""
        rows = self.db.all(
            "SELECT started_at, id, turn_id FROM calls WHERE input_enc IS NOT NULL"
            " OR EXISTS(SELECT 1 FROM changes WHERE changes.call_id = calls.id AND changes.evicted=0)"
        )
        return [EvictableCall(row["started_at"], CallId(row["id"]), TurnId(row["turn_id"])) for row in rows]

    def evictable_operations(self, pending_since: int) -> list[EvictableOperation]:
        """Operations whose copies may go: applied ones, and previews no longer pending (see
        :meth:`pending_op_blobs`)."""
        rows = self.db.all(
            "SELECT created_at, id FROM ops WHERE evicted=0"
            f" AND (status='done' OR (status='planned' AND NOT ({_PENDING_SQL})))",
            (pending_since,),
        )
        return [EvictableOperation(row["created_at"], OpId(row["id"])) for row in rows]

    def call_kept_blobs(self, call_id: CallId) -> set[bytes]:
        """The copies the call's changes not evicted keep."""
        return _blob_ids(
            self.db.all(
                "SELECT before_blob AS id FROM changes WHERE call_id=? AND evicted=0"
                " UNION SELECT after_blob FROM changes WHERE call_id=? AND evicted=0",
                (call_id, call_id),
            )
        )

    def evict_call(self, call_id: CallId) -> None:
        """Drop a call's copies and input: its changes can no longer be reverted."""
        self.db.execute("UPDATE changes SET evicted=1 WHERE call_id=?", (call_id,))
        self.db.execute("UPDATE calls SET input_enc=NULL WHERE id=?", (call_id,))

    def evict_operation(self, op_id: OpId) -> None:
        """Drop an operation's copies: it can no longer be taken back (or applied)."""
        self.db.execute("UPDATE ops SET evicted=1 WHERE id=?", (op_id,))

    def cache_project_ids(self) -> list[ProjectId]:
        """The projects that have a stat cache."""
        rows = self.db.all("SELECT DISTINCT project_id FROM snapshots WHERE purpose='cache'")
        return [ProjectId(row["project_id"]) for row in rows]

    def snapshot_records(self) -> list[SnapshotRecord]:
        rows = self.db.all("SELECT id, purpose, project_id FROM snapshots")
        return [SnapshotRecord(row["id"], row["purpose"], ProjectId(row["project_id"])) for row in rows]

    # -- reclaiming space -----------------------------------------------------------------------

    def free_space(self) -> FreeSpace:
        page_size = self._pragma_number("page_size")
        return FreeSpace(
            self._pragma_number("freelist_count") * page_size, self._pragma_number("page_count") * page_size
        )

    def _pragma_number(self, name: str) -> int:
        row = self.db.one(f"PRAGMA {name}")
        assert row is not None  # these pragmas always answer
        return int(row[name])

    def compact(self) -> None:
        """Give the free room inside the database back to the disk (VACUUM), and empty the log."""
        self.db.execute("VACUUM")
        self.db.truncate_log()

    # -- verify -----------------------------------------------------------------------------------

    def integrity_problems(self) -> list[str]:
        """What SQLite's own integrity check finds (its words)."""
        return [
            row["integrity_check"] for row in self.db.all("PRAGMA integrity_check") if row["integrity_check"] != "ok"
        ]

    def schema_mismatches(self) -> list[SchemaObject]:
        """The tables and indexes whose definition is not what this version's migrations make."""
        expected_db = sqlite3.connect(":memory:")
        try:
            for statements in MIGRATIONS:
                for statement in statements:
                    expected_db.execute(statement)
            expected = {(kind, name): sql for kind, name, sql in expected_db.execute(_SCHEMA_SQL)}
        finally:
            expected_db.close()
        found = {(row["type"], row["name"]): row["sql"] for row in self.db.all(_SCHEMA_SQL)}
        return [
            SchemaObject(kind, name) for (kind, name), sql in sorted(expected.items()) if found.get((kind, name)) != sql
        ]

    def dangling_references(self) -> list[DanglingReference]:
        """Each (table, parent) where a row names a row of its parent that is not there."""
        rows = self.db.all("PRAGMA foreign_key_check")
        return [
            DanglingReference(table, parent)
            for table, parent in sorted({(row["table"], row["parent"]) for row in rows})
        ]

    def projects_without_sessions(self) -> list[ProjectId]:
        rows = self.db.all("SELECT id FROM projects WHERE id NOT IN (SELECT project_id FROM sessions)")
        return [ProjectId(row["id"]) for row in rows]

    def snapshot_ids(self) -> list[str]:
        return [row["id"] for row in self.db.all("SELECT id FROM snapshots")]

    def session_ids(self) -> list[SessionId]:
        return [SessionId(row["id"]) for row in self.db.all("SELECT id FROM sessions ORDER BY id")]

    def turn_ids(self, session_id: SessionId) -> list[TurnId]:
        rows = self.db.all("SELECT id FROM turns WHERE session_id=? ORDER BY number", (session_id,))
        return [TurnId(row["id"]) for row in rows]

    def call_ids(self, session_id: SessionId) -> list[CallId]:
        rows = self.db.all("SELECT id FROM calls WHERE session_id=? ORDER BY rowid", (session_id,))
        return [CallId(row["id"]) for row in rows]

    def op_ids(self, session_id: SessionId) -> list[OpId]:
        rows = self.db.all("SELECT id FROM ops WHERE session_id=? ORDER BY id", (session_id,))
        return [OpId(row["id"]) for row in rows]

    def kept_change_copies(self) -> list[ChangeCopies]:
        """The copies of every change not evicted, with its call and session."""
        rows = self.db.all(
            "SELECT calls.id AS call_id, calls.session_id AS session_id, changes.before_blob AS before_blob,"
            " changes.after_blob AS after_blob FROM changes JOIN calls ON calls.id = changes.call_id"
            " WHERE changes.evicted=0"
        )
        return [
            ChangeCopies(CallId(row["call_id"]), SessionId(row["session_id"]), row["before_blob"], row["after_blob"])
            for row in rows
        ]

    # -- deleting a session ----------------------------------------------------------------------

    def delete_session_records(self, session_id: SessionId) -> None:
        """Delete a session and every record it owns; its copies stay until a gc finds nothing needs them."""
        with self.transaction():
            for table, where in _SESSION_ROWS:
                self.db.execute(f"DELETE FROM {table} WHERE {where}", (session_id,))

    # -- blobs stored before a record names them -------------------------------------------------

    def add_blob_hold(self, project_id: ProjectId, pid: int, pid_start: int | None, since: int) -> str:
        """Record that process *pid* stores blobs of the project that no record names yet, since *since*."""
        hold_id = self.new_id()
        with self.transaction(durable=False):  # it matters only while its process runs: a crash ends it anyway
            self.db.execute(
                "INSERT INTO blob_holds(id, project_id, pid, pid_start, since) VALUES(?,?,?,?,?)",
                (hold_id, project_id, pid, pid_start, since),
            )
        return hold_id

    def blob_holds(self) -> list[BlobHold]:
        rows = self.db.all("SELECT id, project_id, pid, pid_start, since FROM blob_holds ORDER BY since")
        return [
            BlobHold(row["id"], ProjectId(row["project_id"]), row["pid"], row["pid_start"], row["since"])
            for row in rows
        ]

    def remove_blob_hold(self, hold_id: str) -> None:
        with self.transaction(durable=False):
            self.db.execute("DELETE FROM blob_holds WHERE id=?", (hold_id,))

"""Keeping the store within its bounds: the size caps, gc, verify, deleting a session.

What is kept for reverting counts towards ``store.max_mib``: the states calls
recorded, the calls' recorded input (a write's text), and what operations
displaced (for redo). When over, the oldest of those go first, calls and
operations by age: a call's changes then show "can no longer be reverted"
and its input is dropped; an operation can no longer be taken back. The stat
caches' copies count towards ``snapshot.max_mib``; over it, the oldest
entries' copies are dropped and those files are left out of the next
snapshot (and said so). A copy that an applying operation, a pending
preview (each session's newest operation, still planned, or any preview
younger than ``PLAN_KEEP_NS``), a running command's snapshot, or the newest
turn (every running turn, and the turn that ended last) needs is never
dropped, even when the store stays over its cap until a later turn: the
copy a destructive call needs is never dropped by that call's own turn. A
call whose copy cannot be kept at all is refused before it acts (the
engine's rule, with ``turn_kept_bytes``). An older, superseded preview loses
its copies and must be planned again.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from turnback.capture.scan import Entry, content_bytes, encode_snapshot, load_snapshot, stored_entries
from turnback.errors import BlobCorruptError, RecordDamagedError, StoreError, UsageError
from turnback.model import BlobId, CallId, OpId, ProjectId, SessionId, TurnId
from turnback.store import Store
from turnback.store.crypto import ID_LEN
from turnback.store.schema import MIGRATIONS

VACUUM_FREE_BYTES = 8 << 20
VACUUM_FREE_SHARE = 0.25
SNAPSHOT_DROPPED = "over snapshot.max_mib ({mib} MiB): its copy was dropped, oldest first"
PLAN_KEEP_NS = 3600 * 10**9  # a preview holds its copies this long; applied later, it is refused (plan again)


def _children(store: Store, blob_ids: Iterable[bytes]) -> set[bytes]:
    """The chunks that the chunk-list blobs among *blob_ids* name (their content lives there)."""
    found: set[bytes] = set()
    for blob_id in blob_ids:
        row = store.db.one("SELECT kind FROM blobs WHERE id=?", (blob_id,))
        if row is None or row[0] != 1:
            continue
        try:
            listing = store.blobs._get(blob_id)[1]
        except BlobCorruptError:
            continue
        found.update(listing[i : i + ID_LEN] for i in range(0, len(listing), ID_LEN))
    return found


def _snapshot_blobs(store: Store) -> tuple[set[bytes], set[bytes]]:
    """Blobs the stat caches hold, and blobs the snapshots of running commands hold."""
    cache: set[bytes] = set()
    running: set[bytes] = set()
    for snapshot_id, purpose, project_id in store.db.all("SELECT id, purpose, project_id FROM snapshots"):
        data = store.snapshot(snapshot_id)
        if data is None:
            continue
        if purpose == "cache":  # a delta's base is a row of its own, so each row's own entries are enough
            cache.update(entry.blob for entry in stored_entries(data) if entry.blob)
        else:
            from turnback.capture.commands import CallBefore  # the command layer's own format

            with contextlib.suppress(StoreError):
                outside = CallBefore.decode_outside(data)  # the project's part is a stat cache, kept above
                running.update(entry.blob for entry in outside.values() if entry.blob)
        del project_id
    return cache, running


def _column_blobs(store: Store, sql: str, params: tuple[object, ...] = ()) -> set[bytes]:
    return {bytes(row[0]) for row in store.db.all(sql, params) if row[0] is not None}


# A preview still pending: the newest operation of its session (nothing planned or applied since), or a recent one.
_PENDING_SQL = (
    "ops.status='planned' AND (ops.created_at>=? OR ops.created_at ="
    " (SELECT MAX(newer.created_at) FROM ops AS newer WHERE newer.session_id = ops.session_id))"
)


def _pending_op_blobs(store: Store) -> set[bytes]:
    """Copies an applying operation or a pending preview needs."""
    recent = store.now() - PLAN_KEEP_NS
    where = f"ops.evicted=0 AND (ops.status='applying' OR {_PENDING_SQL})"
    return _column_blobs(
        store,
        f"SELECT expect_blob FROM op_rows JOIN ops ON ops.id = op_rows.op_id WHERE {where}"
        f" UNION SELECT target_blob FROM op_rows JOIN ops ON ops.id = op_rows.op_id WHERE {where}",
        (recent, recent),
    )


def newest_turns(store: Store) -> set[str]:
    """The turns whose copies the cap never drops: every running turn, and the turn that ended last."""
    rows = store.db.all(
        "SELECT id FROM turns WHERE status='running'"
        " UNION SELECT id FROM (SELECT id FROM turns ORDER BY COALESCE(ended_at, started_at) DESC LIMIT 1)"
    )
    return {turn_id for (turn_id,) in rows}


def turn_kept_bytes(store: Store, turn_id: str) -> int:
    """The content size of the copies the turn's calls keep (each copy once), which the cap never drops."""
    copies = (
        "SELECT before_blob FROM changes JOIN calls ON calls.id = changes.call_id"
        " WHERE calls.turn_id=? AND changes.evicted=0 AND before_blob IS NOT NULL"
        " UNION SELECT after_blob FROM changes JOIN calls ON calls.id = changes.call_id"
        " WHERE calls.turn_id=? AND changes.evicted=0 AND after_blob IS NOT NULL"
    )
    total = store.db.one(f"SELECT COALESCE(SUM(size), 0) FROM blobs WHERE id IN ({copies})", (turn_id, turn_id))[0]
    return int(total)


def live_blobs(store: Store) -> set[bytes]:
    """Every blob something still needs: changes not dropped, operations, snapshots; chunks included."""
    live = _column_blobs(store, _KEPT_SQL)
    cache, running = _snapshot_blobs(store)
    live |= cache | running
    return live | _children(store, live)


@dataclass(slots=True)
class Reclaimed:
    blobs: int = 0
    bytes: int = 0
    vacuumed: bool = False
    evicted_calls: list[str] = field(default_factory=list)
    evicted_ops: list[str] = field(default_factory=list)
    dropped_cache_entries: int = 0


def gc(store: Store, *, vacuum: bool | None = None) -> Reclaimed:
    """Delete blobs nothing needs; VACUUM when that frees enough (or when asked)."""
    result = Reclaimed()
    with store.transaction():
        live = live_blobs(store)
        for blob_id, size in store.db.all("SELECT id, stored FROM blobs"):
            if bytes(blob_id) not in live:
                store.db.execute("DELETE FROM blobs WHERE id=?", (blob_id,))
                result.blobs += 1
                result.bytes += size
    page_size = store.db.one("PRAGMA page_size")[0]
    free_pages = store.db.one("PRAGMA freelist_count")[0]
    pages = store.db.one("PRAGMA page_count")[0]
    free = free_pages * page_size
    worth = free >= VACUUM_FREE_BYTES or (pages and free_pages / pages >= VACUUM_FREE_SHARE and free > 1 << 20)
    if vacuum or (vacuum is None and worth):
        store.db.execute("VACUUM")
        store.db.truncate_log()
        result.vacuumed = True
    return result


_KEPT_SQL = (
    "SELECT before_blob FROM changes WHERE evicted=0 AND before_blob IS NOT NULL"
    " UNION SELECT after_blob FROM changes WHERE evicted=0 AND after_blob IS NOT NULL"
    " UNION SELECT expect_blob FROM op_rows JOIN ops ON ops.id = op_rows.op_id"
    " WHERE ops.evicted=0 AND expect_blob IS NOT NULL"
    " UNION SELECT target_blob FROM op_rows JOIN ops ON ops.id = op_rows.op_id"
    " WHERE ops.evicted=0 AND target_blob IS NOT NULL"
)


def kept_bytes(store: Store) -> int:
    """What is kept for reverting: the content size of every copy a change or an operation needs, and the
    calls' recorded input."""
    copies = store.db.one(f"SELECT COALESCE(SUM(size), 0) FROM blobs WHERE id IN ({_KEPT_SQL})")[0]
    inputs = store.db.one("SELECT COALESCE(SUM(length(input_enc)), 0) FROM calls WHERE input_enc IS NOT NULL")[0]
    return int(copies) + int(inputs)


def _cap_candidates(store: Store) -> list[tuple[str, str]]:
    """What the store cap may drop, oldest first: ("call", id) for a call's copies and input, ("op", id)
    for an operation's copies (an applied one's, or a superseded old preview's). The newest turns' calls and
    pending previews are never among them."""
    newest = newest_turns(store)
    calls = [
        (at, call_id)
        for at, call_id, turn_id in store.db.all(
            "SELECT started_at, id, turn_id FROM calls WHERE input_enc IS NOT NULL"
            " OR EXISTS(SELECT 1 FROM changes WHERE changes.call_id = calls.id AND changes.evicted=0)"
        )
        if turn_id not in newest
    ]
    ops = store.db.all(
        "SELECT created_at, id FROM ops WHERE evicted=0"
        f" AND (status='done' OR (status='planned' AND NOT ({_PENDING_SQL})))",
        (store.now() - PLAN_KEEP_NS,),
    )
    found = [(at, "call", call_id) for at, call_id in calls] + [(at, "op", op_id) for at, op_id in ops]
    return [(kind, item_id) for _, kind, item_id in sorted(found)]


def enforce_caps(store: Store, *, max_bytes: int, snapshot_max_bytes: int, snapshot_mib: int) -> Reclaimed:
    """Drop the oldest copies until the kept copies fit their caps, then reclaim the space.

    Under both caps (the usual case, at the end of every turn) this reads two sums, not the snapshots.
    """
    result = Reclaimed()
    with store.transaction():
        over_store = kept_bytes(store) > max_bytes
        caches = [
            ProjectId(project_id)
            for (project_id,) in store.db.all("SELECT DISTINCT project_id FROM snapshots WHERE purpose='cache'")
        ]
        over_caches = [
            p for p in caches if (store.cache_content_bytes(p) or snapshot_max_bytes + 1) > snapshot_max_bytes
        ]
        if not over_store and not over_caches:
            return result
        protected = _pending_op_blobs(store)
        _, running = _snapshot_blobs(store)
        protected |= running
        if over_store:
            for kind, item_id in _cap_candidates(store):
                if kind == "op":
                    store.db.execute("UPDATE ops SET evicted=1 WHERE id=?", (item_id,))
                    result.evicted_ops.append(item_id)
                else:
                    blobs = _column_blobs(
                        store,
                        "SELECT before_blob FROM changes WHERE call_id=? AND evicted=0"
                        " UNION SELECT after_blob FROM changes WHERE call_id=? AND evicted=0",
                        (item_id, item_id),
                    )
                    if blobs & protected:
                        continue
                    store.db.execute("UPDATE changes SET evicted=1 WHERE call_id=?", (item_id,))
                    store.db.execute("UPDATE calls SET input_enc=NULL WHERE id=?", (item_id,))
                    if blobs:
                        result.evicted_calls.append(item_id)
                if kept_bytes(store) <= max_bytes:
                    break
        for project_id in over_caches:
            result.dropped_cache_entries += _cap_cache(store, project_id, snapshot_max_bytes, snapshot_mib, protected)
    if result.evicted_calls or result.evicted_ops or result.dropped_cache_entries:
        reclaimed = gc(store)
        result.blobs, result.bytes, result.vacuumed = reclaimed.blobs, reclaimed.bytes, reclaimed.vacuumed
    return result


def _cap_cache(store: Store, project_id: ProjectId, max_bytes: int, mib: int, protected: set[bytes]) -> int:
    """Drop the oldest copies a project's stat cache holds beyond *max_bytes*; the files become uncovered."""
    cached = store.latest_snapshot(project_id)
    loaded = load_snapshot(store, cached.id, cached.data) if cached else None
    if loaded is None or not loaded.snapshot:
        return 0
    snapshot = dict(loaded.snapshot)
    sizes = {entry.blob: entry.size for entry in snapshot.values() if entry.blob}
    total = sum(sizes.values())
    if total <= max_bytes:
        return 0
    holders = collections.Counter(entry.blob for entry in snapshot.values() if entry.blob)
    dropped = 0
    for path, entry in sorted(snapshot.items(), key=lambda item: item[1].mtime_ns):
        if total <= max_bytes:
            break
        if entry.kind != "file" or not entry.blob or entry.blob in protected:
            continue
        snapshot[path] = Entry(
            "uncovered",
            entry.size,
            entry.mtime_ns,
            entry.ctime_ns,
            entry.ino,
            entry.mode,
            reason=SNAPSHOT_DROPPED.format(mib=mib),
        )
        holders[entry.blob] -= 1
        if not holders[entry.blob]:
            total -= sizes.get(entry.blob, 0)
        dropped += 1
    store.save_snapshot(project_id, encode_snapshot(snapshot), len(snapshot), content_bytes=content_bytes(snapshot))
    return dropped


class Damage(NamedTuple):
    """What verify found: damaged copies and records, the sessions and calls they touch, what is intact."""

    blobs: tuple[bytes, ...]  # copies that are damaged or missing
    calls_by_session: dict[str, tuple[str, ...]]  # calls that can no longer be reverted (their copies)
    integrity: tuple[str, ...]  # SQLite's own checks, the schema, rows that name a row not there
    records_by_session: dict[str, tuple[str, ...]]  # damaged records per session ("": the store's own)
    intact_sessions: tuple[str, ...]  # sessions whose every record and copy is intact

    @property
    def clean(self) -> bool:
        return not self.blobs and not self.integrity and not self.records_by_session


# What a record reader raises on a record it cannot make sense of: the store's own damage errors, and the
# ValueError/TypeError/KeyError of a value that is not what its column holds. verify reports each as damage.
_READ_FAILURES = (StoreError, ValueError, TypeError, KeyError, IndexError)
STORE_RECORDS = ""  # the records_by_session key of records that belong to no session (projects, the store's own)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecordDamagedError):
        return exc.what
    if isinstance(exc, UsageError):  # a row listed but not found by its id
        return f"{exc} (it is listed, but its id does not find it: an index is damaged)"
    return str(exc)


def _schema_problems(store: Store) -> list[str]:
    """The tables and indexes whose definition is not what this version's migrations make (a damaged schema)."""
    expected_db = sqlite3.connect(":memory:")
    try:
        for statements in MIGRATIONS:
            for statement in statements:
                expected_db.execute(statement)
        expected = {(kind, name): sql for kind, name, sql in expected_db.execute(_SCHEMA_SQL)}
    finally:
        expected_db.close()
    found = {(row[0], row[1]): row[2] for row in store.db.all(_SCHEMA_SQL)}
    return [
        f"the definition of {kind} {name} is damaged or missing"
        for (kind, name), sql in sorted(expected.items())
        if found.get((kind, name)) != sql
    ]


_SCHEMA_SQL = "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"


def _database_problems(store: Store) -> list[str]:
    problems: list[str] = []
    for label, check in (
        ("integrity check", lambda: [row[0] for row in store.db.all("PRAGMA integrity_check") if row[0] != "ok"]),
        ("schema", lambda: _schema_problems(store)),
        (
            "references",
            lambda: [
                f"a row of {table} names a row of {parent} that is not there"
                for table, parent in sorted({(row[0], row[2]) for row in store.db.all("PRAGMA foreign_key_check")})
            ],
        ),
    ):
        try:
            problems += check()
        except StoreError as exc:
            problems.append(f"{label}: {exc}")
    return problems


def _damaged_records(store: Store) -> tuple[dict[str, list[str]], list[str]]:
    """Read every record the other verbs read, through the store's own readers; what does not read, per session.

    Also the ids of every session, to say which are intact.
    """
    found: dict[str, list[str]] = {}

    def read(owner: str, reader: Callable[[], object]) -> None:
        try:
            reader()
        except _READ_FAILURES as exc:
            found.setdefault(owner, []).append(_reason(exc))

    def ids(sql: str, params: tuple[object, ...] = ()) -> list[Any]:
        try:
            return [row[0] for row in store.db.all(sql, params)]
        except StoreError as exc:
            found.setdefault(STORE_RECORDS, []).append(_reason(exc))
            return []

    def project_of(session_id: SessionId) -> object:  # log and undo of a session need its project's root
        return store.project(store.session(session_id).project_id)

    read(STORE_RECORDS, store.blobs.has_dictionary)
    for project_id in ids("SELECT id FROM projects WHERE id NOT IN (SELECT project_id FROM sessions)"):
        read(STORE_RECORDS, functools.partial(store.project, ProjectId(project_id)))
    for snapshot_id in ids("SELECT id FROM snapshots"):
        read(STORE_RECORDS, functools.partial(store.snapshot, snapshot_id))
    sessions = ids("SELECT id FROM sessions ORDER BY id")
    for session_id in sessions:
        sid = SessionId(session_id)
        read(session_id, functools.partial(store.session, sid))
        read(session_id, functools.partial(project_of, sid))
        read(session_id, functools.partial(store.busy_marks, sid))
        for turn_id in ids("SELECT id FROM turns WHERE session_id=? ORDER BY number", (session_id,)):
            for turn_reader in (store.turn, store.refs_at_turn_start, store.ref_changes):
                read(session_id, functools.partial(turn_reader, TurnId(turn_id)))
        for call_id in ids("SELECT id FROM calls WHERE session_id=? ORDER BY rowid", (session_id,)):
            read(session_id, functools.partial(store.call, CallId(call_id)))
        for op_id in ids("SELECT id FROM ops WHERE session_id=? ORDER BY id", (session_id,)):
            read(session_id, functools.partial(store.load_plan, OpId(op_id)))
        try:
            notices = store.db.all("SELECT id, body_enc FROM notices WHERE session_id=? ORDER BY id", (session_id,))
        except StoreError as exc:
            found.setdefault(session_id, []).append(_reason(exc))
            notices = []
        for notice_id, body in notices:
            read(session_id, functools.partial(store.open_notice, notice_id, body))
    return found, sessions


def _missing_blobs(store: Store) -> set[bytes]:
    """Copies that changes and operations name (and the chunks their chunk lists name) but the store lacks."""
    named = _column_blobs(store, _KEPT_SQL)
    named |= _children(store, named)
    present = {bytes(row[0]) for row in store.db.all("SELECT id FROM blobs")}
    return named - present


def verify(store: Store) -> Damage:
    """Read every record the other verbs rely on, decrypt every copy and check its keyed hash, and run
    SQLite's checks (integrity, schema, references). Changes nothing.

    On a damaged database each step reports what it could not read and the
    others go on, so what is intact is still named.
    """
    problems = _database_problems(store)
    records, sessions = _damaged_records(store)
    damaged: list[bytes] = []
    try:
        blob_ids = [bytes(row[0]) for row in store.db.all("SELECT id FROM blobs")]
    except StoreError as exc:
        problems.append(f"the copies cannot all be listed: {exc}")
        blob_ids = []
    for blob_id in blob_ids:
        try:
            intact = store.blobs.verify(BlobId(blob_id))
        except StoreError:
            intact = False
        if not intact:
            damaged.append(blob_id)
    bad = set(damaged)
    calls: dict[str, list[str]] = {}
    try:
        bad |= _missing_blobs(store)
        for (blob_id,) in store.db.all("SELECT id FROM blobs WHERE kind=1"):
            if _children(store, [bytes(blob_id)]) & bad:  # a chunk list with a damaged chunk is damaged
                bad.add(bytes(blob_id))
        rows = store.db.all(
            "SELECT calls.id, calls.session_id, changes.before_blob, changes.after_blob FROM changes"
            " JOIN calls ON calls.id = changes.call_id WHERE changes.evicted=0"
        )
    except StoreError as exc:
        problems.append(f"the calls that need damaged copies cannot all be named: {exc}")
        rows = []
    for call_id, session_id, before, after in rows:
        if (isinstance(before, bytes) and before in bad) or (isinstance(after, bytes) and after in bad):
            session_calls = calls.setdefault(session_id, [])
            if call_id not in session_calls:
                session_calls.append(call_id)
    # A damaged page or index can hide rows from the readers above without an error: then no session is vouched for.
    intact_sessions = () if problems else tuple(s for s in sessions if s not in records and s not in calls)
    return Damage(
        tuple(sorted(bad)),
        {s: tuple(c) for s, c in calls.items()},
        tuple(problems),
        {s: tuple(dict.fromkeys(r)) for s, r in records.items()},
        intact_sessions,
    )


def delete_session(store: Store, session_id: SessionId) -> None:
    """Delete a session, its turns, calls, changes, operations and notices; its copies go at the gc that follows."""
    with store.transaction():
        for table, where in (
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
        ):
            store.db.execute(f"DELETE FROM {table} WHERE {where}", (session_id,))
    gc(store)


__all__ = [
    "Damage",
    "Reclaimed",
    "delete_session",
    "enforce_caps",
    "gc",
    "kept_bytes",
    "live_blobs",
    "newest_turns",
    "turn_kept_bytes",
    "verify",
]

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
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from turnback.capture.scan import Entry, content_bytes, encode_snapshot, load_snapshot, stored_entries
from turnback.errors import BlobCorruptError, StoreError
from turnback.model import BlobId, ProjectId, SessionId
from turnback.store import Store
from turnback.store.crypto import ID_LEN

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
    """What verify found: damaged blobs, the sessions and calls that need them, and SQLite's own check."""

    blobs: tuple[bytes, ...]
    calls_by_session: dict[str, tuple[str, ...]]
    integrity: tuple[str, ...]

    @property
    def clean(self) -> bool:
        return not self.blobs and not self.integrity


def verify(store: Store) -> Damage:
    """Decrypt every blob and check its keyed hash; run SQLite's integrity check. Changes nothing.

    On a damaged database each step reports what it could not read and the
    others go on, so what is intact is still named.
    """
    problems: list[str] = []
    try:
        problems += [row[0] for row in store.db.all("PRAGMA integrity_check") if row[0] != "ok"]
    except StoreError as exc:
        problems.append(f"integrity check: {exc}")
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
        if (before is not None and bytes(before) in bad) or (after is not None and bytes(after) in bad):
            session_calls = calls.setdefault(session_id, [])
            if call_id not in session_calls:
                session_calls.append(call_id)
    return Damage(tuple(sorted(bad)), {s: tuple(c) for s, c in calls.items()}, tuple(problems))


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

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

from turnback.capture.scan import Entry, content_bytes, encode_snapshot, load_snapshot, stored_entries
from turnback.catalog import Message
from turnback.errors import RecordDamagedError, StoreError, TurnbackError, UsageError
from turnback.model import BlobId, CallId, OpId, ProjectId, SessionId
from turnback.ops.busy import holder_ended
from turnback.store.api import StoreBackend

VACUUM_FREE_BYTES = 8 << 20
VACUUM_FREE_SHARE = 0.25
SNAPSHOT_DROPPED = "snapshot_copy_dropped"  # why a snapshot entry lost its copy: the cap, oldest first
PLAN_KEEP_NS = 3600 * 10**9  # a preview holds its copies this long; applied later, it is refused (plan again)


def _snapshot_blobs(store: StoreBackend) -> tuple[set[bytes], set[bytes]]:
    """Blobs the stat caches hold, and blobs the snapshots of running commands hold."""
    cache: set[bytes] = set()
    running: set[bytes] = set()
    for record in store.snapshot_records():
        data = store.snapshot(record.id)
        if data is None:
            continue
        if record.purpose == "cache":  # a delta's base is a row of its own, so each row's own entries are enough
            cache.update(entry.blob for entry in stored_entries(data) if entry.blob)
        else:
            from turnback.capture.commands import CallBefore  # the command layer's own format

            with contextlib.suppress(StoreError):
                outside = CallBefore.decode_outside(data)  # the project's part is a stat cache, kept above
                running.update(entry.blob for entry in outside.values() if entry.blob)
    return cache, running


def _pending_since(store: StoreBackend) -> int:
    """A preview made since this time is pending (as is each session's newest): its copies are kept."""
    return store.now() - PLAN_KEEP_NS


def newest_turns(store: StoreBackend) -> set[str]:
    """The turns whose copies the cap never drops: every running turn, and the turn that ended last."""
    return store.newest_turn_ids()


def turn_kept_bytes(store: StoreBackend, turn_id: str) -> int:
    """The content size of the copies the turn's calls keep (each copy once), which the cap never drops."""
    return store.turn_kept_bytes(turn_id)


def live_blobs(store: StoreBackend) -> set[bytes]:
    """Every blob something still needs: changes not dropped, operations, snapshots; chunks included."""
    live = store.kept_blob_ids()
    cache, running = _snapshot_blobs(store)
    live |= cache | running
    return live | store.blobs.chunks_listed(live)


@dataclass(slots=True)
class Reclaimed:
    blobs: int = 0
    bytes: int = 0
    vacuumed: bool = False
    evicted_calls: list[str] = field(default_factory=list)
    evicted_ops: list[str] = field(default_factory=list)
    dropped_cache_entries: int = 0
    held: int = 0  # copies nothing names yet that gc kept: a running scan stored them (``held_since``)


def held_since(store: StoreBackend) -> int | None:
    """From when the holds of running processes spare blobs no record names yet (``capture.holds``), if any
    does; a hold whose process ended is removed."""
    since: int | None = None
    for hold in store.blob_holds():
        if holder_ended(store, hold.project_id, hold.pid, hold.pid_start):
            store.remove_blob_hold(hold.id)
        elif since is None or hold.since < since:
            since = hold.since
    return since


def gc(store: StoreBackend, *, vacuum: bool | None = None) -> Reclaimed:
    """Delete blobs nothing needs (sparing what a running scan stored, see ``held_since``); compact the database
    when that frees enough (or when asked)."""
    result = Reclaimed()
    with store.transaction():
        live = live_blobs(store)
        since = held_since(store)
        for blob in store.blobs.stored():
            if blob.id in live:
                continue
            if since is not None and blob.created_at >= since:
                result.held += 1
                continue
            store.blobs.delete(blob.id)
            result.blobs += 1
            result.bytes += blob.stored
    result.bytes += store.blobs.reclaim_packs(store.transaction)
    space = store.free_space()
    free, total = space.free_bytes, space.total_bytes
    worth = free >= VACUUM_FREE_BYTES or (total and free / total >= VACUUM_FREE_SHARE and free > 1 << 20)
    if vacuum or (vacuum is None and worth):
        store.compact()
        result.vacuumed = True
    return result


def kept_bytes(store: StoreBackend) -> int:
    """What is kept for reverting: the content size of every copy a change or an operation needs, and the
    calls' recorded input."""
    return store.kept_bytes()


def _cap_candidates(store: StoreBackend) -> list[tuple[str, str]]:
    """What the store cap may drop, oldest first: ("call", id) for a call's copies and input, ("op", id)
    for an operation's copies (an applied one's, or a superseded old preview's). The newest turns' calls and
    pending previews are never among them."""
    newest = newest_turns(store)
    found: list[tuple[int, str, str]] = [
        (call.started_at, "call", call.id) for call in store.evictable_calls() if call.turn_id not in newest
    ]
    found += [(op.created_at, "op", op.id) for op in store.evictable_operations(_pending_since(store))]
    return [(kind, item_id) for _, kind, item_id in sorted(found)]


def enforce_caps(store: StoreBackend, *, max_bytes: int, snapshot_max_bytes: int, snapshot_mib: int) -> Reclaimed:
    """Drop the oldest copies until the kept copies fit their caps, then reclaim the space.

    Under both caps (the usual case, at the end of every turn) this reads two sums, not the snapshots.
    """
    result = Reclaimed()
    with store.transaction():
        over_store = kept_bytes(store) > max_bytes
        over_caches = [
            p
            for p in store.cache_project_ids()
            if (store.cache_content_bytes(p) or snapshot_max_bytes + 1) > snapshot_max_bytes
        ]
        if not over_store and not over_caches:
            return result
        protected = store.pending_op_blobs(_pending_since(store))  # an applying operation's, a pending preview's
        _, running = _snapshot_blobs(store)
        protected |= running
        if over_store:
            for kind, item_id in _cap_candidates(store):
                if kind == "op":
                    store.evict_operation(OpId(item_id))
                    result.evicted_ops.append(item_id)
                else:
                    blobs = store.call_kept_blobs(CallId(item_id))
                    if blobs & protected:
                        continue
                    store.evict_call(CallId(item_id))
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


def _cap_cache(store: StoreBackend, project_id: ProjectId, max_bytes: int, mib: int, protected: set[bytes]) -> int:
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
            reason=Message(SNAPSHOT_DROPPED, mib=mib).dumps(),
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
    integrity: tuple[Message, ...]  # SQLite's own checks, the schema, rows that name a row not there
    records_by_session: dict[str, tuple[Message, ...]]  # damaged records per session ("": the store's own)
    intact_sessions: tuple[str, ...]  # sessions whose every record and copy is intact

    @property
    def clean(self) -> bool:
        return not self.blobs and not self.integrity and not self.records_by_session


# What a record reader raises on a record it cannot make sense of: the store's own damage errors, and the
# ValueError/TypeError/KeyError of a value that is not what its column holds. verify reports each as damage.
_READ_FAILURES = (StoreError, ValueError, TypeError, KeyError, IndexError)
STORE_RECORDS = ""  # the records_by_session key of records that belong to no session (projects, the store's own)


def _reason(exc: BaseException) -> Message:
    if isinstance(exc, RecordDamagedError):
        return exc.what if isinstance(exc.what, Message) else Message("plain", text=str(exc.what))
    if isinstance(exc, UsageError):  # a row listed but not found by its id
        return Message("record_listed_not_found", why=exc.message)
    return exc.message if isinstance(exc, TurnbackError) else Message("plain", text=str(exc))


def _database_problems(store: StoreBackend) -> list[Message]:
    problems: list[Message] = []
    checks: tuple[tuple[Message, Callable[[], list[Message]]], ...] = (
        (
            Message("check_integrity"),
            lambda: [Message("plain", text=problem) for problem in store.integrity_problems()],
        ),
        (
            Message("check_schema"),
            lambda: [Message("schema_object_damaged", kind=o.kind, name=o.name) for o in store.schema_mismatches()],
        ),
        (
            Message("check_references"),
            lambda: [
                Message("dangling_reference", table=r.table, parent=r.parent) for r in store.dangling_references()
            ],
        ),
    )
    for label, check in checks:
        try:
            problems += check()
        except StoreError as exc:
            problems.append(Message("check_failed", check=label, why=exc.message))
    return problems


_Listed = TypeVar("_Listed")


def _damaged_records(store: StoreBackend) -> tuple[dict[str, list[Message]], list[SessionId]]:
    """Read every record the other verbs read, through the store's own readers; what does not read, per session.

    Also the ids of every session, to say which are intact.
    """
    found: dict[str, list[Message]] = {}

    def read(owner: str, reader: Callable[[], object]) -> None:
        try:
            reader()
        except _READ_FAILURES as exc:
            found.setdefault(owner, []).append(_reason(exc))

    def listed(owner: str, lister: Callable[[], list[_Listed]]) -> list[_Listed]:
        try:
            return lister()
        except StoreError as exc:
            found.setdefault(owner, []).append(_reason(exc))
            return []

    def project_of(session_id: SessionId) -> object:  # log and undo of a session need its project's root
        return store.project(store.session(session_id).project_id)

    read(STORE_RECORDS, store.blobs.has_dictionary)
    for project_id in listed(STORE_RECORDS, store.projects_without_sessions):
        read(STORE_RECORDS, functools.partial(store.project, project_id))
    for snapshot_id in listed(STORE_RECORDS, store.snapshot_ids):
        read(STORE_RECORDS, functools.partial(store.snapshot, snapshot_id))
    sessions = listed(STORE_RECORDS, store.session_ids)
    for session_id in sessions:
        read(session_id, functools.partial(store.session, session_id))
        read(session_id, functools.partial(project_of, session_id))
        read(session_id, functools.partial(store.busy_marks, session_id))
        for turn_id in listed(STORE_RECORDS, functools.partial(store.turn_ids, session_id)):
            for turn_reader in (store.turn, store.refs_at_turn_start, store.ref_changes):
                read(session_id, functools.partial(turn_reader, turn_id))
        for call_id in listed(STORE_RECORDS, functools.partial(store.call_ids, session_id)):
            read(session_id, functools.partial(store.call, call_id))
        for op_id in listed(STORE_RECORDS, functools.partial(store.op_ids, session_id)):
            read(session_id, functools.partial(store.load_plan, op_id))
        for notice in listed(session_id, functools.partial(store.sealed_notices, session_id)):
            read(session_id, functools.partial(store.open_notice, notice.id, notice.body))
    return found, sessions


def _missing_blobs(store: StoreBackend) -> set[bytes]:
    """Copies that changes and operations name (and the chunks their chunk lists name) but the store lacks."""
    named = store.kept_blob_ids()
    named |= store.blobs.chunks_listed(named)
    return named - store.blobs.ids()


def verify(store: StoreBackend) -> Damage:
    """Read every record the other verbs rely on, decrypt every copy and check its keyed hash, and run
    the database's checks (integrity, schema, references). Changes nothing.

    On a damaged database each step reports what it could not read and the
    others go on, so what is intact is still named.
    """
    problems = _database_problems(store)
    records, sessions = _damaged_records(store)
    damaged: list[bytes] = []
    blob_ids: Iterable[bytes]
    try:
        blob_ids = store.blobs.ids()
    except StoreError as exc:
        problems.append(Message("copies_not_all_listed", why=exc.message))
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
        for blob_id in store.blobs.chunk_list_ids():
            if store.blobs.chunks_listed([blob_id]) & bad:  # a chunk list with a damaged chunk is damaged
                bad.add(blob_id)
        copies = store.kept_change_copies()
    except StoreError as exc:
        problems.append(Message("damaged_calls_not_all_named", why=exc.message))
        copies = []
    for call_id, session_id, before, after in copies:
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


def delete_session(store: StoreBackend, session_id: SessionId) -> None:
    """Delete a session, its turns, calls, changes, operations and notices; its copies go at the gc that follows."""
    store.delete_session_records(session_id)
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

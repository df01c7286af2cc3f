"""Shell commands and background jobs: scan, run, scan; the difference is the call's change.

The scan before a command is the baseline: whatever a user or an editor
changed between calls is in it, so it is never attributed to, or undone with,
the command. The scan after it, compared with that baseline, is what changed
while the command ran (not who changed it).

What a command's paths held before it ran is kept as the call's snapshot, so
the command can be finished by another process: a command still running
when its timeout passes is left running and a detached watcher records its
changes when it ends; a background job is run by a detached runner that
does the same. Until then the session is busy. Their changes join the turn
that started them, marked ``late`` when that turn had already ended.

Files outside the project are copied before the command per ``mode``:
``auto`` and ``full`` copy the files and folders its command line names
(folders whole, up to ``snapshot.home_max_files`` files and
``snapshot.home_max_mib``); ``manual`` and ``cautious`` copy nothing, and a
change there is recorded as not covered.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import marshal
import operator
import os
import shlex
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any, NamedTuple

import zstandard

from turnback.capture import gitindex
from turnback.capture import watch as watcher
from turnback.capture.calls import CallTarget
from turnback.capture.holds import BlobHold
from turnback.capture.reach import spelled
from turnback.capture.scan import (
    DICT_SAMPLES,
    SPLIT_MIN_ENTRIES,
    Entry,
    Layered,
    ScanRules,
    Snapshot,
    StoredSnapshot,
    TreeChange,
    content_bytes,
    decode_snapshot,
    diff_snapshots,
    encode_snapshot,
    encode_snapshot_delta,
    flat,
    folder_fingerprint,
    holds_at_least,
    load_snapshot,
    remember_snapshot,
    rescan_tree,
    scan_tree,
    split_only_elsewhere,
    stored_snapshot,
    trim_heap,
)
from turnback.catalog import Message
from turnback.errors import StoreError
from turnback.model import ABSENT, BlobId, Call, CallId, CallKind, FileState, Project, short_id
from turnback.paths import RelPath
from turnback.procs import process_alive
from turnback.store.api import StoreBackend
from turnback.store.blobs import DICT_SAMPLE_MAX
from turnback.store.store import CachedSnapshot

WATCH_POLL_S = 0.2
ADOPT_BATCH_BYTES = 64 << 20
ADOPT_ROUND_FILES = 5000
GIT_OBJECT_GONE = Message("git_object_gone").dumps()
CALL_SNAPSHOT_FORMAT = 1


class OutsideRules(NamedTuple):
    mode: str
    home_max_files: int
    home_max_mib: int

    @property
    def home_max_bytes(self) -> int:
        return self.home_max_mib << 20


class Watch(NamedTuple):
    """An outside path a command names: copied (its snapshot) or not (the reason, and a stat to compare)."""

    path: str
    copied: bool
    reason: Message | None
    stamp: tuple[int, int, int, str] | None  # (size, mtime_ns, mode, what is below) when not copied; None: absent


class CallBefore(NamedTuple):
    """What a command's paths held before it ran: the project's stat cache, and the outside paths it names."""

    baseline_id: str  # the stat cache the command started from, kept while the command runs
    project: Snapshot
    watches: tuple[Watch, ...]
    outside: Snapshot  # absolute path -> entry, for the copied watches

    def encode(self) -> bytes:
        """The command's own part (the project's part is its baseline, stored once as the stat cache)."""
        watches = [(w.path, w.copied, w.reason.dumps() if w.reason else None, w.stamp) for w in self.watches]
        data = (watches, encode_snapshot(self.outside))
        return bytes([CALL_SNAPSHOT_FORMAT]) + zstandard.ZstdCompressor(level=1).compress(marshal.dumps(data))

    @staticmethod
    def _decode(data: bytes) -> tuple[list[tuple[Any, ...]], bytes]:
        if not data or data[0] != CALL_SNAPSHOT_FORMAT:
            raise StoreError(Message("command_snapshot_format"))
        watches, outside = marshal.loads(zstandard.ZstdDecompressor().decompress(data[1:]))
        return watches, outside

    @classmethod
    def decode(cls, data: bytes, baseline_id: str, project: Snapshot) -> CallBefore:
        watches, outside = cls._decode(data)
        kept = tuple(
            Watch(path, copied, Message.loads(reason) if reason else None, stamp)
            for path, copied, reason, stamp in watches
        )
        return cls(baseline_id, project, kept, decode_snapshot(outside) or {})

    @classmethod
    def decode_outside(cls, data: bytes) -> Snapshot:
        return decode_snapshot(cls._decode(data)[1]) or {}


# -- scanning -----------------------------------------------------------------------------


class ProjectScan(NamedTuple):
    snapshot: Snapshot
    snapshot_id: str  # the stat cache row that holds it


# A cache is saved as the entries that differ from the last full one while they are few.
DELTA_MIN_ENTRIES = 512
DELTA_FRACTION = 16


class PendingScan(NamedTuple):
    """A scan of the project, not kept yet as its stat cache: ``keep`` keeps it, in the transaction of what the
    caller records with it (one synced commit for both); once that is committed, ``adopt`` starts the background
    copy of the git objects a first snapshot stands on.

    Until then its *hold* spares what it stored from a gc (``capture.holds``); what the caller stores for the
    same record (outside paths, git copies) is stored under it too. Used as a context manager around what
    leads to ``keep``, it releases the hold when that fails."""

    project: Project
    snapshot: Snapshot
    token: str | None
    cached: CachedSnapshot | None
    stored: StoredSnapshot | None
    touched: set[str] | None
    hold: BlobHold

    def keep(self, store: StoreBackend) -> ProjectScan:
        """Keep the scan as the project's stat cache (unless nothing changed), and release its hold."""
        cached, touched = self.cached, self.touched
        if cached is not None and touched is not None and not touched and self.token == cached.watch_token:
            kept = ProjectScan(self.snapshot, cached.id)
        else:
            snapshot_id = _save_cache(store, self.project, self.snapshot, self.token, cached, self.stored, touched)
            kept = ProjectScan(self.snapshot, snapshot_id)
        self.hold.release()
        return kept

    def __enter__(self) -> PendingScan:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is not None:  # (a rolled-back keep's release was rolled back with it)
            self.hold.release()

    def adopt(self, store: StoreBackend) -> None:
        if self.stored is None and any(entry.git_oid for entry in self.snapshot.values()):
            spawn_helper(store, ["_adopt", self.project.id], cwd=self.project.root)  # copied in, in the background


def scan_project(store: StoreBackend, project: Project, rules: ScanRules, *, elsewhere: bool = True) -> ProjectScan:
    """Scan the project against its stat cache, and keep the result as the new cache (unless nothing changed).
    *elsewhere*: as ``scan_pending``'s."""
    with scan_pending(store, project, rules, elsewhere=elsewhere) as pending:
        scanned = pending.keep(store)
    pending.adopt(store)
    return scanned


def scan_pending(store: StoreBackend, project: Project, rules: ScanRules, *, elsewhere: bool = True) -> PendingScan:
    """Scan the project against its stat cache (for the caller to keep: ``PendingScan.keep``).

    When the project's watcher knows what changed since the cache was taken,
    only those paths are visited; otherwise every path is. A large plain
    folder's first snapshot is taken by a process of its own where this one
    cannot split it (``first_snapshot_elsewhere``; not with *elsewhere* false),
    and this scan is then one against the cache that process kept.
    """
    cached = store.latest_snapshot(project.id, data=False)  # read on a miss only: the process may hold it decoded
    if cached is None and elsewhere and first_snapshot_elsewhere(store, project):
        cached = store.latest_snapshot(project.id, data=False)
    stored = load_snapshot(store, cached.id) if cached else None
    answer = watcher.ask(store.home, project.id, cached.watch_token if cached else None)
    now_ns = time.time_ns()
    result = None
    hold = BlobHold(store, project.id)
    try:
        if answer is not None and answer.paths is not None and stored is not None:
            result = rescan_tree(store, project.root, rules, stored.snapshot, answer.paths, now_ns=now_ns, hold=hold)
        # A full scan looks up every path: in a plain dict (a copy of a layered cache, shared entries)
        previous = flat(stored.snapshot) if stored is not None and result is None else None
        if result is None:
            index = gitindex.read_index(project.root) if previous is None else None  # a first snapshot reads no file
            result = scan_tree(store, project.root, rules, previous, now_ns=now_ns, git_index=index, hold=hold)
    except BaseException:
        hold.release()
        raise
    token = answer.token if answer is not None else None
    touched: set[str] | None = None
    if stored is not None:
        if result.touched is not None:
            touched = result.touched
            was: Snapshot = stored.snapshot
        else:  # a full scan keeps the very entry of each path whose stat did not change
            assert previous is not None
            was, now = previous, result.snapshot
            if len(now) == len(previous) and all(map(operator.is_, now.values(), previous.values())):
                touched = set()  # each entry kept, in the same order (an entry belongs to one path): nothing changed
            else:  # the paths whose entry is not the one kept, and the paths gone (iterators only: 60k paths)
                kept = map(operator.is_not, now.values(), map(previous.get, now.keys()))
                touched = set(itertools.compress(now.keys(), kept)) | (previous.keys() - now.keys())
        touched = {path for path in touched if result.snapshot.get(path) != was.get(path)}
    return PendingScan(project, result.snapshot, token, cached, stored, touched, hold)


def first_snapshot_elsewhere(store: StoreBackend, project: Project) -> bool:
    """Have a helper process (``turnback _first_snapshot``) take the project's first snapshot, when this process
    would read every file itself where a process of its own splits the reading over the CPUs: other threads run
    here (the MCP server's, ``turnback serve``'s, the TUI's), so it cannot fork scan workers. Only for a plain
    folder of ``SPLIT_MIN_ENTRIES`` paths or more: a git checkout's first snapshot reads little (git's objects
    stand for its files), and a small tree takes less than a new process's start. Whether the helper kept a stat
    cache (else the caller scans here, as it would have)."""
    if not split_only_elsewhere() or gitindex.git_dir_of(project.root) is not None:
        return False
    if not holds_at_least(project.root, SPLIT_MIN_ENTRIES):
        return False
    helper = spawn_helper(store, ["_first_snapshot", project.id], cwd=project.root)
    return helper.wait() == 0 and store.latest_snapshot(project.id, data=False) is not None


def _save_cache(
    store: StoreBackend,
    project: Project,
    snapshot: Snapshot,
    token: str | None,
    cached: CachedSnapshot | None,
    stored: StoredSnapshot | None,
    touched: set[str] | None,
) -> str:
    """Save *snapshot* as the project's cache: as what differs from the last full cache while that is little."""
    if touched is not None and stored is not None and cached is not None:
        base_id, delta = (cached.id, {}) if stored.base_id is None else (stored.base_id, dict(stored.delta or {}))
        for path in touched:
            delta[path] = snapshot.get(path)
        if len(delta) <= max(DELTA_MIN_ENTRIES, len(snapshot) // DELTA_FRACTION):
            held = cached.content_bytes
            if held is not None:  # counted again from what changed (a copy two paths share counts twice)
                for path in touched:
                    old, new = stored.snapshot.get(path), snapshot.get(path)
                    held += (new.size if new is not None and new.blob else 0) - (
                        old.size if old is not None and old.blob else 0
                    )
            snapshot_id = store.save_snapshot(
                project.id,
                encode_snapshot_delta(base_id, delta),
                len(snapshot),
                watch_token=token,
                content_bytes=held if held is not None else content_bytes(snapshot),
                base_id=base_id,
            )
            remember_snapshot(store, stored_snapshot(snapshot_id, snapshot, base_id, delta))
            return snapshot_id
    whole = flat(snapshot)
    snapshot_id = store.save_snapshot(
        project.id, encode_snapshot(whole), len(whole), watch_token=token, content_bytes=content_bytes(whole)
    )
    remember_snapshot(store, stored_snapshot(snapshot_id, whole))
    return snapshot_id


def _teaching_first(
    store: StoreBackend, objects: Iterator[tuple[str, bytes | None]]
) -> Iterator[tuple[str, bytes | None]]:
    """*objects*, the store's dictionary trained on the first ``DICT_SAMPLES`` small ones before any is stored
    (when it has none yet), so that they and every later copy compress against it."""
    if store.blobs.has_dictionary():
        yield from objects
        return
    held: list[tuple[str, bytes | None]] = []
    small = 0
    for item in objects:
        held.append(item)
        small += item[1] is not None and len(item[1]) <= DICT_SAMPLE_MAX
        if small >= DICT_SAMPLES:
            break
    with store.transaction():
        store.blobs.train_dictionary([data for _, data in held if data is not None])
    yield from held
    yield from objects


def copy_git_objects(
    store: StoreBackend, root: str, oids: Iterable[str], hold: BlobHold, *, teach: bool = False
) -> dict[str, BlobId]:
    """Copy git objects into the store, under *hold* until the caller names them; the content id of each (one
    that is gone is left out).

    *teach*: the first copies train the store's dictionary if it has none (the background copy does; a
    command's own copies are on the agent's path and do not wait for training).
    """
    copied: dict[str, BlobId] = {}
    batch = 0
    objects = gitindex.read_objects(root, oids)
    with contextlib.ExitStack() as stack:
        for oid, data in _teaching_first(store, objects) if teach else objects:
            if data is None:
                continue
            if batch == 0:
                stack.enter_context(store.transaction())
                hold.take()
            copied[oid] = store.put_content([data])[0]
            batch += len(data) + 1
            if batch > ADOPT_BATCH_BYTES:
                stack.close()
                batch = 0
    return copied


def _with_git_copies(
    store: StoreBackend, root: str, snapshot: Snapshot, paths: Iterable[str], hold: BlobHold
) -> Snapshot:
    """*snapshot* with the entries at *paths* whose content is a git object made stored copies (or uncovered),
    stored under *hold*."""
    entries = {path: snapshot[path] for path in paths if path in snapshot and snapshot[path].git_oid}
    if not entries:
        return snapshot
    copied = copy_git_objects(store, root, (entry.git_oid or "" for entry in entries.values()), hold)
    updated = Layered.over(snapshot)  # (a copy of the changed entries only)
    for path, entry in entries.items():
        blob = copied.get(entry.git_oid or "")
        if blob is not None:
            updated[path] = entry._replace(blob=blob, target=None)
        else:
            updated[path] = entry._replace(kind="uncovered", target=None, reason=GIT_OBJECT_GONE)
    return updated


def adopt_git_objects(store: StoreBackend, project: Project) -> int:
    """Copy into the store the git objects the project's stat cache still stands on; how many were copied.

    Rounds of ``ADOPT_ROUND_FILES``; each round's copies go into the newest cache in one
    write, so a scan that saved a cache meanwhile loses nothing (and a later round adopts it).

    The cache is decoded once: each round's result is kept decoded (``remember_snapshot``) as the cache the
    next round starts from, unless a scan saved another meanwhile. A round holds the cache it started from
    and the one it saves (they share every entry but the round's), never two decoded ones at once.
    """
    adopted = 0
    while True:
        cached = store.latest_snapshot(project.id, data=False)
        loaded = load_snapshot(store, cached.id) if cached else None  # read and decoded on a miss only
        if loaded is None:
            return adopted
        on_git = ((path, entry.git_oid) for path, entry in loaded.snapshot.items() if entry.git_oid)
        pending = list(itertools.islice(on_git, ADOPT_ROUND_FILES))
        del loaded, on_git
        if not pending:
            return adopted
        hold = BlobHold(store, project.id)  # released once the round's cache names its copies
        try:
            copied = copy_git_objects(store, project.root, (oid for _, oid in pending if oid), hold, teach=True)
            trim_heap()  # the copies' buffers, before the cache is encoded
            with store.transaction():
                newest = store.latest_snapshot(project.id, data=False)
                loaded = load_snapshot(store, newest.id) if newest else None
                if newest is None or loaded is None:
                    return adopted
                changes: dict[str, Entry] = {}
                for path, oid in pending:
                    entry = loaded.snapshot.get(path)
                    if entry is None or entry.git_oid != oid:
                        continue  # rescanned since: the scan decided what it holds
                    blob = copied.get(oid or "")
                    changes[path] = (
                        entry._replace(blob=blob, target=None)
                        if blob is not None
                        else entry._replace(kind="uncovered", target=None, reason=GIT_OBJECT_GONE)
                    )
                current = loaded.snapshot.flat()
                # A layered cache's flat view is a new dict; a cache of one layer gives its own entries, which the
                # decoded cache other readers hold shares: copied before the round's changes go in.
                current = dict(current) if current is loaded.snapshot.full.entries else current
                del loaded
                current.update(changes)
                adopted += len(changes)
                del changes, copied, pending
                snapshot_id = store.save_snapshot(
                    project.id,
                    encode_snapshot(current),
                    len(current),
                    watch_token=newest.watch_token,
                    content_bytes=content_bytes(current),
                )
        finally:
            hold.release()
        remember_snapshot(store, stored_snapshot(snapshot_id, current))  # the next round's start: not decoded again
        del current
        trim_heap()  # what the round freed (the cache it started from, the encoded one)


def named_paths(argv: Sequence[str], cwd: str) -> list[str]:
    """Paths a command line names (words of ``sh -c`` strings and redirections too), as absolute paths.

    A word counts when it looks like a path (has a ``/``, starts with ``~``)
    or names something that exists in *cwd*, and its folder exists. Each is
    the real path of its folder plus its own name, so it names the entry
    itself, not what a link there points to.
    """
    words: list[str] = []
    for arg in argv[1:]:
        words.append(arg)
        if any(c in arg for c in " ;|&><"):
            lexer = shlex.shlex(arg, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            try:
                words.extend(lexer)
            except ValueError:  # an unclosed quote: the plain words are the best guess
                words.extend(arg.split())
    found: dict[str, None] = {}
    for word in words:
        for candidate in {word, word.split("=", 1)[-1]}:
            candidate = candidate.lstrip("<>&0123456789") if candidate[:1] in "<>0123456789" else candidate
            if not candidate or candidate.startswith("-") or "\0" in candidate:
                continue
            full = os.path.normpath(os.path.join(cwd, os.path.expanduser(candidate)))
            if not (candidate.startswith("~") or "/" in candidate or os.path.lexists(full)):
                continue
            parent, name = os.path.split(full)
            if name and os.path.isdir(parent):
                found.setdefault(spelled(full))
    return list(found)


def is_inside(path: str, root: str) -> bool:
    return path == root.rstrip("/") or path.startswith(root.rstrip("/") + "/")


def store_folder(store: StoreBackend) -> str:
    """The store's folder as the paths a command names are spelled (its real path)."""
    return os.path.realpath(store.home)


def named_outside_paths(argv: Sequence[str], cwd: str, project_root: str, store_home: str) -> list[str]:
    """The paths outside the project that a command line names, but never the store's folder or a path in it.

    turnback itself writes the store while the command runs: that is no change of the command's.
    """
    return [
        path for path in named_paths(argv, cwd) if not is_inside(path, project_root) and not is_inside(path, store_home)
    ]


def _stamp(path: str, store_home: str) -> tuple[int, int, int, str] | None:
    """What an outside path that is not copied looks like, to tell later whether it changed (the store left out)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    below = folder_fingerprint(path, leave_out=store_home) if stat.S_ISDIR(st.st_mode) else ""
    return (st.st_size, st.st_mtime_ns, st.st_mode, below)


def _too_large_folder(path: str, rules: OutsideRules) -> bool:
    files = size = 0
    for folder, _dirs, names in os.walk(path):
        for name in names:
            files += 1
            try:
                size += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
        if files > rules.home_max_files or size > rules.home_max_bytes:
            return True
    return False


def _scan_outside(store: StoreBackend, path: str, rules: OutsideRules, hold: BlobHold) -> Snapshot:
    """One outside path (a file, a link, or a whole folder) as a snapshot keyed by absolute path; what it stores
    is held by *hold* (the command's project scan's)."""
    parent, name = os.path.split(path)
    home = store_folder(store)
    skip = frozenset([os.path.relpath(home, parent)]) if is_inside(home, path) else frozenset()  # a folder holding it
    scan_rules = ScanRules(max_file_bytes=rules.home_max_bytes, max_file_mib=rules.home_max_mib, skip=skip)
    result = scan_tree(store, parent, scan_rules, None, now_ns=time.time_ns(), only=name, hold=hold)
    return {os.path.join(parent, rel): entry for rel, entry in result.snapshot.items()}


def outside_copy_refusal(path: str, rules: OutsideRules) -> Message | None:
    """Why the outside path *path* would not be copied before a command (the mode, or its size), if it would not."""
    if rules.mode in ("manual", "cautious"):
        return Message("mode_copies_nothing_outside", mode=rules.mode)
    if os.path.isdir(path) and not os.path.islink(path) and _too_large_folder(path, rules):
        return Message("outside_folder_too_large", files=rules.home_max_files, mib=rules.home_max_mib)
    return None


def watch_outside(
    store: StoreBackend, paths: Sequence[str], rules: OutsideRules, hold: BlobHold
) -> tuple[tuple[Watch, ...], Snapshot]:
    """Copy each outside path before the command runs, as far as the mode and the limits allow (under *hold*)."""
    watches: list[Watch] = []
    outside: Snapshot = {}
    for path in paths:
        reason = outside_copy_refusal(path, rules)
        if reason is not None:
            watches.append(Watch(path, False, reason, _stamp(path, store_folder(store))))
            continue
        outside.update(_scan_outside(store, path, rules, hold))
        watches.append(Watch(path, True, None, None))
    return tuple(watches), outside


# -- recording ----------------------------------------------------------------------------


def start_call(
    target: CallTarget,
    argv: Sequence[str],
    cwd: str,
    rules: ScanRules,
    outside_rules: OutsideRules,
    *,
    kind: CallKind,
    unasked: bool,
    external_id: tuple[str, str] | None = None,
) -> tuple[CallId, CallBefore]:
    """Scan the baseline, copy the outside paths the command names, and record a running call (known to its
    harness as *external_id*: kind, id). The baseline and the call are kept in one transaction."""
    store = target.store
    with scan_pending(store, target.project, rules) as pending:
        outside_paths = named_outside_paths(argv, cwd, target.project.root, store_folder(store))
        watches, outside = watch_outside(store, outside_paths, outside_rules, pending.hold)
        raw_input = json.dumps({"command": list(argv), "cwd": os.path.relpath(cwd, target.project.root)})
        with store.transaction():
            baseline = pending.keep(store)
            before = CallBefore(baseline.snapshot_id, baseline.snapshot, watches, outside)
            snapshot_id = store.save_snapshot(target.project.id, before.encode(), len(outside), purpose="call")
            call_id = store.create_call(
                target.turn,
                "exec",
                raw_input,
                kind=kind,
                snapshot_id=snapshot_id,
                baseline_id=baseline.snapshot_id,
                unasked=unasked,
            )
            if external_id is not None:
                store.set_call_external_id(call_id, store.external_id(*external_id))
    pending.adopt(store)
    return call_id, before


def _state(entry: Entry | None) -> FileState:
    return ABSENT if entry is None else entry.state()


def _reason(change: TreeChange) -> Message | None:
    for entry in (change.after, change.before):
        if entry is not None and entry.kind == "uncovered":
            return entry.reason_message()
    return None


def finish_call(
    store: StoreBackend,
    project: Project,
    call: Call,
    before: CallBefore,
    rules: ScanRules,
    outside_rules: OutsideRules,
    *,
    exit_code: int | None,
    error: Message | None = None,
    started_ns: int | None = None,
    only: Iterable[str] | None = None,
) -> None:
    """Scan after the command, and record the difference from its snapshot as the call's changes.

    *started_ns*: when the command really started, if known (later than its snapshot when the harness asked
    the user first). A path whose ctime, which no program can set back, is earlier was changed before the
    command ran: not the command's. A path whose state did not change (rewritten with the same bytes) is no
    change at all. *only*: the paths the call can have changed (every other difference is not its).
    """
    with scan_pending(store, project, rules) as pending:
        after = pending.snapshot
        changes: list[tuple[str, FileState, FileState, bool, Message | None]] = []
        # A partial scan from the command's own baseline knows the only paths that can differ.
        since_id = pending.cached.id if pending.cached is not None else None
        where = pending.touched if since_id == before.baseline_id else None
        if only is not None:
            where = set(only) if where is None else where & set(only)
        differences = diff_snapshots(before.project, after, where)
        if any((c.before and c.before.git_oid) or (c.after and c.after.git_oid) for c in differences):
            touched = [change.path for change in differences]
            baseline = _with_git_copies(store, project.root, before.project, touched, pending.hold)
            now = _with_git_copies(store, project.root, after, touched, pending.hold)
            differences = [TreeChange(c.path, baseline.get(c.path), now.get(c.path)) for c in differences]
        for change in differences:
            # Changed while the command waited to start (the user, during a permission prompt); but an excluded
            # folder's ctime is its own, which a change below it leaves as it was: that is kept (not covered, so
            # never undone).
            if (
                started_ns is not None
                and change.after is not None
                and change.after.ctime_ns < started_ns
                and not (change.after.kind == "uncovered" and stat.S_ISDIR(change.after.mode))
            ):
                continue
            old, new = _state(change.before), _state(change.after)
            if old == new and change.after is not None and change.after.kind != "uncovered":
                continue
            changes.append((change.path, old, new, False, _reason(change)))
        for watch in before.watches:
            if watch.copied:
                inside = {p: e for p, e in before.outside.items() if p == watch.path or p.startswith(watch.path + "/")}
                now = _scan_outside(store, watch.path, outside_rules, pending.hold)
                for change in diff_snapshots(inside, now):
                    changes.append((change.path, _state(change.before), _state(change.after), True, _reason(change)))
            elif _stamp(watch.path, store_folder(store)) != (tuple(watch.stamp) if watch.stamp else None):
                changed = FileState("file") if os.path.lexists(watch.path) else ABSENT
                was = FileState("file") if watch.stamp is not None else ABSENT
                changes.append((watch.path, was, changed, True, watch.reason))
        turn = store.turn(call.turn_id)
        with store.transaction():  # the new stat cache and the call's changes: one commit
            pending.keep(store)
            for seq, (path, old, new, outside, reason) in enumerate(changes):
                store.add_change(call.id, seq, project.id, RelPath(path), old, new, outside=outside, not_covered=reason)
            store.finish_call(
                call.id,
                "done" if error is None else "failed",
                error,
                exit_code=exit_code,
                late=turn.status != "running",
            )
    pending.adopt(store)


def record_since_last_scan(
    target: CallTarget,
    tool: str,
    raw_input: str,
    path: str,
    rules: ScanRules,
    outside_rules: OutsideRules,
    *,
    no_scan: Message,
) -> CallId:
    """Record a call that already changed the project path *path*, with no event before it (Cursor's
    afterFileEdit): what *path* held before is what the project's last scan saw; the project is scanned now,
    and what differs at *path* is the call's change. With no scan before it, that change is recorded as not
    covered, *no_scan* saying why (and this scan is the next call's baseline)."""
    store, project = target.store, target.project
    cached = store.latest_snapshot(project.id, data=False)
    stored = load_snapshot(store, cached.id) if cached is not None else None
    with store.transaction():
        call_id = store.create_call(target.turn, tool, raw_input)
    call = store.call(call_id)
    if stored is None:
        now = scan_project(store, project, rules).snapshot.get(path)
        with store.transaction():
            store.add_change(call_id, 0, project.id, RelPath(path), FileState("file"), _state(now), not_covered=no_scan)
            store.finish_call(call_id, "done", None, late=store.turn(call.turn_id).status != "running")
        return call_id
    before = CallBefore(stored.id, stored.snapshot, (), {})
    finish_call(store, project, call, before, rules, outside_rules, exit_code=None, only=[path])
    return call_id


def load_call_before(store: StoreBackend, call_id: CallId) -> CallBefore:
    snapshot_id, baseline_id = store.call_snapshot_ids(call_id)
    data = store.snapshot(snapshot_id) if snapshot_id else None
    loaded = load_snapshot(store, baseline_id) if baseline_id else None
    project = loaded.snapshot if loaded is not None else None
    if data is None or baseline_id is None or project is None:
        raise StoreError(Message("command_snapshot_missing", call=short_id(call_id)))
    return CallBefore.decode(data, baseline_id, project)


# -- processes ----------------------------------------------------------------------------


def spawn_helper(
    store: StoreBackend, args: Sequence[str], *, cwd: str, output: IO[bytes] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``turnback --store HOME ARGS`` detached (its own session, no terminal): a watcher or a job runner.

    It opens the store as this process did: with the same key secret, when one was given, and the same database.
    """
    env = dict(os.environ)
    if store.key_secret is not None:
        env["TURNBACK_KEY"] = store.key_secret
    if store.database_url is not None:
        env["TURNBACK_STORE"] = store.database_url
    return subprocess.Popen(
        [sys.executable, "-m", "turnback", "--store", store.home, *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=output if output is not None else subprocess.DEVNULL,
        stderr=subprocess.STDOUT if output is not None else subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        env=env,
    )


def wait_for_process(pid: int, start: int | None) -> None:
    """Wait until *pid*, which is not this process's child, has ended."""
    delay = 0.02
    while process_alive(pid, start):
        time.sleep(delay)
        delay = min(delay * 2, WATCH_POLL_S)


def stop_process_group(pid: int) -> None:
    """Ask a command to end with SIGTERM: its whole process group when it leads one (a job), else it alone.

    A foreground command shares the process group of whatever ran ``exec``
    (so a terminal's ^C reaches it); signalling that group would stop the
    harness too.
    """
    try:
        group = os.getpgid(pid)
        if group == pid:
            os.killpg(group, signal.SIGTERM)
        else:
            os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


__all__ = [
    "CallBefore",
    "OutsideRules",
    "ProjectScan",
    "Watch",
    "adopt_git_objects",
    "copy_git_objects",
    "finish_call",
    "first_snapshot_elsewhere",
    "is_inside",
    "load_call_before",
    "named_outside_paths",
    "named_paths",
    "outside_copy_refusal",
    "scan_project",
    "spawn_helper",
    "start_call",
    "stop_process_group",
    "store_folder",
    "wait_for_process",
    "watch_outside",
]

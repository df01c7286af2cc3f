"""Tree snapshots of a project: a stat cache that re-reads only what changed.

A scan walks the project (``dir_fd`` by ``dir_fd``, never following a link,
never entering ``.git``), and for each file compares its stat (size,
mtime_ns, ctime_ns, inode, mode) with the previous snapshot. A file whose
stat is unchanged keeps its content id without being read; any other file is
read and its content stored (deduplicated, compressed, encrypted). The first
scan of a project therefore stores the whole tree once.

git's "racy" rule: a file modified within a timestamp tick of the scan's
start may be modified again within the same tick without its stat changing,
so its entry is marked racy and the next scan reads it again whatever its
stat says. The tick is taken as ``RACY_WINDOW_NS`` (2 s: FAT, HFS+ and ext3
keep whole or even seconds), or ``FINE_RACY_WINDOW_NS`` for a file whose
mtime has a fraction of a second, which only a file system with fine
timestamps records (their tick is the kernel clock's, a few ms).

What a snapshot leaves out is kept as an ``uncovered`` entry with the reason
(over ``snapshot.max_file_mib``, matched by ``snapshot.exclude``, a FIFO,
socket or device, unreadable), so a change to it is reported, never silent.

The snapshot of a project is kept as one record (marshal, zstandard,
AES-GCM) rather than a row per file, like git's index.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import gc
import hashlib
import itertools
import marshal
import os
import signal
import stat
import struct
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Literal, NamedTuple, NoReturn

import zstandard

from turnback.capture.gitindex import GIT_PREFIX, GitIndex, blob_oid_hasher, object_for
from turnback.globs import folder_matches, glob_matches
from turnback.model import BlobId, FileState
from turnback.store import Store
from turnback.store.blobs import DICT_MAX_BLOB

RACY_WINDOW_NS = 2_000_000_000
FINE_RACY_WINDOW_NS = 100_000_000
BATCH_FILES = 256
BATCH_BYTES = 64 << 20
READ_ATTEMPTS = 3
DICT_SAMPLES = 1000  # small files a first scan trains the store's dictionary on (about 0.4 s)
SNAPSHOT_FORMAT = 3
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

EntryKind = Literal["file", "symlink", "dir", "uncovered"]


class Entry(NamedTuple):
    """One path of a snapshot: its stat, and its content id or link target, or why it is left out."""

    kind: EntryKind
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    mode: int
    blob: bytes | None = None
    target: str | None = None
    reason: str | None = None
    racy: bool = False
    linked: bool = False  # a file with other names: a write through one of them is seen by the others' scan

    def stat_key(self) -> tuple[int, int, int, int, int]:
        return (self.size, self.mtime_ns, self.ctime_ns, self.ino, self.mode)

    def stat_matches(self, st: os.stat_result) -> bool:
        return (self.size, self.mtime_ns, self.ctime_ns, self.ino, self.mode) == (
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
            st.st_ino,
            st.st_mode,
        )

    @property
    def git_oid(self) -> str | None:
        """The git object a file's content is, while it is not copied into the store yet."""
        if self.kind == "file" and self.target is not None and self.target.startswith(GIT_PREFIX):
            return self.target[len(GIT_PREFIX) :]
        return None

    def same_content(self, other: Entry) -> bool:
        """Whether *other* holds the same thing (what a change is made of, not when it was stat'ed)."""
        if self.kind != other.kind:
            return False
        if self.kind == "file":
            copied = (self.git_oid is None) != (other.git_oid is None) and not (self.racy or other.racy)
            if copied and self.stat_key() == other.stat_key():
                return True  # a git object and the copy made of it (the background copy), the file untouched
            return (self.blob, self.target) == (other.blob, other.target) and stat.S_IMODE(self.mode) == stat.S_IMODE(
                other.mode
            )
        if self.kind == "symlink":
            return self.target == other.target
        if self.kind == "dir":
            return stat.S_IMODE(self.mode) == stat.S_IMODE(other.mode)
        return (self.size, self.mtime_ns, self.ino, self.mode, self.target) == (
            other.size,
            other.mtime_ns,
            other.ino,
            other.mode,
            other.target,
        )

    def state(self) -> FileState:
        """The entry as a recorded state (an uncovered file is a file without content).

        A file whose content is still a git object has to be copied into the store first.
        """
        assert self.git_oid is None, "copy the git object into the store first"
        if self.kind == "file":
            return FileState(
                "file", blob=BlobId(self.blob) if self.blob else None, size=self.size, mode=stat.S_IMODE(self.mode)
            )
        if self.kind == "symlink":
            return FileState("symlink", target=self.target)
        if self.kind == "dir" or stat.S_ISDIR(self.mode):
            return FileState("dir", mode=stat.S_IMODE(self.mode))
        if stat.S_ISREG(self.mode):
            return FileState("file", size=self.size, mode=stat.S_IMODE(self.mode))
        return FileState("special")


Snapshot = dict[str, Entry]


def folder_fingerprint(path: str, *, leave_out: str | None = None) -> str:
    """A digest of every name, size, mtime and mode below the folder *path* (stat only, links not followed).

    It tells whether anything inside a folder turnback does not copy (an
    excluded one, an outside one over the limits) changed, without reading it.
    *leave_out*: a folder below it that is not looked at (turnback's store, which turnback itself writes).
    """
    digest = hashlib.blake2b(digest_size=16)
    for folder, dirs, files in os.walk(path):
        if leave_out is not None:
            dirs[:] = [name for name in dirs if os.path.join(folder, name) != leave_out]
        dirs.sort()
        for name in sorted(files) + dirs:
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            rel = os.path.relpath(os.path.join(folder, name), path)
            digest.update(os.fsencode(rel) + f"\0{st.st_size}:{st.st_mtime_ns}:{st.st_mode}\0".encode())
    return digest.hexdigest()


def _entry(
    kind: EntryKind,
    st: os.stat_result,
    *,
    blob: bytes | None = None,
    target: str | None = None,
    reason: str | None = None,
    racy: bool = False,
) -> Entry:
    linked = st.st_nlink > 1 and stat.S_ISREG(st.st_mode)
    return Entry(
        kind, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode, blob, target, reason, racy, linked
    )


SNAPSHOT_DELTA_FORMAT = 4
Delta = dict[str, Entry | None]  # path: its entry now, or None where the path went


def encode_snapshot_delta(base_id: str, delta: Delta) -> bytes:
    """A stat cache as the entries that differ from the full one *base_id* (None: the path is gone)."""
    entries = [None if entry is None else tuple(entry) for entry in delta.values()]
    data = marshal.dumps((base_id, list(delta), entries))
    return bytes([SNAPSHOT_DELTA_FORMAT]) + zstandard.ZstdCompressor(level=1).compress(data)


def decode_snapshot_delta(data: bytes) -> tuple[str, Delta] | None:
    """The base id and the entries of a delta; ``None`` when *data* is not one this version reads."""
    if not data or data[0] != SNAPSHOT_DELTA_FORMAT:
        return None
    try:
        base_id, paths, entries = marshal.loads(zstandard.ZstdDecompressor().decompress(data[1:]))
        return base_id, dict(zip(paths, (None if e is None else Entry._make(e) for e in entries), strict=True))
    except (ValueError, EOFError, TypeError, zstandard.ZstdError):
        return None


def stored_entries(data: bytes) -> list[Entry]:
    """The entries a saved stat cache holds itself: all of a full one, the changed ones of a delta."""
    full = decode_snapshot(data)
    if full is not None:
        return list(full.values())
    delta = decode_snapshot_delta(data)
    return [entry for entry in delta[1].values() if entry is not None] if delta else []


def encode_snapshot(snapshot: Snapshot) -> bytes:
    # Paths and entries as two plain lists: marshal and the decoder's Entry._make
    # then run at C speed, which matters at 100k entries per scan.
    data = marshal.dumps((list(snapshot), [tuple(entry) for entry in snapshot.values()]))
    return bytes([SNAPSHOT_FORMAT]) + zstandard.ZstdCompressor(level=1).compress(data)


def content_bytes(snapshot: Snapshot) -> int:
    """How much content the snapshot's stored copies hold (each copy once)."""
    return sum({entry.blob: entry.size for entry in snapshot.values() if entry.blob}.values())


def decode_snapshot(data: bytes) -> Snapshot | None:
    """The snapshot in *data*; ``None`` for a format this version does not read (the next scan rebuilds it)."""
    if not data or data[0] != SNAPSHOT_FORMAT:
        return None
    try:
        paths, entries = marshal.loads(zstandard.ZstdDecompressor().decompress(data[1:]))
        return dict(zip(paths, map(Entry._make, entries), strict=True))
    except (ValueError, EOFError, TypeError, zstandard.ZstdError):
        return None


class StoredSnapshot(NamedTuple):
    """A saved stat cache, decoded: its entries, and (a delta) the full cache it is built on and what differs."""

    id: str
    snapshot: Snapshot  # shared by every caller of load_snapshot: never changed in place
    base_id: str | None
    delta: Delta | None


# The newest decoded cache of this process: a command's scan after reads the cache its scan before saved,
# and a harness that embeds the engine scans again and again, so each is decoded (or built) once. One only:
# at 100k files a decoded cache takes about 90 MB.
_LOADED: dict[tuple[str, str], StoredSnapshot] = {}
_LOADED_KEEP = 1


def remember_snapshot(store: Store, stored: StoredSnapshot) -> StoredSnapshot:
    key = (store.home, stored.id)
    _LOADED.pop(key, None)
    _LOADED[key] = stored
    while len(_LOADED) > _LOADED_KEEP:
        del _LOADED[next(iter(_LOADED))]
    return stored


def load_snapshot(store: Store, snapshot_id: str, data: bytes | None = None) -> StoredSnapshot | None:
    """The saved stat cache *snapshot_id* (its sealed *data*, when the caller has read it); ``None`` when it is
    gone or in a format this version does not read (the next scan then rebuilds it)."""
    hit = _LOADED.get((store.home, snapshot_id))
    if hit is not None:
        return hit
    if data is None:
        data = store.snapshot(snapshot_id)
        if data is None:
            return None
    full = decode_snapshot(data)
    if full is not None:
        return remember_snapshot(store, StoredSnapshot(snapshot_id, full, None, None))
    decoded = decode_snapshot_delta(data)
    if decoded is None:
        return None
    base_id, delta = decoded
    base = load_snapshot(store, base_id)
    if base is None or base.base_id is not None:
        return None
    snapshot = dict(base.snapshot)
    for path, entry in delta.items():
        if entry is None:
            snapshot.pop(path, None)
        else:
            snapshot[path] = entry
    return remember_snapshot(store, StoredSnapshot(snapshot_id, snapshot, base_id, delta))


class ScanRules(NamedTuple):
    """What a scan leaves out: files over *max_file_bytes*, paths matched by *exclude*."""

    max_file_bytes: int
    exclude: tuple[str, ...] = ()
    max_file_mib: int = 16
    skip: frozenset[str] = frozenset()  # paths never listed at all: turnback's own store, when inside the tree

    def excluded_by(self, path: str, *, is_dir: bool) -> str | None:
        for glob in self.exclude:
            if folder_matches(glob, path) if is_dir else glob_matches(glob, path):
                return glob
        return None


class ScanResult(NamedTuple):
    snapshot: Snapshot
    files_read: int
    bytes_read: int
    touched: set[str] | None = None  # a partial scan: the only paths whose entries may differ from the previous


class _BatchedWriter:
    """Stores contents in transactions of up to ``BATCH_FILES`` files or ``BATCH_BYTES`` bytes.

    *teach*: a store's first scan holds its first small files back until it
    has trained the store's dictionary on them, so they and all that follow
    compress against it (their ids are known before they are stored).
    """

    def __init__(self, store: Store, *, teach: bool = False):
        self._store = store
        self._open: contextlib.ExitStack | None = None
        self._files = 0
        self._bytes = 0
        self._held: list[tuple[BlobId, bytes]] | None = [] if teach and not store.blobs.has_dictionary() else None

    def _transaction(self) -> None:
        if self._open is None:
            self._open = contextlib.ExitStack()
            self._open.enter_context(self._store.transaction())

    def put(self, chunks: Iterable[bytes]) -> tuple[BlobId, int]:
        if self._held is not None:
            pieces: list[bytes] = []
            size = 0
            iterator = iter(chunks)
            for piece in iterator:
                pieces.append(piece)
                size += len(piece)
                if size > DICT_MAX_BLOB:
                    chunks = itertools.chain(pieces, iterator)
                    break
            else:
                data = b"".join(pieces)
                blob = self._store.crypto.content_id(data)
                self._held.append((blob, data))
                if len(self._held) >= DICT_SAMPLES:
                    self._teach()
                return blob, size
        self._transaction()
        blob, size = self._store.put_content(chunks)
        self._files += 1
        self._bytes += size
        if self._files >= BATCH_FILES or self._bytes >= BATCH_BYTES:
            self.commit()
        return blob, size

    def _teach(self) -> None:
        """Train the dictionary on the files held back (when they are enough), then store them."""
        held, self._held = self._held or [], None
        self._transaction()
        self._store.blobs.train_dictionary([data for _, data in held])
        for _, data in held:
            self._store.put_content([data])

    def commit(self) -> None:
        if self._held:
            self._teach()
        if self._open is not None:
            transaction, self._open = self._open, None
            self._files = self._bytes = 0
            transaction.close()

    def abort(self, exc: BaseException) -> None:
        self._held = None
        if self._open is not None:
            transaction, self._open = self._open, None
            transaction.__exit__(type(exc), exc, exc.__traceback__)


def _chunks(fd: int, also: hashlib._Hash | None = None) -> Iterator[bytes]:
    while chunk := os.read(fd, 1 << 20):
        if also is not None:
            also.update(chunk)
        yield chunk


class _Named:
    """One name in an open folder, looked at the way ``os.scandir``'s entries are."""

    __slots__ = ("_dir_fd", "name")

    def __init__(self, dir_fd: int, name: str):
        self._dir_fd = dir_fd
        self.name = name

    def stat(self, *, follow_symlinks: bool) -> os.stat_result:
        return os.stat(self.name, dir_fd=self._dir_fd, follow_symlinks=follow_symlinks)


class _Scanner:
    keeps_unchanged = True  # an entry found as the last scan left it goes into the snapshot (else it is counted)

    def __init__(
        self,
        rules: ScanRules,
        previous: Snapshot,
        put: Callable[[Iterable[bytes]], tuple[BlobId, int]],
        scan_start_ns: int,
        only: str | None = None,
        root: str = "",
        git_index: GitIndex | None = None,
    ):
        self.only = only
        self.root = root
        self.git_index = git_index
        self.rules = rules
        self.previous = previous
        self.put = put
        self.scan_start_ns = scan_start_ns
        self.snapshot: Snapshot = {}
        self.unchanged = 0  # entries found as the last scan left them
        self.files_read = 0
        self.bytes_read = 0

    def _racy(self, mtime_ns: int) -> bool:
        window = FINE_RACY_WINDOW_NS if mtime_ns % 1_000_000_000 else RACY_WINDOW_NS
        return mtime_ns >= self.scan_start_ns - window

    def _uncovered(self, path: str, st: os.stat_result, reason: str) -> None:
        self.snapshot[path] = _entry("uncovered", st, reason=reason)

    def _read_file(self, dir_fd: int, name: str, path: str, st: os.stat_result) -> None:
        """Read and store one file; retry when it changes while read, then keep what was read as racy."""
        last: Entry | None = None
        for _attempt in range(READ_ATTEMPTS):
            try:
                fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
            except FileNotFoundError:
                return  # gone since the listing: it is not in the tree
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EPERM):
                    self._uncovered(path, st, "unreadable: permission denied")
                elif exc.errno == errno.ELOOP:
                    self._scan_entry(dir_fd, name, path)  # replaced by a link since the listing
                else:
                    self._uncovered(path, st, f"unreadable: {exc.strerror}")
                return
            try:
                opened = os.fstat(fd)
                if not stat.S_ISREG(opened.st_mode):
                    self._uncovered(path, opened, "a FIFO, socket or device")
                    return
                was = self.previous.get(path)
                oid = was.git_oid if was is not None else None
                git_hasher = blob_oid_hasher(opened.st_size) if oid else None
                try:
                    blob, size = self.put(_chunks(fd, git_hasher))
                except OSError as exc:
                    self._uncovered(path, opened, f"unreadable: {exc.strerror}")
                    return
                ended = os.fstat(fd)
            finally:
                os.close(fd)
            self.files_read += 1
            self.bytes_read += size
            racy = self._racy(opened.st_mtime_ns)
            last = _entry("file", opened, blob=blob, racy=racy)
            if git_hasher is not None and git_hasher.hexdigest() == oid:  # touched, not changed: still that object
                last = _entry("file", opened, target=GIT_PREFIX + oid, racy=racy)
            if size == opened.st_size and (ended.st_size, ended.st_mtime_ns) == (opened.st_size, opened.st_mtime_ns):
                if size > self.rules.max_file_bytes:
                    self._uncovered(path, ended, self._too_large())
                else:
                    self.snapshot[path] = last
                return
        assert last is not None
        self.snapshot[path] = last._replace(racy=True)  # it kept changing: what was read, read again next time

    def _too_large(self) -> str:
        return f"larger than snapshot.max_file_mib ({self.rules.max_file_mib} MiB)"

    def _scan_entry(self, dir_fd: int, name: str, path: str) -> bool:
        """Record one entry; True when it is a folder to enter."""
        prefix = path[: len(path) - len(name)]
        return bool(self._visit(dir_fd, prefix, [_Named(dir_fd, name)]))

    def _record(self, dir_fd: int, name: str, path: str, st: os.stat_result) -> bool:
        """Record the entry *st* found at *path*, new or changed since the last scan; True when it is a folder
        to enter."""
        is_dir = stat.S_ISDIR(st.st_mode)
        glob = self.rules.excluded_by(path, is_dir=is_dir)
        if glob is not None:
            reason = f"excluded by snapshot.exclude ({glob})"
            if is_dir:  # not entered, but a change anywhere below it is still noticed (and said so)
                fingerprint = folder_fingerprint(os.path.join(self.root, path))
                self.snapshot[path] = _entry("uncovered", st, target=fingerprint, reason=reason)
            else:
                self._uncovered(path, st, reason)
            return False
        if is_dir:
            self.snapshot[path] = _entry("dir", st)
            return True
        if stat.S_ISLNK(st.st_mode):
            try:
                self.snapshot[path] = _entry("symlink", st, target=os.readlink(name, dir_fd=dir_fd))
            except OSError:
                pass  # gone or replaced since the stat: not in this tree
            return False
        if not stat.S_ISREG(st.st_mode):
            self._uncovered(path, st, "a FIFO, socket or device")
            return False
        if st.st_size > self.rules.max_file_bytes:
            self._uncovered(path, st, self._too_large())
            return False
        oid = object_for(self.git_index, path, st) if self.git_index is not None else None
        if oid is not None:  # git's index vouches for it: its object, not read now (gitindex.py)
            self.snapshot[path] = _entry("file", st, target=GIT_PREFIX + oid)
            return False
        self._read_file(dir_fd, name, path, st)
        return False

    def _list(self, dir_fd: int, prefix: str) -> list[str]:
        """Record the entries of one folder; return the names of the folders to enter."""
        try:
            with os.scandir(dir_fd) as listing:
                entries = list(listing)
        except OSError as exc:
            self._folder_unreadable(prefix.rstrip("/"), exc)
            return []
        if self.only is not None and not prefix:
            entries = [entry for entry in entries if entry.name == self.only]
        return self._visit(dir_fd, prefix, entries)

    def _visit(self, dir_fd: int, prefix: str, entries: Iterable[os.DirEntry[str] | _Named]) -> list[str]:
        """Record *entries* of the folder *dir_fd* (at *prefix*); return the names of the folders to enter.

        This loop runs once per path of the tree, and what it costs is what a scan that finds nothing changed
        costs: so the common case, an entry as the last scan left it, is decided here, inline.
        """
        folders = []
        skip = self.rules.skip
        previous_of = self.previous.get
        snapshot = self.snapshot
        keep = self.keeps_unchanged
        unchanged = 0
        plain = not self.rules.exclude
        max_bytes = self.rules.max_file_bytes
        for entry in entries:
            name = entry.name
            path = prefix + name
            if name == ".git" or (skip and path in skip):
                continue  # never read: a repository's (or a submodule's) own files, turnback's own store
            try:
                st = entry.stat(follow_symlinks=False)  # fstatat on the folder's descriptor: no link followed
            except FileNotFoundError:
                continue  # gone since the listing
            except OSError as exc:
                self._entry_unreadable(path, exc)
                continue
            previous = previous_of(path)
            if (
                previous is not None
                and not previous.racy
                and previous[1:6] == (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)
            ):
                kind = previous.kind
                if ((kind == "file" and st.st_size <= max_bytes) or kind == "dir") and (
                    plain or self.rules.excluded_by(path, is_dir=kind == "dir") is None
                ):
                    if keep:
                        snapshot[path] = previous  # the very entry: a scan that changed nothing changed no entry
                    else:
                        unchanged += 1
                    if kind == "dir":
                        folders.append(name)
                    continue
            if self._record(dir_fd, name, path, st):
                folders.append(name)
        self.unchanged += unchanged
        return folders

    def _entry_unreadable(self, path: str, exc: OSError) -> None:
        self.snapshot[path] = Entry("uncovered", 0, 0, 0, 0, 0, reason=f"unreadable: {exc.strerror}")

    def _folder_unreadable(self, path: str, exc: OSError) -> None:
        if path in self.snapshot:
            self.snapshot[path] = self.snapshot[path]._replace(kind="uncovered", reason=f"unreadable: {exc.strerror}")

    def _folder_gone(self, path: str, exc: OSError) -> None:
        del self.snapshot[path]

    def _enter(self, fd: int, prefix: str, name: str) -> int | None:
        """The folder *name* of the listed folder *fd* opened, or ``None`` when it cannot be (and so recorded)."""
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                self._folder_gone(prefix + name, exc)
            else:
                self._folder_unreadable(prefix + name, exc)
            return None

    def walk(self, root: str) -> None:
        root_fd = os.open(root, _DIR_FLAGS)
        try:
            self.walk_from(root_fd, "")
        finally:
            os.close(root_fd)

    def walk_from(self, folder_fd: int, prefix: str) -> None:
        """Everything below the open folder *folder_fd* (at *prefix*), depth first, one open folder per level."""
        opened: list[int] = []  # the folders below it on the way down: closed however the walk ends
        try:
            stack = [(folder_fd, prefix, iter(self._list(folder_fd, prefix)))]
            while stack:
                fd, prefix, folders = stack[-1]
                name = next(folders, None)
                if name is None:
                    stack.pop()
                    if stack:  # not the folder it was given
                        os.close(opened.pop())
                    continue
                sub = self._enter(fd, prefix, name)
                if sub is not None:
                    opened.append(sub)
                    stack.append((sub, prefix + name + "/", iter(self._list(sub, prefix + name + "/"))))
        finally:
            for fd in opened:
                os.close(fd)


class _ChangeFinder(_Scanner):
    """A scan that stores nothing and reads no file: it notes which paths may differ from *previous*, for
    ``rescan_tree`` to record, and counts the others. Several of them walk one tree at once, in processes of
    their own, and only the process that forked them writes to the store.

    It keeps no object per path it meets: a process forked from a long-lived one shares that one's pages
    until either writes them, and new objects kept land on pages all over its heap, each then copied.
    """

    keeps_unchanged = False

    def __init__(self, rules: ScanRules, previous: Snapshot, scan_start_ns: int, root: str):
        super().__init__(rules, previous, _stores_nothing, scan_start_ns, None, root)
        self.changed: dict[str, bool] = {}
        self.closed: list[str] = []  # folders of *previous* met but not entered: all below them goes unmet

    def _record(self, dir_fd: int, name: str, path: str, st: os.stat_result) -> bool:
        was = self.previous.get(path)
        folder = stat.S_ISDIR(st.st_mode)
        was_folder = was is not None and was.kind == "dir"
        enter = folder and was_folder and self.rules.excluded_by(path, is_dir=True) is None
        self.changed[path] = False  # a folder new to the snapshot is walked whole by the rescan anyway
        if was_folder and not enter:
            self.closed.append(path)
        return enter

    def _entry_unreadable(self, path: str, exc: OSError) -> None:
        raise _NotKnown from exc  # what a full scan records then, only a full scan records

    def _folder_unreadable(self, path: str, exc: OSError) -> None:
        raise _NotKnown from exc

    def _folder_gone(self, path: str, exc: OSError) -> None:
        raise _NotKnown from exc  # it was counted as met: changing under the walk, a full scan takes it

    def known(self) -> int:
        """How many paths of *previous* this finder met."""
        return self.unchanged + sum(path in self.previous for path in self.changed)

    def take(self, queue: int, units: list[tuple[int, str]]) -> None:
        """Walk the units whose numbers this process reads first from the pipe *queue*."""
        while record := os.read(queue, _UNIT.size):  # a pipe read of 4 bytes is never split between readers
            self.walk_from(*units[_UNIT.unpack(record)[0]])


def _stores_nothing(chunks: Iterable[bytes]) -> tuple[BlobId, int]:
    raise AssertionError("a change finder reads no file")


# A full scan of a large tree is split over processes (a fork costs a few ms, a 50k-path walk ~0.4 s); the
# folders near the top are handed out one at a time, so that a process that is done takes the next one.
SPLIT_MIN_ENTRIES = 20_000
SPLIT_UNITS = 256
SPLIT_MAX_PROCESSES = 4
_UNIT = struct.Struct("<I")


def scan_processes() -> int:
    """How many processes a full scan of a large tree uses: ``TURNBACK_SCAN_PROCESSES``, or one per CPU this
    process may run on (at most ``SPLIT_MAX_PROCESSES``); one where forking is unsafe (other threads running)."""
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return 1
    wanted = os.environ.get("TURNBACK_SCAN_PROCESSES", "")
    if wanted.isdigit() and int(wanted) > 0:
        return int(wanted)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cpus, SPLIT_MAX_PROCESSES)


def _fork_finder(finder: _ChangeFinder, queue: int, units: list[tuple[int, str]], children: dict[int, int]) -> None:
    """Start a process that walks the units it reads from *queue* and sends what it found; note it in
    *children* (pid: the pipe it sends on) before any signal can cut the parent short."""
    found, sent = os.pipe()
    pid = -1
    try:
        with _signals_held():
            pid = os.fork()
            if pid == 0:
                _find_in_child(finder, queue, units, sent)
            children[pid] = found
    finally:
        os.close(sent)
        if pid < 0:
            os.close(found)


def _find_in_child(finder: _ChangeFinder, queue: int, units: list[tuple[int, str]], sent: int) -> NoReturn:
    """The child: walk, send, and leave without running any of the parent's clean-up."""
    code = 1
    try:
        stops = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        for stop in stops:  # not the handlers of the program that embeds turnback: these end the child, and only it
            signal.signal(stop, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)  # held since the fork
        gc.disable()  # a collection would touch, and so copy, every page of the parent's objects
        finder.unchanged, finder.changed, finder.closed = 0, {}, []
        finder.take(queue, units)
        found = marshal.dumps((finder.known(), finder.changed, finder.closed))
        with os.fdopen(sent, "wb") as out:
            out.write(found)
        code = 0
    finally:
        os._exit(code)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Signals wait (their handlers run after the block), so that the block is never cut short halfway."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def find_changes(
    root: str, rules: ScanRules, previous: Snapshot, *, now_ns: int, processes: int
) -> dict[str, bool] | None:
    """The paths a full scan of *root* would find changed since *previous*, found by *processes* processes
    that only stat, as ``rescan_tree`` takes them (each ``False``: a folder new to the snapshot is walked whole
    anyway); ``None`` when only a full scan can tell."""
    finder = _ChangeFinder(rules, previous, now_ns, root)
    frontier = collections.deque([(os.open(root, _DIR_FLAGS), "")])
    children: dict[int, int] = {}  # pid: the pipe it sends what it found on
    queue = -1
    try:
        while frontier and len(frontier) < SPLIT_UNITS:  # breadth first, until there are enough folders
            fd, prefix = frontier[0]
            for name in finder._list(fd, prefix):
                sub = finder._enter(fd, prefix, name)
                if sub is not None:
                    frontier.append((sub, prefix + name + "/"))
            os.close(frontier.popleft()[0])
        units = list(frontier)
        queue, feed = os.pipe()
        with os.fdopen(feed, "wb") as out:  # the pipe holds them all: 4 bytes a unit
            out.write(b"".join(_UNIT.pack(n) for n in range(len(units))))
        for _ in range(processes - 1):
            try:
                _fork_finder(finder, queue, units, children)
            except OSError:  # no more processes now: the ones there are walk it all
                break
        finder.take(queue, units)
        known = finder.known()
        changed = finder.changed
        for pid, found in list(children.items()):
            with os.fdopen(found, "rb", closefd=False) as pipe:
                payload = pipe.read()
            children[pid] = -1
            os.close(found)
            with _signals_held():  # a child reaped is a child forgotten, and the other way round
                status = os.waitpid(pid, 0)[1]
                del children[pid]
            if status != 0:
                return None
            their_known, their_changed, their_closed = marshal.loads(payload)
            known += their_known
            changed.update(their_changed)
            finder.closed += their_closed
        if known != len(previous):  # some paths have gone (the rescan finds them so), or the count is wrong
            gone = _gone(root, previous, changed, finder.closed, len(previous) - known)
            if gone is None:
                return None
            changed.update(dict.fromkeys(gone, False))
    except _NotKnown:
        return None
    finally:
        for pid in children:  # cut short: no child outlives the scan
            os.kill(pid, signal.SIGKILL)
        for pid, found in children.items():
            if found >= 0:
                os.close(found)
            os.waitpid(pid, 0)
        for fd, _ in frontier:
            os.close(fd)
        if queue >= 0:
            os.close(queue)
    return changed


def _gone(root: str, previous: Snapshot, changed: dict[str, bool], closed: list[str], missing: int) -> list[str] | None:
    """The *missing* paths of *previous* a walk did not meet, each named once (not what is below a folder gone,
    nor below one it met and did not enter, *closed*); ``None`` when what is found does not account for all.

    They are looked for in the folders the walk found changed (and the top one): adding or removing an entry
    sets a folder's mtime and ctime. The count checks it: were one gone from elsewhere, a full scan is done.
    """
    folders = {path for path in changed if (entry := previous.get(path)) is not None and entry.kind == "dir"}
    folders.difference_update(closed)
    folders.add("")
    were: dict[str, list[str]] = {}
    for path in previous:
        folder, _, name = path.rpartition("/")
        if folder in folders:
            were.setdefault(folder, []).append(name)
    gone: list[str] = []
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        for folder, names in were.items():
            fd = _open_folder(root_fd, folder)
            try:
                now = set(os.listdir(fd)) if fd is not None else set()  # no folder there now: all of it gone
            finally:
                if fd is not None:
                    os.close(fd)
            gone.extend(f"{folder}/{name}" if folder else name for name in names if name not in now)
    finally:
        os.close(root_fd)
    below = tuple(path + "/" for path in itertools.chain(gone, closed) if previous[path].kind == "dir")
    found = len(gone) + (sum(1 for path in previous if path.startswith(below)) if below else 0)
    return gone if found == missing else None


def scan_tree(
    store: Store,
    root: str,
    rules: ScanRules,
    previous: Snapshot | None,
    *,
    now_ns: int,
    only: str | None = None,
    git_index: GitIndex | None = None,
) -> ScanResult:
    """Snapshot the tree at *root*, storing the content of every file whose stat changed since *previous*.

    With *only*, just that one name in *root* (a file, link, or folder and all below it). With
    *git_index*, a file git's index vouches for is recorded as its git object, not read. A large tree
    scanned again is walked by several processes that only find what changed (``find_changes``); the
    changed paths are then recorded as a watcher's are.
    """
    if previous and only is None and len(previous) >= SPLIT_MIN_ENTRIES and (processes := scan_processes()) > 1:
        changed = find_changes(root, rules, previous, now_ns=now_ns, processes=processes)
        if changed is not None:
            result = rescan_tree(store, root, rules, previous, changed, now_ns=now_ns, walked=True)
            if result is not None:
                return result
    writer = _BatchedWriter(store, teach=previous is None and only is None)
    scanner = _Scanner(rules, previous or {}, writer.put, now_ns, only, root, git_index)
    try:
        scanner.walk(root)
    except BaseException as exc:
        writer.abort(exc)
        raise
    writer.commit()
    return ScanResult(scanner.snapshot, scanner.files_read, scanner.bytes_read)


class _NotKnown(Exception):
    """A partial scan met something only a full scan answers (an unreadable folder on the way)."""


def _open_folder(root_fd: int, rel: str) -> int | None:
    """The folder *rel* below *root_fd*, opened without following a link; ``None`` when it is not there."""
    fd = os.dup(root_fd)
    for name in rel.split("/") if rel else ():
        try:
            sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return None
            raise _NotKnown from exc
        os.close(fd)
        fd = sub
    return fd


def _units(previous: Snapshot, changed: dict[str, bool], rules: ScanRules, *, walked: bool) -> dict[str, bool]:
    """The paths a partial scan visits (and whether all below each, too) for the paths a watcher reports
    (or, *walked*, the paths a walk found changed).

    A path below a folder the snapshot does not list as a folder (a new one,
    an excluded one whose fingerprint it keeps) makes that folder the unit;
    for a watcher's paths, racy files are read again as a full scan would, and
    files with more than one name are visited every time (a write through
    another name is reported under that name only). A walk has compared the
    stat of each of those already.
    """
    units: dict[str, bool] = {}
    for path, deep in changed.items():
        parts = path.split("/")
        if not path or ".git" in parts or any("/".join(parts[:i]) in rules.skip for i in range(1, len(parts) + 1)):
            continue
        unit = path
        for i in range(1, len(parts)):
            entry = previous.get("/".join(parts[:i]))
            if entry is None or entry.kind != "dir":
                unit, deep = "/".join(parts[:i]), True
                break
        units[unit] = units.get(unit, False) or deep
    for path, entry in () if walked else previous.items():
        if entry.racy or entry.linked:  # inotify names only the link a file was written through
            units.setdefault(path, False)
    return units


def _below(path: str, folders: set[str]) -> bool:
    while "/" in path:
        path = path.rsplit("/", 1)[0]
        if path in folders:
            return True
    return False


def rescan_tree(
    store: Store,
    root: str,
    rules: ScanRules,
    previous: Snapshot,
    changed: dict[str, bool],
    *,
    now_ns: int,
    walked: bool = False,
) -> ScanResult | None:
    """*previous* brought up to date by visiting only *changed* (path: whether all below it too), as a
    watcher reports them (or, *walked*, as ``find_changes`` does); ``None`` when only a full scan can tell."""
    units = _units(previous, changed, rules, walked=walked)
    writer = _BatchedWriter(store)
    scanner = _Scanner(rules, previous, writer.put, now_ns, None, root)
    scanner.snapshot = dict(previous)
    cleared: set[str] = set()  # folders whose earlier contents go: gone, no longer folders, or walked anew
    walks: list[str] = []
    touched: set[str] = set(units)
    try:
        root_fd = os.open(root, _DIR_FLAGS)
        try:
            for unit in sorted(units, key=lambda p: (p.count("/"), p)):  # outermost first
                if _below(unit, cleared):
                    continue  # inside a folder walked whole
                old = scanner.snapshot.pop(unit, None)
                parent, _, name = unit.rpartition("/")
                parent_fd = _open_folder(root_fd, parent)
                was_folder = old is not None and old.kind == "dir"
                if parent_fd is None:
                    if was_folder:
                        cleared.add(unit)
                    continue
                try:
                    scanner._scan_entry(parent_fd, name, unit)
                finally:
                    os.close(parent_fd)
                new = scanner.snapshot.get(unit)
                if new is None or new.kind != "dir":
                    if was_folder:  # what was below it goes (a file's unit has nothing below it)
                        cleared.add(unit)
                elif units[unit] or not was_folder:
                    cleared.add(unit)
                    walks.append(unit)
            if cleared:
                gone = [p for p in scanner.snapshot if _below(p, cleared)]
                for path in gone:
                    del scanner.snapshot[path]
                touched.update(gone)
            for unit in walks:
                folder_fd = _open_folder(root_fd, unit)
                if folder_fd is not None:
                    size = len(scanner.snapshot)
                    try:
                        scanner.walk_from(folder_fd, unit + "/")
                    finally:
                        os.close(folder_fd)
                    # What was below the folder was cleared above, so the walk's entries are the newest keys.
                    touched.update(itertools.islice(reversed(scanner.snapshot), len(scanner.snapshot) - size))
        finally:
            os.close(root_fd)
    except _NotKnown:
        writer.commit()
        return None
    except BaseException as exc:
        writer.abort(exc)
        raise
    writer.commit()
    return ScanResult(scanner.snapshot, scanner.files_read, scanner.bytes_read, touched)


class TreeChange(NamedTuple):
    path: str
    before: Entry | None
    after: Entry | None


def diff_snapshots(before: Snapshot, after: Snapshot, paths: Iterable[str] | None = None) -> list[TreeChange]:
    """What changed from *before* to *after* (at *paths* only, when a partial scan knows where), in the order
    a record wants it.

    Removed paths come deepest first and created paths outermost first, so
    an undo (which takes changes back last first) makes a folder before
    what goes in it and empties a folder before removing it.
    """
    removed, modified, created = [], [], []
    for path in before.keys() | after.keys() if paths is None else paths:
        old, new = before.get(path), after.get(path)
        if old is new:
            continue  # the scan kept the entry it had: the common case, and the cheapest test
        if old is not None and new is not None:
            if not old.same_content(new):
                modified.append(TreeChange(path, old, new))
        elif new is None:
            removed.append(TreeChange(path, old, None))
        else:
            created.append(TreeChange(path, None, new))
    removed.sort(key=lambda c: (-c.path.count("/"), c.path))
    modified.sort(key=lambda c: c.path)
    created.sort(key=lambda c: (c.path.count("/"), c.path))
    return removed + modified + created


__all__ = [
    "Delta",
    "Entry",
    "ScanResult",
    "ScanRules",
    "Snapshot",
    "StoredSnapshot",
    "TreeChange",
    "content_bytes",
    "decode_snapshot",
    "diff_snapshots",
    "encode_snapshot",
    "encode_snapshot_delta",
    "folder_fingerprint",
    "load_snapshot",
    "remember_snapshot",
    "rescan_tree",
    "scan_tree",
    "stored_entries",
]

"""The walk: a project's tree visited ``dir_fd`` by ``dir_fd``, never following a link, never entering ``.git``.

For each file it compares the stat (size, mtime_ns, ctime_ns, inode, mode)
with the previous snapshot. A file whose stat is unchanged keeps its content
id without being read; any other file is read and its content stored
(deduplicated, compressed, encrypted) by a ``BatchedWriter``. The first scan
of a project therefore stores the whole tree once.

git's "racy" rule: a file modified within a timestamp tick of the scan's
start may be modified again within the same tick without its stat changing,
so its entry is marked racy and the next scan reads it again whatever its
stat says. The tick is taken as ``RACY_WINDOW_NS`` (2 s: FAT, HFS+ and ext3
keep whole or even seconds), or ``FINE_RACY_WINDOW_NS`` for a file whose
mtime has a fraction of a second, which only a file system with fine
timestamps records (their tick is the kernel clock's, a few ms).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence

from turnback.capture.gitindex import GIT_PREFIX, GitIndex, blob_oid_hasher, object_for
from turnback.capture.holds import BlobHold
from turnback.capture.scan.entries import Entry, EntryKind, ScanRules, Snapshot
from turnback.catalog import Message
from turnback.model import BlobId
from turnback.store.api import StoreBackend
from turnback.store.blobs import DICT_SAMPLE_MAX
from turnback.store.records import PackedBlob, SealedBlob

RACY_WINDOW_NS = 2_000_000_000
FINE_RACY_WINDOW_NS = 100_000_000
BATCH_FILES = 256
BATCH_BYTES = 64 << 20
READ_ATTEMPTS = 3
DICT_SAMPLES = 1000  # small files a first scan trains the store's dictionary on (about 0.4 s)
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Why an entry is left out, as its snapshot keeps it (Entry.reason).
UNREADABLE_DENIED = Message("unreadable_permission_denied").dumps()
SPECIAL = Message("a_special").dumps()
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


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


def _unreadable(exc: OSError) -> str:
    return Message("unreadable_because", error=exc.strerror or type(exc).__name__).dumps()


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


class BatchedWriter:
    """Stores contents in transactions of up to ``BATCH_FILES`` files or ``BATCH_BYTES`` bytes.

    *teach*: a store's first scan holds its first small files back until it
    has trained the store's dictionary on them, so they and all that follow
    compress against it (their ids are known before they are stored).
    *hold*: taken in the first transaction, so a gc spares what is stored
    until the caller commits the record that names it (``capture.holds``).
    """

    def __init__(self, store: StoreBackend, *, teach: bool = False, hold: BlobHold | None = None):
        self._store = store
        self._hold = hold
        self._open: contextlib.ExitStack | None = None
        self._files = 0
        self._bytes = 0
        self._held: list[tuple[BlobId, bytes]] | None = [] if teach and not store.blobs.has_dictionary() else None

    def _transaction(self) -> None:
        if self._open is None:
            self._open = contextlib.ExitStack()
            # Not synced to disk on its own: nothing refers to a blob until a later record does, and the durable
            # commit of that record makes every commit before it durable too (one log, written in order).
            self._open.enter_context(self._store.transaction(durable=False))
            if self._hold is not None:
                self._hold.take()

    def put(self, chunks: Iterable[bytes]) -> tuple[BlobId, int]:
        if self._held is not None:
            pieces: list[bytes] = []
            size = 0
            iterator = iter(chunks)
            for piece in iterator:
                pieces.append(piece)
                size += len(piece)
                if size > DICT_SAMPLE_MAX:
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
        self._count(1, size)
        return blob, size

    def put_sealed(self, rows: Sequence[SealedBlob], contents: int, size: int) -> None:
        """Store blobs sealed by another process: *contents* files' worth, *size* bytes before compression."""
        self._transaction()
        self._store.blobs.put_sealed(rows)
        self._count(contents, size)

    def put_packed(self, rows: Sequence[PackedBlob], contents: int, size: int) -> None:
        """Store the rows of blobs another process wrote into a pack it synced: *contents* files' worth."""
        self._transaction()
        self._store.blobs.put_packed(rows)
        self._count(contents, size)

    def _count(self, files: int, size: int) -> None:
        self._files += files
        self._bytes += size
        if self._files >= BATCH_FILES or self._bytes >= BATCH_BYTES:
            self.commit()

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


class Scanner:
    """One walk's *snapshot*: each path's entry, the one *previous* holds where its stat is unchanged, else one
    made now (a file read, its content handed to *put*). The walk calls ``record`` for a path new or changed,
    and ``entry_unreadable``, ``folder_unreadable`` and ``folder_gone`` for what it cannot look at: a subclass
    that only finds what changed answers those its own way."""

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
                    self._uncovered(path, st, UNREADABLE_DENIED)
                elif exc.errno == errno.ELOOP:
                    self.scan_entry(dir_fd, name, path)  # replaced by a link since the listing
                else:
                    self._uncovered(path, st, _unreadable(exc))
                return
            try:
                opened = os.fstat(fd)
                if not stat.S_ISREG(opened.st_mode):
                    self._uncovered(path, opened, SPECIAL)
                    return
                was = self.previous.get(path)
                oid = was.git_oid if was is not None else None
                git_hasher = blob_oid_hasher(opened.st_size) if oid else None
                try:
                    blob, size = self.put(_chunks(fd, git_hasher))
                except OSError as exc:
                    self._uncovered(path, opened, _unreadable(exc))
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
        return Message("larger_than_max_file_mib", mib=self.rules.max_file_mib).dumps()

    def scan_entry(self, dir_fd: int, name: str, path: str) -> bool:
        """Record one entry; True when it is a folder to enter."""
        prefix = path[: len(path) - len(name)]
        return bool(self._visit(dir_fd, prefix, [_Named(dir_fd, name)]))

    def record(self, dir_fd: int, name: str, path: str, st: os.stat_result) -> bool:
        """Record the entry *st* found at *path*, new or changed since the last scan; True when it is a folder
        to enter."""
        is_dir = stat.S_ISDIR(st.st_mode)
        glob = self.rules.excluded_by(path, is_dir=is_dir)
        if glob is not None:
            reason = Message("excluded_by_snapshot_exclude", glob=glob).dumps()
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
            self._uncovered(path, st, SPECIAL)
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

    def list_folder(self, dir_fd: int, prefix: str) -> list[str]:
        """Record the entries of one folder; return the names of the folders to enter."""
        try:
            with os.scandir(dir_fd) as listing:
                entries = list(listing)
        except OSError as exc:
            self.folder_unreadable(prefix.rstrip("/"), exc)
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
                self.entry_unreadable(path, exc)
                continue
            previous = previous_of(path)
            if previous is not None and not previous.racy:
                # Its kind and stat (size, mtime_ns, ctime_ns, ino, mode) are these exactly when it sorts between
                # the two tuples. Compared whole, its numbers are read in place; taken out (a slice), each would be
                # written (its count of references), which copies every page of them into a forked split scan.
                kind = previous.kind
                size, mtime_ns, ctime_ns, ino, mode = st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode
                if (
                    (kind, size, mtime_ns, ctime_ns, ino, mode)
                    < previous
                    < (kind, size, mtime_ns, ctime_ns, ino, mode + 1)
                    and ((kind == "file" and size <= max_bytes) or kind == "dir")
                    and (plain or self.rules.excluded_by(path, is_dir=kind == "dir") is None)
                ):
                    if keep:
                        snapshot[path] = previous  # the very entry: a scan that changed nothing changed no entry
                    else:
                        unchanged += 1
                    if kind == "dir":
                        folders.append(name)
                    continue
            if self.record(dir_fd, name, path, st):
                folders.append(name)
        self.unchanged += unchanged
        return folders

    def entry_unreadable(self, path: str, exc: OSError) -> None:
        self.snapshot[path] = Entry("uncovered", 0, 0, 0, 0, 0, reason=_unreadable(exc))

    def folder_unreadable(self, path: str, exc: OSError) -> None:
        if path in self.snapshot:
            self.snapshot[path] = self.snapshot[path]._replace(kind="uncovered", reason=_unreadable(exc))

    def folder_gone(self, path: str, exc: OSError) -> None:
        del self.snapshot[path]

    def enter_folder(self, fd: int, prefix: str, name: str) -> int | None:
        """The folder *name* of the listed folder *fd* opened, or ``None`` when it cannot be (and so recorded)."""
        try:
            return os.open(name, DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                self.folder_gone(prefix + name, exc)
            else:
                self.folder_unreadable(prefix + name, exc)
            return None

    def walk(self, root: str) -> None:
        root_fd = os.open(root, DIR_FLAGS)
        try:
            self.walk_from(root_fd, "")
        finally:
            os.close(root_fd)

    def walk_from(self, folder_fd: int, prefix: str) -> None:
        """Everything below the open folder *folder_fd* (at *prefix*), depth first, one open folder per level."""
        opened: list[int] = []  # the folders below it on the way down: closed however the walk ends
        try:
            stack = [(folder_fd, prefix, iter(self.list_folder(folder_fd, prefix)))]
            while stack:
                fd, prefix, folders = stack[-1]
                name = next(folders, None)
                if name is None:
                    stack.pop()
                    if stack:  # not the folder it was given
                        os.close(opened.pop())
                    continue
                sub = self.enter_folder(fd, prefix, name)
                if sub is not None:
                    opened.append(sub)
                    stack.append((sub, prefix + name + "/", iter(self.list_folder(sub, prefix + name + "/"))))
        finally:
            for fd in opened:
                os.close(fd)


class NotKnown(Exception):
    """A partial scan met something only a full scan answers (an unreadable folder on the way)."""


def open_folder(root_fd: int, rel: str) -> int | None:
    """The folder *rel* below *root_fd*, opened without following a link; ``None`` when it is not there."""
    fd = os.dup(root_fd)
    for name in rel.split("/") if rel else ():
        try:
            sub = os.open(name, DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return None
            raise NotKnown from exc
        os.close(fd)
        fd = sub
    return fd

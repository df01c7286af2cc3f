"""Safe file I/O: the only code that writes a project's files or the trash.

Every access goes through :class:`Tree`, which walks from an open folder of
the root with ``dir_fd`` and ``O_NOFOLLOW`` one name at a time, so no
symbolic link on the way is ever followed and nothing outside the root is
read or written. Writes are atomic: a temp file in the same folder, fsync,
rename over the name, fsync the folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from turnback.catalog import Message
from turnback.errors import UnsafePathError
from turnback.fsio.entry import Entry, entry_of
from turnback.fsio.steps import STEPS
from turnback.paths import RelPath, split_rel_path
from turnback.procs import process_alive

if TYPE_CHECKING:
    from turnback.fsio.batch import SyncBatch

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_HOLD_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC if hasattr(os, "O_PATH") else None  # holds, opens nothing

TEMP_PREFIX = ".turnback-"
TEMP_SUFFIX = ".tmp"
READ_CHUNK = 1 << 20
# A hard link cannot be made: another file system, links not supported there, or not allowed
# (fs.protected_hardlinks refuses a link to a file of another user).
_NO_LINK_ERRNOS = frozenset({errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS})


def _fsync_dir(fd: int) -> None:
    try:
        STEPS.fsync(fd)
    except OSError as exc:  # some file systems cannot fsync a folder; the rename is still atomic
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise


def _write_chunks(fd: int, chunks: Iterable[bytes]) -> None:
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            written = STEPS.write(fd, view)
            view = view[written:]


def _temp_name() -> str:
    return f"{TEMP_PREFIX}{os.getpid()}-{os.urandom(6).hex()}{TEMP_SUFFIX}"


def _temp_is_stale(name: str) -> bool:
    """Whether a temp file was left by a process that has ended (or by this one, between writes)."""
    if not (name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)):
        return False
    pid_text = name[len(TEMP_PREFIX) :].split("-", 1)[0]
    if not pid_text.isdigit():
        return False
    pid = int(pid_text)
    return pid == os.getpid() or not process_alive(pid, None)


def _unsafe(path: str, exc: OSError) -> UnsafePathError:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return UnsafePathError(Message("permission_denied", path=path))
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return UnsafePathError(Message("passes_through_link", path=path))
    return UnsafePathError(Message("path_system_error", path=path, error=str(exc.strerror or exc)))


def open_child(
    fd: int, walked: list[str], *, create: bool, made_in: SyncBatch | None, make_first: bool = False
) -> int | None:
    """Open the folder ``walked[-1]`` in the open folder *fd* (made with *create*), never through a link;
    ``None`` when it is missing. *walked* names it from the root, in messages. With *make_first* (and
    *create*), it is made before it is opened, not after an open that fails: for a tree made as it is
    written (an operation's trash), where most folders are missing."""
    name = walked[-1]
    if not (create and make_first):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                return None
        except OSError as exc:
            raise _unsafe("/".join(walked), exc) from exc
    try:
        os.mkdir(name, 0o777, dir_fd=fd)
        if made_in is None:
            _fsync_dir(fd)
        else:
            made_in.add_folder(fd)
        STEPS.done()
    except FileExistsError:
        pass
    except OSError as exc:
        raise _unsafe("/".join(walked), exc) from exc
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        raise _unsafe("/".join(walked), exc) from exc


def open_regular_at(parent: int, name: str, shown: str) -> tuple[int, Entry]:
    """Open the regular file *name* in the folder *parent* for reading (the caller closes it); a link, FIFO or
    device is refused unopened, and so is a file swapped in between the check and the open. *shown* names it."""
    try:
        before = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise _unsafe(shown, exc) from exc
    if not stat.S_ISREG(before.st_mode):
        raise UnsafePathError(Message("is_kind_not_file", path=shown, kind=entry_of(before).kind_name()))
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=parent)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise _unsafe(shown, exc) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_ino != before.st_ino:
            raise UnsafePathError(Message("path_replaced", path=shown, while_=Message("while_opening")))
    except BaseException:
        os.close(fd)
        raise
    return fd, entry_of(st)


class StagedFile:
    """A temp file written and fsynced beside its name (:meth:`Tree.stage_file`): :meth:`replace` renames it over
    the name and fsyncs the folder, :meth:`discard` removes it. Either ends it (and closes the folder it holds)."""

    def __init__(self, parent: int, name: str, temp: str):
        self._parent = parent
        self._name = name
        self._temp = temp

    def replace(self, *, hold_replaced: bool = False) -> int | None:
        """Rename the temp file over the name, then fsync the folder.

        With *hold_replaced*, the entry the rename replaces is held (an ``O_PATH`` descriptor, returned for
        the caller to close once the write is done): a rename over a file's last name frees its blocks
        before it returns (2-4 ms on ext4), and closing the holder elsewhere keeps that out of the write."""
        parent = self._parent
        try:
            replaced = _hold(parent, self._name) if hold_replaced else None
            try:
                os.replace(self._temp, self._name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                if replaced is not None:
                    os.close(replaced)
                with contextlib.suppress(OSError):
                    os.unlink(self._temp, dir_fd=parent)
                raise
            try:
                _fsync_dir(parent)
                STEPS.done()
            except BaseException:
                if replaced is not None:
                    os.close(replaced)
                raise
            return replaced
        finally:
            os.close(parent)

    def discard(self) -> None:
        """Remove the temp file: its name keeps what it held."""
        with contextlib.suppress(OSError):
            os.unlink(self._temp, dir_fd=self._parent)
        os.close(self._parent)


def _hold(parent: int, name: str) -> int | None:
    """A descriptor that keeps the entry *name* alive (opening nothing, following no link), if there is one."""
    if _HOLD_FLAGS is None:
        return None
    try:
        return os.open(name, _HOLD_FLAGS, dir_fd=parent)
    except OSError:
        return None  # nothing there yet (a new file), or nothing to hold


class Tree:
    """A folder tree rooted at a real path, read and written without following links."""

    def __init__(self, root: str):
        self.root = root
        self._held: _HeldFolders | None = None

    # -- walking -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def folders_held(self, limit: int = 256) -> Iterator[Tree]:
        """This tree, its folders opened once each while the block runs: for many reads of paths in few folders
        (a plan's look at each of 1,000 paths, not 1,000 walks from the root).

        A folder is still opened without following a link, but once: a folder swapped for a link after that
        is read through the folder opened. Only for reads (and removing a dead process's temp files), which
        the apply checks again; up to *limit* folders stay open, the least recently used closed first.
        """
        view = Tree(self.root)
        view._held = _HeldFolders(self, limit)
        try:
            yield view
        finally:
            view._held.close()
            view._held = None

    def _open_root(self) -> int:
        try:
            return os.open(self.root, _DIR_FLAGS)
        except OSError as exc:
            raise UnsafePathError(
                Message("cannot_open_folder", path=self.root, error=str(exc.strerror or exc))
            ) from exc

    @contextlib.contextmanager
    def parent_fd(self, path: RelPath, *, create: bool = False) -> Iterator[int | None]:
        """Open the folder that holds *path*, one name at a time; ``None`` when a folder is missing.

        With *create*, missing folders are made (mode from the umask). A link
        or a file where a folder should be is refused.
        """
        folders, _ = split_rel_path(path)
        fd = self.open_folder(folders, create=create)
        if fd is None:
            yield None
            return
        try:
            yield fd
        finally:
            os.close(fd)

    def open_folder(self, folders: list[str], *, create: bool = False, made_in: SyncBatch | None = None) -> int | None:
        """Open the folder *folders* (names from the root), one name at a time; ``None`` when one is missing.

        With *create*, missing folders are made (mode from the umask), each
        made durable in its parent at once, or, with *made_in*, by that
        batch's sync. A link or a file where a folder should be is refused.
        The caller closes the descriptor.
        """
        if self._held is not None and not create:
            return self._held.open(folders)
        fd = self._open_root()
        try:
            for depth in range(len(folders)):
                next_fd = open_child(fd, folders[: depth + 1], create=create, made_in=made_in)
                os.close(fd)
                if next_fd is None:
                    return None
                fd = next_fd
        except BaseException:
            os.close(fd)
            raise
        return fd

    # -- reading -----------------------------------------------------------------------------

    def lstat(self, path: RelPath) -> Entry | None:
        """The entry at *path*, or ``None`` when nothing is there."""
        st = self.stat(path)
        return None if st is None else entry_of(st)

    def stat(self, path: RelPath) -> os.stat_result | None:
        """The whole lstat of *path* (its ctime too, which :meth:`lstat` leaves out), or ``None`` when nothing is
        there."""
        with self.parent_fd(path) as fd:
            if fd is None:
                return None
            _, name = split_rel_path(path)
            try:
                return os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise _unsafe(path, exc) from exc

    def list_folder(self, path: RelPath | None) -> list[tuple[str, Entry]]:
        """The entries of the folder at *path* (the root for ``None``), sorted by name, links not followed."""
        probe = RelPath(f"{path}/x") if path else RelPath("x")
        with self.parent_fd(probe) as fd:
            if fd is None:
                raise FileNotFoundError(path)
            entries = []
            for name in sorted(os.listdir(fd)):
                try:
                    entries.append((name, entry_of(os.stat(name, dir_fd=fd, follow_symlinks=False))))
                except FileNotFoundError:
                    continue
            return entries

    def has_entries(self, path: RelPath) -> bool:
        """Whether the folder at *path* holds anything."""
        with self.parent_fd(RelPath(f"{path}/x")) as fd:
            if fd is None:
                return False
            with os.scandir(fd) as entries:
                return any(True for _ in entries)

    def readlink(self, path: RelPath) -> str:
        with self.parent_fd(path) as fd:
            if fd is None:
                raise FileNotFoundError(path)
            _, name = split_rel_path(path)
            return os.readlink(name, dir_fd=fd)

    @contextlib.contextmanager
    def open_file(self, path: RelPath) -> Iterator[tuple[int, Entry]]:
        """Open the regular file at *path* for reading; a link, FIFO or device is refused unopened."""
        with self.parent_fd(path) as parent:
            if parent is None:
                raise FileNotFoundError(path)
            _, name = split_rel_path(path)
            fd, entry = open_regular_at(parent, name, path)
            try:
                yield fd, entry
            finally:
                os.close(fd)

    def iter_chunks(self, path: RelPath, size: int = READ_CHUNK) -> Iterator[bytes]:
        with self.open_file(path) as (fd, _):
            while chunk := os.read(fd, size):
                yield chunk

    @staticmethod
    def iter_open_chunks(fd: int, size: int = READ_CHUNK) -> Iterator[bytes]:
        """The whole content of the file open as *fd*, from its start, whatever the fd's offset."""
        offset = 0
        while chunk := os.pread(fd, size, offset):
            offset += len(chunk)
            yield chunk

    def read_bytes(self, path: RelPath) -> bytes:
        return b"".join(self.iter_chunks(path))

    # -- writing -----------------------------------------------------------------------------

    def write_atomic(
        self,
        path: RelPath,
        chunks: Iterable[bytes],
        mode: int,
        *,
        create_parents: bool = False,
        before_replace: Callable[[], None] | None = None,
    ) -> None:
        """Replace *path* with a regular file holding *chunks*: temp, fsync, rename, fsync folder.

        The rename replaces whatever entry is at *path* (a link is replaced,
        never written through), and a hard link's other names keep the old
        content. *mode* is applied with ``fchmod`` on the temp file.
        *before_replace* runs once the temp file is durable, just before the
        rename (an undo moves the displaced file to the trash then); if it
        raises, nothing is renamed and the temp file is removed.
        """
        staged = self.stage_file(path, chunks, mode, create_parents=create_parents)
        try:
            if before_replace is not None:
                before_replace()
        except BaseException:
            staged.discard()
            raise
        staged.replace()

    def stage_file(
        self, path: RelPath, chunks: Iterable[bytes], mode: int, *, create_parents: bool = False
    ) -> StagedFile:
        """The first half of :meth:`write_atomic`: a temp file holding *chunks* beside *path*, fsynced, not yet
        renamed over it (nothing at *path* has changed). Another thread may :meth:`StagedFile.replace` it."""
        with self.parent_fd(path, create=create_parents) as parent:
            if parent is None:
                raise UnsafePathError(Message("folder_missing", path=path))
            temp = _temp_name()
            try:
                fd = os.open(temp, _CREATE_FLAGS, 0o600, dir_fd=parent)
            except OSError as exc:
                raise _unsafe(path, exc) from exc
            try:
                try:
                    _write_chunks(fd, chunks)
                    os.fchmod(fd, mode & 0o7777)
                    STEPS.fsync(fd)
                finally:
                    os.close(fd)
                return StagedFile(os.dup(parent), split_rel_path(path)[1], temp)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=parent)
                raise

    def link_into(self, path: RelPath, other: Tree, dest: RelPath, same_as: os.stat_result) -> bool:
        """Give the file at *path* a second name, *dest* in *other*: a hard link (:func:`link_file`), fsync folder.

        The file itself is kept, not a copy, so whatever is written to it up to
        the moment its name here is replaced stays in it. *same_as* is an
        ``fstat`` of the file the caller holds open; a different file now at
        *path* is refused. False when no link can be made (another file
        system, hard links not allowed there): the caller copies instead.
        """
        with self.parent_fd(path) as src_parent, other.parent_fd(dest, create=True) as dst_parent:
            if src_parent is None:
                raise FileNotFoundError(path)
            if dst_parent is None:
                raise UnsafePathError(Message("folder_missing", path=dest))
            _, name = split_rel_path(path)
            _, dest_name = split_rel_path(dest)
            if not link_file(src_parent, name, dst_parent, dest_name, same_as, shown=path):
                return False
            _fsync_dir(dst_parent)
            STEPS.done()
            return True

    def symlink_atomic(self, path: RelPath, target: str, *, create_parents: bool = False) -> None:
        """Replace *path* with a symbolic link to *target* (made under a temp name, then renamed)."""
        with self.parent_fd(path, create=create_parents) as parent:
            if parent is None:
                raise UnsafePathError(Message("folder_missing", path=path))
            _, name = split_rel_path(path)
            temp = _temp_name()
            try:
                os.symlink(target, temp, dir_fd=parent)
                try:
                    os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(temp, dir_fd=parent)
                    raise
            except OSError as exc:
                raise _unsafe(path, exc) from exc
            _fsync_dir(parent)
            STEPS.done()

    def mkdir(self, path: RelPath, mode: int | None = None, *, create_parents: bool = False) -> None:
        """Make the folder *path*: with the umask's bits, or with *mode*'s permission bits exactly."""
        with self.parent_fd(path, create=create_parents) as parent:
            if parent is None:
                raise UnsafePathError(Message("folder_missing", path=path))
            _, name = split_rel_path(path)
            try:
                os.mkdir(name, 0o777 if mode is None else mode & 0o777, dir_fd=parent)
                if mode is not None:
                    # mkdir applies the umask; a restore wants the recorded bits exactly.
                    os.chmod(name, mode & 0o777, dir_fd=parent, follow_symlinks=False)
            except OSError as exc:
                raise _unsafe(path, exc) from exc
            _fsync_dir(parent)
            STEPS.done()

    def chmod_dir(self, path: RelPath, mode: int) -> None:
        """Set the permission bits of the folder at *path* (a link there is refused, never followed)."""
        with self.parent_fd(path) as parent:
            if parent is None:
                raise FileNotFoundError(path)
            _, name = split_rel_path(path)
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
            except OSError as exc:
                raise _unsafe(path, exc) from exc
            try:
                os.fchmod(fd, mode & 0o777)
                os.fsync(fd)
            finally:
                os.close(fd)
            STEPS.done()

    def unlink(self, path: RelPath) -> None:
        """Remove the file or link at *path* (a link itself, never what it points to)."""
        with self.parent_fd(path) as parent:
            if parent is None:
                raise FileNotFoundError(path)
            _, name = split_rel_path(path)
            try:
                os.unlink(name, dir_fd=parent)
            except FileNotFoundError:
                raise
            except OSError as exc:
                raise _unsafe(path, exc) from exc
            _fsync_dir(parent)
            STEPS.done()

    def rmdir(self, path: RelPath) -> None:
        """Remove the empty folder at *path*; ``OSError(ENOTEMPTY)`` when it holds anything."""
        with self.parent_fd(path) as parent:
            if parent is None:
                raise FileNotFoundError(path)
            _, name = split_rel_path(path)
            os.rmdir(name, dir_fd=parent)
            _fsync_dir(parent)
            STEPS.done()

    def rename(self, src: RelPath, dst: RelPath, *, create_parents: bool = False) -> None:
        """Move *src* to *dst* inside the tree; *dst* is replaced atomically if it exists."""
        with self.parent_fd(src) as src_parent, self.parent_fd(dst, create=create_parents) as dst_parent:
            if src_parent is None:
                raise FileNotFoundError(src)
            if dst_parent is None:
                raise UnsafePathError(Message("folder_missing", path=dst))
            _, src_name = split_rel_path(src)
            _, dst_name = split_rel_path(dst)
            try:
                os.replace(src_name, dst_name, src_dir_fd=src_parent, dst_dir_fd=dst_parent)
            except OSError as exc:
                raise _unsafe(f"{src} -> {dst}", exc) from exc
            _fsync_dir(dst_parent)
            if src_parent != dst_parent:
                _fsync_dir(src_parent)
            STEPS.done()

    def remove_temp_files(self, folder: RelPath | None) -> int:
        """Remove temp files that interrupted writes left in *folder* (the root for ``None``).

        Only temp files of processes that have ended are removed: another
        turnback process may be between writing and renaming its own.
        """
        probe = RelPath(f"{folder}/x") if folder else RelPath("x")
        removed = 0
        with self.parent_fd(probe) as parent:
            if parent is None:
                return 0
            for name in os.listdir(parent):
                if _temp_is_stale(name):
                    with contextlib.suppress(FileNotFoundError):
                        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                        if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                            os.unlink(name, dir_fd=parent)
                            removed += 1
        return removed


# A batch of at least this many descriptors is made durable by one syncfs per file system rather than an fsync each:
# on ext4 a syncfs costs about one journal commit (60-90 ms for 1,700 new files and folders here), 1,700 fsyncs
# 1-2.5 s one after the other, or 160-210 ms from 8-32 threads.


class _HeldFolders:
    """The folders :meth:`Tree.folders_held` keeps open, by their names from the root (``""``: the root)."""

    def __init__(self, tree: Tree, limit: int):
        self.tree = tree
        self.limit = max(2, limit)
        self._open: dict[str, int] = {}  # least recently used first

    def open(self, folders: list[str]) -> int | None:
        """A descriptor of its own (the caller closes it) of the folder *folders*; ``None`` when one is missing."""
        depth = len(folders)
        while depth and "/".join(folders[:depth]) not in self._open:
            depth -= 1
        key = "/".join(folders[:depth])
        fd = self._open.pop(key, None)
        if fd is None:
            fd = self.tree._open_root()
        self._open[key] = fd
        while depth < len(folders):
            child = open_child(fd, folders[: depth + 1], create=False, made_in=None)
            if child is None:
                return None
            depth += 1
            fd = child
            self._open["/".join(folders[:depth])] = fd
        mine = os.dup(fd)
        while len(self._open) > self.limit:
            os.close(self._open.pop(next(iter(self._open))))
        return mine

    def close(self) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()


def write_temp(parent: int, chunks: Iterable[bytes], mode: int) -> tuple[str, int]:
    """Write *chunks* to a new temp file in the folder *parent*, with *mode*; its name and its open descriptor.

    Not synced: the caller adds the descriptor to a :class:`SyncBatch` and
    renames the file only once the batch is synced. A failed write removes it.
    """
    temp = _temp_name()
    fd = os.open(temp, _CREATE_FLAGS, 0o600, dir_fd=parent)
    try:
        _write_chunks(fd, chunks)
        os.fchmod(fd, mode & 0o7777)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=parent)
        raise
    STEPS.done()
    return temp, fd


def _hard_link(src_parent: int, name: str, dst_parent: int, dest_name: str, shown: str) -> bool:
    """``os.link`` without following a link; False where no link can be made. ``FileExistsError`` is raised."""
    try:
        os.link(name, dest_name, src_dir_fd=src_parent, dst_dir_fd=dst_parent, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno in _NO_LINK_ERRNOS:
            return False
        raise _unsafe(shown, exc) from exc
    return True


def link_file(
    src_parent: int, name: str, dst_parent: int, dest_name: str, same_as: os.stat_result, *, shown: str
) -> bool:
    """Give the file *name* (in *src_parent*) the name *dest_name* in *dst_parent*, a hard link.

    Not synced: the caller syncs *dst_parent* before it relies on the link.
    *same_as* is an ``fstat`` of the file the caller holds open; a different
    file is refused (``path_replaced``, naming *shown*), its link removed.
    True when the name is that file, already (a run killed after this step)
    or now; False when no link can be made (another file system, links not
    allowed there). The link is made at *dest_name* itself (a link is made
    whole or not at all); only where something else holds that name is it
    made under a temp name and renamed over it.
    """
    made = dest_name
    try:
        if not _hard_link(src_parent, name, dst_parent, made, shown):
            return False
    except FileExistsError:
        with contextlib.suppress(FileNotFoundError):
            there = os.stat(dest_name, dir_fd=dst_parent, follow_symlinks=False)
            if (there.st_dev, there.st_ino) == (same_as.st_dev, same_as.st_ino):
                return True
        made = _temp_name()
        if not _hard_link(src_parent, name, dst_parent, made, shown):
            return False
    try:
        linked = os.stat(made, dir_fd=dst_parent, follow_symlinks=False)
        if (linked.st_dev, linked.st_ino) != (same_as.st_dev, same_as.st_ino):
            raise UnsafePathError(Message("path_replaced", path=shown, while_=Message("while_trashing")))
        if made != dest_name:
            os.replace(made, dest_name, src_dir_fd=dst_parent, dst_dir_fd=dst_parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(made, dir_fd=dst_parent)
        raise
    return True


ROOT_TREE = Tree("/")
"""The whole file system, walked from ``/`` without following links: for files outside a project."""


def ensure_private_dir(path: str) -> None:
    """Make *path* (and its parents) a folder only its owner can use; refuse a link or a shared folder."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(Message("private_dir_not_folder", path=path))
    if st.st_uid != os.getuid():
        raise UnsafePathError(Message("private_dir_other_owner", path=path))
    if st.st_mode & 0o022:
        raise UnsafePathError(Message("private_dir_writable", path=path, mode=f"{stat.S_IMODE(st.st_mode):o}"))

"""Safe file I/O: the only code that writes a project's files or the trash.

Every access goes through :class:`Tree`, which walks from an open folder of
the root with ``dir_fd`` and ``O_NOFOLLOW`` one name at a time, so no
symbolic link on the way is ever followed and nothing outside the root is
read or written. Writes are atomic: a temp file in the same folder, fsync,
rename over the name, fsync the folder.

Fault injection, for the reliability tests (read once, at import):

- ``TURNBACK_FAULT_KILL_AFTER=N``: SIGKILL right after the N-th durable step
  (a rename, an unlink, a folder made or removed);
- ``TURNBACK_FAULT_KILL_AFTER_COMMIT=N``: SIGKILL right after the N-th
  committed store transaction (a snapshot's batches, a call's record);
- ``TURNBACK_FAULT=enospc@N``: the N-th write of file content fails with
  ENOSPC; ``eio@N``: the N-th fsync fails with EIO.

That is how the tests prove an interrupted or failing undo resumes and
loses nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from turnback.catalog import Message
from turnback.errors import UnsafePathError
from turnback.paths import RelPath, split_rel_path
from turnback.procs import process_alive

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


def _fault_kill_after(name: str = "TURNBACK_FAULT_KILL_AFTER") -> int | None:
    value = os.environ.get(name)
    return int(value) if value and value.isdigit() else None


def _fault_errors() -> dict[str, int]:
    """``TURNBACK_FAULT=enospc@3,eio@1``: which write or fsync (counting from 1) fails, by kind."""
    faults: dict[str, int] = {}
    for item in os.environ.get("TURNBACK_FAULT", "").split(","):
        kind, _, number = item.strip().partition("@")
        if kind in ("enospc", "eio") and number.isdigit():
            faults[kind] = int(number)
    return faults


class _Steps:
    """Counts durable file-system steps, writes and fsyncs; the fault hooks act on the N-th."""

    def __init__(self) -> None:
        self.count = 0
        self.kill_after = _fault_kill_after()
        self.kill_after_commit = _fault_kill_after("TURNBACK_FAULT_KILL_AFTER_COMMIT")
        self.commits = 0
        self.faults = _fault_errors()
        self.writes = 0
        self.fsyncs = 0

    def done(self) -> None:
        self.count += 1
        if self.kill_after is not None and self.count >= self.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    def committed(self) -> None:
        """A store transaction was committed (counted for ``TURNBACK_FAULT_KILL_AFTER_COMMIT``)."""
        self.commits += 1
        if self.kill_after_commit is not None and self.commits >= self.kill_after_commit:
            os.kill(os.getpid(), signal.SIGKILL)

    def write(self, fd: int, data: memoryview) -> int:
        self.writes += 1
        if self.faults.get("enospc") == self.writes:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        if self.faults.get("eio") == self.fsyncs:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        os.fsync(fd)


STEPS = _Steps()


def current_umask() -> int:
    """The process umask, read without changing it where the OS allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def default_file_mode() -> int:
    """The mode a new file gets, as ``open(path, "w")`` would give it."""
    return 0o666 & ~current_umask()


class Entry(NamedTuple):
    """An lstat of one path, without following a link at the end."""

    mode: int
    size: int
    mtime_ns: int
    ino: int

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.mode)

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def is_symlink(self) -> bool:
        return stat.S_ISLNK(self.mode)

    @property
    def permissions(self) -> int:
        return stat.S_IMODE(self.mode)

    def kind_name(self) -> Message:
        """What the entry is, as a noun with its article (``a folder``)."""
        if self.is_file:
            return Message("a_file")
        if self.is_dir:
            return Message("a_folder")
        if self.is_symlink:
            return Message("a_symlink")
        if stat.S_ISFIFO(self.mode):
            return Message("a_fifo")
        if stat.S_ISSOCK(self.mode):
            return Message("a_socket")
        return Message("a_device")


def _entry(st: os.stat_result) -> Entry:
    return Entry(mode=st.st_mode, size=st.st_size, mtime_ns=st.st_mtime_ns, ino=st.st_ino)


def _fsync_dir(fd: int) -> None:
    try:
        STEPS.fsync(fd)
    except OSError as exc:  # some file systems cannot fsync a folder; the rename is still atomic
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise


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


class Tree:
    """A folder tree rooted at a real path, read and written without following links."""

    def __init__(self, root: str):
        self.root = root

    # -- walking -----------------------------------------------------------------------------

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
        with contextlib.ExitStack() as stack:
            fd = self._open_root()
            stack.callback(os.close, fd)
            walked: list[str] = []
            for name in folders:
                walked.append(name)
                try:
                    next_fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        yield None
                        return
                    try:
                        os.mkdir(name, 0o777, dir_fd=fd)
                        _fsync_dir(fd)
                        STEPS.done()
                    except FileExistsError:
                        pass
                    except OSError as exc:
                        raise _unsafe("/".join(walked), exc) from exc
                    try:
                        next_fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    except OSError as exc:
                        raise _unsafe("/".join(walked), exc) from exc
                except OSError as exc:
                    raise _unsafe("/".join(walked), exc) from exc
                stack.callback(os.close, next_fd)
                fd = next_fd
            yield fd

    # -- reading -----------------------------------------------------------------------------

    def lstat(self, path: RelPath) -> Entry | None:
        """The entry at *path*, or ``None`` when nothing is there."""
        with self.parent_fd(path) as fd:
            if fd is None:
                return None
            _, name = split_rel_path(path)
            try:
                return _entry(os.stat(name, dir_fd=fd, follow_symlinks=False))
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
                    entries.append((name, _entry(os.stat(name, dir_fd=fd, follow_symlinks=False))))
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
            try:
                before = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except OSError as exc:
                if isinstance(exc, FileNotFoundError):
                    raise
                raise _unsafe(path, exc) from exc
            if not stat.S_ISREG(before.st_mode):
                raise UnsafePathError(Message("is_kind_not_file", path=path, kind=_entry(before).kind_name()))
            try:
                fd = os.open(name, _READ_FLAGS, dir_fd=parent)
            except OSError as exc:
                if isinstance(exc, FileNotFoundError):
                    raise
                raise _unsafe(path, exc) from exc
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_ino != before.st_ino:
                    raise UnsafePathError(Message("path_replaced", path=path, while_=Message("while_opening")))
                yield fd, _entry(st)
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
        release_replaced: Callable[[int], None] | None = None,
    ) -> None:
        """Replace *path* with a regular file holding *chunks*: temp, fsync, rename, fsync folder.

        The rename replaces whatever entry is at *path* (a link is replaced,
        never written through), and a hard link's other names keep the old
        content. *mode* is applied with ``fchmod`` on the temp file.
        *before_replace* runs once the temp file is durable, just before the
        rename (an undo moves the displaced file to the trash then); if it
        raises, nothing is renamed and the temp file is removed.

        With *release_replaced*, the entry the rename replaces is held (an
        ``O_PATH`` descriptor) across the rename and handed to it, to be
        closed, once the write is durable: a rename over a file's last name
        frees its blocks before it returns (2-4 ms on ext4), and the holder
        closes it where that does not delay the write.
        """
        with self.parent_fd(path, create=create_parents) as parent:
            if parent is None:
                raise UnsafePathError(Message("folder_missing", path=path))
            _, name = split_rel_path(path)
            temp = _temp_name()
            replaced: int | None = None
            try:
                fd = os.open(temp, _CREATE_FLAGS, 0o600, dir_fd=parent)
            except OSError as exc:
                raise _unsafe(path, exc) from exc
            try:
                try:
                    for chunk in chunks:
                        view = memoryview(chunk)
                        while view:
                            written = STEPS.write(fd, view)
                            view = view[written:]
                    os.fchmod(fd, mode & 0o7777)
                    STEPS.fsync(fd)
                finally:
                    os.close(fd)
                if before_replace is not None:
                    before_replace()
                replaced = self._hold(parent, name) if release_replaced is not None else None
                try:
                    os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
                except BaseException:
                    if replaced is not None:
                        os.close(replaced)
                    raise
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=parent)
                raise
            try:
                _fsync_dir(parent)
                STEPS.done()
            except BaseException:
                if replaced is not None:
                    os.close(replaced)
                raise
            if replaced is not None and release_replaced is not None:
                release_replaced(replaced)

    @staticmethod
    def _hold(parent: int, name: str) -> int | None:
        """A descriptor that keeps the entry *name* alive (opening nothing, following no link), if there is one."""
        if _HOLD_FLAGS is None:
            return None
        try:
            return os.open(name, _HOLD_FLAGS, dir_fd=parent)
        except OSError:
            return None  # nothing there yet (a new file), or nothing to hold

    def link_into(self, path: RelPath, other: Tree, dest: RelPath, same_as: os.stat_result) -> bool:
        """Give the file at *path* a second name, *dest* in *other*: link to a temp name, rename, fsync folder.

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
            with contextlib.suppress(FileNotFoundError):
                there = os.stat(dest_name, dir_fd=dst_parent, follow_symlinks=False)
                if (there.st_dev, there.st_ino) == (same_as.st_dev, same_as.st_ino):
                    return True  # a run killed after this step already linked it
            temp = _temp_name()
            try:
                os.link(name, temp, src_dir_fd=src_parent, dst_dir_fd=dst_parent, follow_symlinks=False)
            except OSError as exc:
                if exc.errno in _NO_LINK_ERRNOS:
                    return False
                raise _unsafe(path, exc) from exc
            try:
                linked = os.stat(temp, dir_fd=dst_parent, follow_symlinks=False)
                if (linked.st_dev, linked.st_ino) != (same_as.st_dev, same_as.st_ino):
                    raise UnsafePathError(Message("path_replaced", path=path, while_=Message("while_trashing")))
                os.replace(temp, dest_name, src_dir_fd=dst_parent, dst_dir_fd=dst_parent)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=dst_parent)
                raise
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


__all__ = [
    "ROOT_TREE",
    "STEPS",
    "TEMP_PREFIX",
    "Entry",
    "Tree",
    "current_umask",
    "default_file_mode",
    "ensure_private_dir",
]

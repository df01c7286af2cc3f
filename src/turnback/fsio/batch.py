"""Durability in batches: many files' and folders' syncs made at once (one ``syncfs``, or an fsync of each, in
threads), and the folders a batch writes in, opened once each."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Callable

from turnback.fsio.steps import STEPS
from turnback.fsio.tree import Tree, open_child
from turnback.paths import RelPath, split_rel_path

SYNCFS_MIN = 128
_FSYNC_THREADS = 16


def _syncfs_call() -> Callable[[int], int] | None:
    """libc's ``syncfs`` (Linux), or ``None`` where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # only for a big batch: an undo of many files

    try:
        call: Callable[[int], int] = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        return None
    return call


def _fsync_any(fd: int) -> None:
    """fsync a file or a folder (some file systems cannot fsync a folder; its renames are still atomic)."""
    try:
        os.fsync(fd)
    except OSError as exc:
        if not (exc.errno in (errno.EINVAL, errno.ENOTSUP) and stat.S_ISDIR(os.fstat(fd).st_mode)):
            raise


class SyncBatch:
    """Files and folders written without their fsync, made durable together by :meth:`sync`.

    Each descriptor is added with a key (what a failure is reported for) and
    is closed by :meth:`sync`. A folder is added once, however many entries
    of it changed. Fault injection counts one fsync per descriptor, in the
    order they were added.
    """

    def __init__(self) -> None:
        self._items: list[tuple[int, object]] = []
        self._folders: set[tuple[int, int]] = set()

    def __len__(self) -> int:
        return len(self._items)

    def add(self, fd: int, key: object) -> None:
        """Sync *fd* (now owned by the batch); a failure is reported for *key*."""
        self._items.append((fd, key))

    def add_folder(self, fd: int, key: object = None) -> None:
        """Sync the folder open as *fd* (not taken: it is duplicated), once per batch."""
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) in self._folders:
            return
        self._folders.add((st.st_dev, st.st_ino))
        self._items.append((os.dup(fd), key if key is not None else (st.st_dev, st.st_ino)))

    def sync(self) -> dict[object, OSError]:
        """Make everything added durable; the errors by key (an injected or a real fsync failure)."""
        failed: dict[object, OSError] = {}
        pending: list[tuple[int, object]] = []
        try:
            for fd, key in self._items:
                try:
                    STEPS.count_fsync()
                    pending.append((fd, key))
                except OSError as exc:
                    failed[key] = exc
            if pending and not self._syncfs(pending):
                for (_, key), error in zip(pending, self._fsync_each(pending), strict=True):
                    if error is not None:
                        failed.setdefault(key, error)
        finally:
            for fd, _ in self._items:
                os.close(fd)
            self._items.clear()
            self._folders.clear()
        STEPS.done()
        return failed

    @staticmethod
    def _syncfs(pending: list[tuple[int, object]]) -> bool:
        """One syncfs per file system of a big batch; False (nothing claimed) when it cannot or it failed."""
        if len(pending) < SYNCFS_MIN:
            return False
        call = _syncfs_call()
        if call is None:
            return False
        devices = {os.fstat(fd).st_dev: fd for fd, _ in pending}
        # A failed syncfs does not say which file it could not write: each is then synced on its own, which does.
        return all(call(fd) == 0 for fd in devices.values())

    @staticmethod
    def _fsync_each(pending: list[tuple[int, object]]) -> list[OSError | None]:
        """fsync each descriptor; from threads when there are several (the file system commits them together)."""

        def one(fd: int) -> OSError | None:
            try:
                _fsync_any(fd)
            except OSError as exc:
                return exc
            return None

        fds = [fd for fd, _ in pending]
        if len(fds) <= 2:
            return [one(fd) for fd in fds]
        from concurrent.futures import ThreadPoolExecutor  # only for a batch

        with ThreadPoolExecutor(min(_FSYNC_THREADS, len(fds))) as pool:
            return list(pool.map(one, fds))


class OpenFolders:
    """Folders of a tree held open for a batch of writes, each opened once (``dir_fd``, ``O_NOFOLLOW``).

    Folders made on the way are made durable by *made_in*'s sync, not one by one. Each folder that holds a
    path asked for stays open; the folders on the way to them stay open too while fewer than *limit* are.
    With *make_first*, a folder is made before it is opened (``open_child``): for a tree the batch makes.
    """

    def __init__(self, tree: Tree, made_in: SyncBatch, limit: int, *, make_first: bool = False):
        self.tree = tree
        self.made_in = made_in
        self.limit = limit
        self.make_first = make_first
        self._open: dict[str, int] = {}

    def parent(self, path: RelPath, *, create: bool = False) -> int | None:
        """The open folder that holds *path* (made with *create*), or ``None`` when it is missing.

        It is walked from its nearest folder already open (the root at worst), and every folder on the way
        is kept open for the next path.
        """
        folders, _ = split_rel_path(path)
        depth = len(folders)
        while depth and "/".join(folders[:depth]) not in self._open:
            depth -= 1
        fd = self._open.get("/".join(folders[:depth]))
        if fd is None:
            fd = self._open[""] = self.tree._open_root()
        owned = False  # fd is a folder on the way that is not kept (over the limit): closed once passed
        try:
            while depth < len(folders):
                child = open_child(
                    fd, folders[: depth + 1], create=create, made_in=self.made_in, make_first=self.make_first
                )
                if owned:
                    os.close(fd)
                    owned = False
                if child is None:
                    return None
                depth += 1
                fd = child
                if depth == len(folders) or len(self._open) < self.limit:
                    self._open["/".join(folders[:depth])] = child
                else:
                    owned = True
        except BaseException:
            if owned:
                os.close(fd)
            raise
        return fd

    def close(self) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()

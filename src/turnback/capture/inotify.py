"""Linux inotify through ctypes: watches, and the events read without blocking.

Not ``watchfiles``: it drops the kernel's queue-overflow event (it has no
path) and reads events on a thread of its own after a debounce, so a
watcher built on it could neither know that it missed a change nor that it
has seen every change made before a given moment. Read here, the queue
says both: inotify queues an event while the changing system call runs, so
a read until ``EAGAIN`` after a command has ended has every event the
command caused, and ``IN_Q_OVERFLOW`` says when some were dropped.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
import sys
from collections.abc import Iterator
from typing import NamedTuple

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

FOLDER_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)
_HEADER = struct.Struct("iIII")
_READ_SIZE = 1 << 16


class Event(NamedTuple):
    wd: int
    mask: int
    name: bytes  # empty for an event about the watched folder itself


class InotifyUnavailable(OSError):
    """This system has no inotify (not Linux, or no libc that offers it)."""


def _libc() -> ctypes.CDLL:
    if not sys.platform.startswith("linux"):
        raise InotifyUnavailable(errno.ENOSYS, "watching needs Linux inotify")
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if not hasattr(libc, "inotify_init1"):
        raise InotifyUnavailable(errno.ENOSYS, "this C library has no inotify")
    libc.inotify_init1.argtypes = [ctypes.c_int]
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    return libc


class Inotify:
    """One inotify instance: every folder's events arrive, in order, on its one descriptor."""

    def __init__(self) -> None:
        self._libc = _libc()
        fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, f"inotify_init1: {os.strerror(code)}")
        self.fd: int = fd

    def add_watch(self, path: str) -> int:
        """Watch the folder *path* (never through a link); returns its watch descriptor."""
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), FOLDER_MASK)
        if wd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return int(wd)

    def rm_watch(self, wd: int) -> None:
        self._libc.inotify_rm_watch(self.fd, wd)  # a watch the kernel already dropped: nothing to do

    def read(self) -> Iterator[Event]:
        """The events queued now, without waiting."""
        while True:
            try:
                data = os.read(self.fd, _READ_SIZE)
            except BlockingIOError:
                return
            offset = 0
            while offset < len(data):
                wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
                offset += _HEADER.size
                name = data[offset : offset + length].rstrip(b"\0")
                offset += length
                yield Event(wd, mask, name)

    def close(self) -> None:
        os.close(self.fd)


__all__ = [
    "IN_CREATE",
    "IN_DELETE",
    "IN_DELETE_SELF",
    "IN_IGNORED",
    "IN_ISDIR",
    "IN_MOVED_FROM",
    "IN_MOVED_TO",
    "IN_MOVE_SELF",
    "IN_Q_OVERFLOW",
    "IN_UNMOUNT",
    "Event",
    "Inotify",
    "InotifyUnavailable",
]

"""What a path is (an lstat of it, never following a link at the end), and the modes new files get."""

from __future__ import annotations

import os
import stat
from typing import NamedTuple

from turnback.catalog import Message


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


def entry_of(st: os.stat_result) -> Entry:
    return Entry(mode=st.st_mode, size=st.st_size, mtime_ns=st.st_mtime_ns, ino=st.st_ino)

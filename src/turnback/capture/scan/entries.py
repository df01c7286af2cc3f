"""A snapshot's entries: one per path, its stat and its content id, link target, or why it is left out; and
what a scan is told (``ScanRules``) and gives back (``ScanResult``).

What a snapshot leaves out is kept as an ``uncovered`` entry with the reason
(over ``snapshot.max_file_mib``, matched by ``snapshot.exclude``, a FIFO,
socket or device, unreadable), so a change to it is reported, never silent.
"""

from __future__ import annotations

import os
import stat
from collections.abc import MutableMapping
from typing import Literal, NamedTuple

from turnback.capture.gitindex import GIT_PREFIX
from turnback.catalog import Message
from turnback.globs import folder_matches, glob_matches
from turnback.model import BlobId, FileState

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
    reason: str | None = None  # why it is left out: a Message as Message.dumps() keeps it (marshal keeps text)
    racy: bool = False
    linked: bool = False  # a file with other names: a write through one of them is seen by the others' scan

    def reason_message(self) -> Message | None:
        """Why the entry is left out; a snapshot an older turnback saved holds it as English text."""
        return Message.loads(self.reason) if self.reason is not None else None

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


# A snapshot: path -> entry. A plain dict, or (a stat cache built on a full one) ``layers.Layered``.
Snapshot = MutableMapping[str, Entry]


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

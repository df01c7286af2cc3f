"""git's own objects for a project's first snapshot: a clean checkout's files need no reading.

git's index records, for each tracked file, the stat it had when git last
wrote it and its object id. A file whose stat still matches (and that was
not written in the same second as the index, git's "racy" rule) holds that
object's bytes, so the first snapshot records the object id instead of
reading, hashing and storing the file. Its content is copied into the store
when a change needs it (from ``git cat-file``), and in the background
afterwards (:func:`adopt`), so a later ``git gc`` cannot take it away.

Read only: the index is parsed here, objects come from ``git cat-file``;
nothing under ``.git`` is ever written. Reuse is off where the bytes in the
work tree may differ from the object's (clean/smudge filters, line-ending
or encoding conversion: ``core.autocrlf``, ``.gitattributes`` with
``filter``, ``text``, ``eol``, ``ident`` or ``working-tree-encoding``), for
SHA-256 repositories, split indexes, and a project folder that is not the
top of its work tree.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import struct
import subprocess
import threading
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from turnback.capture.git import git_env

GIT_PREFIX = "git:"  # an Entry.target of a file whose content is a git object not copied yet
_HEADER = struct.Struct(">4sLL")
_ENTRY = struct.Struct(">LLLLLLLLLL20sH")
_MODE_FLAGS = struct.Struct(">24xL32xH")  # an entry's mode and flags, the rest skipped
_CONVERTING_ATTRIBUTES = (b"filter", b"text", b"eol", b"ident", b"working-tree-encoding", b"crlf")


class IndexEntry(NamedTuple):
    ctime_ns: int
    mtime_ns: int
    ino: int
    executable: bool
    size: int
    oid: str


def _decoded(raw: bytes) -> IndexEntry:
    ctime_s, ctime_n, mtime_s, mtime_n, _dev, ino, mode, _uid, _gid, size, oid, _flags = _ENTRY.unpack(raw)
    return IndexEntry(
        ctime_s * 1_000_000_000 + ctime_n, mtime_s * 1_000_000_000 + mtime_n, ino, bool(mode & 0o100), size, oid.hex()
    )


class GitIndex(NamedTuple):
    """The index's files git vouches for, each as the index holds it (decoded when looked up: ``entry``).

    A 100,000-file index kept decoded took about 50 MB (a tuple, four numbers and a hex id per file), held
    during the whole first snapshot and touched, so copied, by each of its forked workers; as the index's
    own bytes, about half of it.
    """

    entries: dict[str, bytes]  # path: its fixed-size entry in the index (stat, mode, object id, flags)
    written_ns: int  # the index file's mtime: an entry stat'ed in that second may be racy

    def entry(self, path: str) -> IndexEntry | None:
        raw = self.entries.get(path)
        return _decoded(raw) if raw is not None else None


def git_dir_of(root: str) -> str | None:
    """The git dir of the work tree whose top is *root* (its ``.git``, or where a ``.git`` file points)."""
    dot_git = os.path.join(root, ".git")
    try:
        st = os.lstat(dot_git)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return dot_git
    if not stat.S_ISREG(st.st_mode):
        return None
    with open(dot_git, "rb") as handle:  # a worktree or submodule: "gitdir: PATH"
        line = handle.read(4096).strip()
    if not line.startswith(b"gitdir: "):
        return None
    return os.path.normpath(os.path.join(root, os.fsdecode(line[8:])))


def _config(root: str, gdir: str) -> dict[str, str]:
    proc = subprocess.run(
        ["git", f"--git-dir={gdir}", "config", "--list", "-z"],
        cwd=root,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=git_env(),
        check=False,
    )
    if proc.returncode != 0:
        raise OSError("git config failed")
    values: dict[str, str] = {}
    for item in proc.stdout.split(b"\0"):
        key, _, value = item.partition(b"\n")
        values[key.decode("utf-8", "replace").lower()] = value.decode("utf-8", "replace")
    return values


def _converts(attributes: bytes) -> bool:
    for line in attributes.splitlines():
        words = line.split()
        if (
            words
            and not words[0].startswith(b"#")
            and any(word.lstrip(b"-!").split(b"=")[0] in _CONVERTING_ATTRIBUTES for word in words[1:])
        ):
            return True
    return False


def _parse(data: bytes) -> tuple[dict[str, bytes], set[bytes]]:
    """The index's stage-0 regular files git vouches for (each path's fixed-size entry, as ``GitIndex`` keeps
    them), and the signatures of its extensions."""
    signature, version, count = _HEADER.unpack_from(data, 0)
    if signature != b"DIRC" or version not in (2, 3, 4):
        raise ValueError("not an index this reader knows")
    entries: dict[str, bytes] = {}
    offset = _HEADER.size
    path = b""
    for _ in range(count):
        start = offset
        mode, flags = _MODE_FLAGS.unpack_from(data, offset)
        offset += _ENTRY.size
        extended = 0
        if flags & 0x4000:
            (extended,) = struct.unpack_from(">H", data, offset)
            offset += 2
        if version == 4:
            byte = data[offset]  # git's offset varint: how much of the previous path to drop
            offset += 1
            strip = byte & 0x7F
            while byte & 0x80:
                byte = data[offset]
                offset += 1
                strip = ((strip + 1) << 7) | (byte & 0x7F)
            end = data.index(b"\0", offset)
            path = path[: len(path) - strip] + data[offset:end]
            offset = end + 1
        else:
            end = data.index(b"\0", offset)
            path = data[offset:end]
            offset = start + ((end - start) // 8 + 1) * 8  # NUL padding to a multiple of eight
        stage = (flags >> 12) & 0x3
        if stage or flags & 0x8000 or extended & 0x6000 or stat.S_IFMT(mode) != stat.S_IFREG:
            continue  # a conflict, assume-unchanged, skip-worktree or intent-to-add: git does not vouch for it
        entries[os.fsdecode(path)] = data[start : start + _ENTRY.size]
    extensions: set[bytes] = set()
    while offset + 8 <= len(data) - 20:  # each extension: signature, size, data; then the checksum
        name, length = struct.unpack_from(">4sL", data, offset)
        extensions.add(name)
        offset += 8 + length
    return entries, extensions


def read_index(root: str) -> GitIndex | None:
    """The index of the git work tree whose top is *root*, when its objects can stand for the files."""
    gdir = git_dir_of(root)
    if gdir is None:
        return None
    try:
        config = _config(root, gdir)
        if config.get("core.autocrlf", "false").lower() not in ("false", "0", "no", "off", "") or config.get(
            "extensions.objectformat", "sha1"
        ) not in ("sha1", ""):
            return None
        attribute_files = [os.path.join(gdir, "info", "attributes")]
        if config.get("core.attributesfile"):
            attribute_files.append(os.path.expanduser(config["core.attributesfile"]))
        index_path = os.path.join(gdir, "index")
        with open(index_path, "rb") as handle:
            written_ns = os.fstat(handle.fileno()).st_mtime_ns
            data = handle.read()
        entries, extensions = _parse(data)
        if b"link" in extensions:  # a split index keeps most entries in another file
            return None
        attribute_files += [os.path.join(root, path) for path in entries if path.rsplit("/", 1)[-1] == ".gitattributes"]
        for path in attribute_files:
            try:
                with open(path, "rb") as handle:
                    if _converts(handle.read()):
                        return None
            except FileNotFoundError:
                continue
    except (OSError, ValueError, struct.error, IndexError):
        return None
    return GitIndex(entries, written_ns)


def object_for(index: GitIndex, path: str, st: os.stat_result) -> str | None:
    """The object id the file *path* (stat'ed as *st*) holds, when git's index vouches for it."""
    entry = index.entry(path)
    if entry is None:
        return None
    if (
        entry.mtime_ns != st.st_mtime_ns
        or entry.ctime_ns != st.st_ctime_ns
        or entry.size != st.st_size & 0xFFFFFFFF
        or entry.ino != st.st_ino & 0xFFFFFFFF
        or entry.executable != bool(st.st_mode & 0o100)
        or entry.mtime_ns // 1_000_000_000 >= index.written_ns // 1_000_000_000
    ):
        return None
    return entry.oid


def blob_oid_hasher(size: int) -> hashlib._Hash:
    """A hash to feed *size* bytes of content into; its hex digest is git's object id of them as a blob."""
    return hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False)


def blob_oid(data: bytes) -> str:
    """git's object id of *data* as a blob."""
    hasher = blob_oid_hasher(len(data))
    hasher.update(data)
    return hasher.hexdigest()


def read_objects(root: str, oids: Iterable[str]) -> Iterator[tuple[str, bytes | None]]:
    """Each object's bytes from ``git cat-file --batch`` (``None`` for one that is gone)."""
    wanted = list(dict.fromkeys(oids))
    if not wanted:
        return
    gdir = git_dir_of(root)
    if gdir is None:
        for oid in wanted:
            yield oid, None
        return
    proc = subprocess.Popen(
        ["git", f"--git-dir={gdir}", "cat-file", "--batch"],
        cwd=root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=git_env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin = proc.stdin

    def feed() -> None:  # all ids at once, from a thread: one object per round trip costs more than copying it
        with contextlib.suppress(OSError):
            for oid in wanted:
                stdin.write(oid.encode() + b"\n")
            stdin.close()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        for oid in wanted:
            header = proc.stdout.readline().split()
            if len(header) != 3 or header[1] != b"blob":
                yield oid, None
                continue
            data = proc.stdout.read(int(header[2]))
            proc.stdout.read(1)  # the newline after the object
            yield oid, data if blob_oid(data) == oid else None
    finally:
        proc.stdout.close()
        feeder.join()
        with contextlib.suppress(OSError):
            stdin.close()
        proc.wait()


__all__ = [
    "GIT_PREFIX",
    "GitIndex",
    "IndexEntry",
    "blob_oid",
    "blob_oid_hasher",
    "object_for",
    "read_index",
    "read_objects",
]

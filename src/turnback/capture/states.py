"""What a path holds now, read without following links.

``probe_state`` only hashes a file's content (to compare with a record);
``capture_state`` also stores it, for a call's before and after states and
for what a plan saw in a conflict.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from turnback.fsio import Entry, Tree
from turnback.model import ABSENT, BlobId, FileState
from turnback.paths import RelPath
from turnback.store.api import StoreBackend

ContentSink = Callable[[Iterable[bytes]], tuple[BlobId, int]]
# Told of each file read: its fstat, taken before its bytes were read, and their content id.
ReadSink = Callable[[os.stat_result, BlobId], None]


def _read_state(
    tree: Tree, path: RelPath, entry: Entry | None, sink: ContentSink, read: ReadSink | None = None
) -> FileState:
    if entry is None:
        return ABSENT
    if entry.is_dir:
        return FileState("dir", mode=entry.permissions)
    if entry.is_symlink:
        try:
            return FileState("symlink", target=tree.readlink(path))
        except FileNotFoundError:
            return ABSENT
    if not entry.is_file:
        return FileState("special")
    try:
        with tree.open_file(path) as (fd, opened):

            def chunks() -> Iterable[bytes]:
                while chunk := os.read(fd, 1 << 20):
                    yield chunk

            before = os.fstat(fd) if read is not None else None
            blob, size = sink(chunks())
            if read is not None and before is not None:
                read(before, blob)
            return FileState("file", blob=blob, size=size, mode=opened.permissions)
    except FileNotFoundError:
        return ABSENT


def probe_state(tree: Tree, path: RelPath, store: StoreBackend, *, read: ReadSink | None = None) -> FileState:
    """What *path* holds now; a file's content is hashed, not stored (and, with *read*, told with its stat)."""

    def hash_only(chunks: Iterable[bytes]) -> tuple[BlobId, int]:
        hasher = store.crypto.content_hasher()
        size = 0
        for chunk in chunks:
            hasher.update(chunk)
            size += len(chunk)
        return BlobId(hasher.digest()), size

    return _read_state(tree, path, tree.lstat(path), hash_only, read)


def capture_state(tree: Tree, path: RelPath, store: StoreBackend) -> FileState:
    """What *path* holds now, with a file's content stored in the store (call inside a transaction)."""
    return _read_state(tree, path, tree.lstat(path), store.put_content)


def stored_state_for_bytes(store: StoreBackend, data: bytes, mode: int) -> FileState:
    """The state of a file that will hold *data* with *mode*, its content stored."""
    blob, size = store.put_content([data])
    return FileState("file", blob=blob, size=size, mode=mode)


__all__ = ["capture_state", "probe_state", "stored_state_for_bytes"]

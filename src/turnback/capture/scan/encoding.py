"""A stat cache as it is saved: one record per project (marshal, zstandard; the store seals it with AES-GCM)
rather than a row per file, like git's index; either whole, or as the entries that differ from a whole one (a
delta). ``load_snapshot`` keeps the newest decoded caches of the process, as they are saved: a full one, and
layers on it (``layers.Layered``), so a delta is decoded without copying the full one.
"""

from __future__ import annotations

import io
import itertools
import marshal
import struct
from collections.abc import Iterator
from typing import Any, NamedTuple

import zstandard

from turnback.capture.scan.entries import Entry, Snapshot
from turnback.capture.scan.heap import trim_heap
from turnback.capture.scan.layers import Layered, flat, layered
from turnback.store.api import StoreBackend

SNAPSHOT_FORMAT = 3
SNAPSHOT_DELTA_FORMAT = 4
# marshal's version 2, the last without references: from version 3 on, dumps keeps a table of every object it
# has written to name repeats by reference, which at 120k entries took 60 MB more than the bytes it wrote (the
# peak of a first snapshot's process). Entries repeat little (a kind, None); loads reads every version.
MARSHAL_VERSION = 2
_TUPLE, _LIST, _COUNT = b"(", b"[", struct.Struct("<i")  # how version 2 starts a tuple and a list of n items
_ENCODE_PART = 4096
Delta = dict[str, Entry | None]  # path: its entry now, or None where the path went


def encode_snapshot_delta(base_id: str, delta: Delta) -> bytes:
    """A stat cache as the entries that differ from the full one *base_id* (None: the path is gone)."""
    entries = [None if entry is None else tuple(entry) for entry in delta.values()]
    data = marshal.dumps((base_id, list(delta), entries), MARSHAL_VERSION)
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
    """The snapshot as marshal's ``(paths, entries)``: two plain lists, so that marshal and the decoder's
    ``Entry._make`` run at C speed, which matters at 100k entries per scan.

    Written a few thousand entries at a time into the compressor (the bytes of version 2 are those of each item
    one after another), so neither the whole marshal output nor a plain tuple of every entry is ever held; and
    compressed into one buffer, which becomes the bytes returned (pieces joined at the end were held twice).
    """
    snapshot = flat(snapshot)
    out = io.BytesIO()
    out.write(bytes([SNAPSHOT_FORMAT]))
    with zstandard.ZstdCompressor(level=1).stream_writer(out, closefd=False) as compressor:
        compressor.write(_TUPLE + _COUNT.pack(2))
        lists: tuple[Iterator[Any], ...] = (iter(snapshot), map(tuple, snapshot.values()))
        for items in lists:
            compressor.write(_LIST + _COUNT.pack(len(snapshot)))
            while part := list(itertools.islice(items, _ENCODE_PART)):
                # (one call for the part: the list's bytes less its own start are its items' one after another)
                compressor.write(memoryview(marshal.dumps(part, MARSHAL_VERSION))[len(_LIST) + _COUNT.size :])
    return out.getvalue()  # (the buffer itself, not a copy: nothing else refers to it)


def content_bytes(snapshot: Snapshot) -> int:
    """How much content the snapshot's stored copies hold (each copy once)."""
    return sum({entry.blob: entry.size for entry in snapshot.values() if entry.blob}.values())


def decode_snapshot(data: bytes) -> Snapshot | None:
    """The snapshot in *data*; ``None`` for a format this version does not read (the next scan rebuilds it)."""
    if not data or data[0] != SNAPSHOT_FORMAT:
        return None
    try:
        # (a streamed frame does not say its size up front: decompressobj reads it whole anyway)
        paths, entries = marshal.loads(zstandard.ZstdDecompressor().decompressobj().decompress(data[1:]))
        return dict(zip(paths, map(Entry._make, entries), strict=True))
    except (ValueError, EOFError, TypeError, zstandard.ZstdError):
        return None


class StoredSnapshot(NamedTuple):
    """A saved stat cache, decoded: its entries, and (a delta) the full cache it is built on and what differs."""

    id: str
    snapshot: Layered  # shared by every caller of load_snapshot: never changed in place
    base_id: str | None
    delta: Delta | None


# The newest decoded caches of this process: a command's scan after reads the cache its scan before saved,
# and a harness that embeds the engine scans again and again, so each is decoded (or built) once. Those kept
# all stand on one full cache: at 100k files a decoded one takes about 90 MB, a layer on it what it changed.
_LOADED: dict[tuple[str, str], StoredSnapshot] = {}
_LOADED_KEEP = 8


def remember_snapshot(store: StoreBackend, stored: StoredSnapshot) -> StoredSnapshot:
    key = (store.home, stored.id)
    _LOADED.pop(key, None)
    _LOADED[key] = stored
    full = stored.snapshot.full
    for older in [key for key, kept in _LOADED.items() if kept.snapshot.full is not full]:
        del _LOADED[older]
    while len(_LOADED) > _LOADED_KEEP:
        del _LOADED[next(iter(_LOADED))]
    return stored


def stored_snapshot(
    snapshot_id: str, snapshot: Snapshot, base_id: str | None = None, delta: Delta | None = None
) -> StoredSnapshot:
    """A stat cache as saved: *snapshot* whole, or (*base_id*) as *delta* on the full cache *base_id*."""
    if base_id is None and isinstance(snapshot, Layered) and snapshot.changes:
        snapshot = snapshot.flat()  # a full cache is a layer of no changes on itself
    return StoredSnapshot(snapshot_id, layered(snapshot), base_id, delta)


def load_snapshot(store: StoreBackend, snapshot_id: str, data: bytes | None = None) -> StoredSnapshot | None:
    """The saved stat cache *snapshot_id* (its sealed *data*, when the caller has read it); ``None`` when it is
    gone or in a format this version does not read (the next scan then rebuilds it)."""
    hit = _LOADED.get((store.home, snapshot_id))
    if hit is not None:
        return hit
    if data is None:
        data = store.snapshot(snapshot_id)
        if data is None:
            return None
    if data[:1] == bytes([SNAPSHOT_FORMAT]):
        # The caches kept stand on another full one, which this one replaces (remember_snapshot): let them go now
        # rather than once it is decoded, so that two decoded trees are not held at once.
        _LOADED.clear()
    full = decode_snapshot(data)
    if full is not None:
        trim_heap()  # the decompressed bytes it was made from (15 MB at 120k entries)
        return remember_snapshot(store, stored_snapshot(snapshot_id, full))
    decoded = decode_snapshot_delta(data)
    if decoded is None:
        return None
    base_id, delta = decoded
    base = load_snapshot(store, base_id)
    if base is None or base.base_id is not None:
        return None
    snapshot = Layered(base.snapshot.full, {path: entry for path, entry in delta.items()})
    return remember_snapshot(store, StoredSnapshot(snapshot_id, snapshot, base_id, delta))

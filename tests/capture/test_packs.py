"""A first snapshot's workers keep what they seal in pack files: every copy opens to the file's bytes, a pack
that is gone, cut short or swapped for a link is named as the damage it is, and gc gives back what idle packs
hold that no record needs, without touching a pack a running snapshot may still be writing."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

import turnback
from tests.capture.test_cold_scan import RULES, cold_scan, files_in, make_tree, workers_take_part
from turnback.capture.scan import cold, walk
from turnback.catalog import word
from turnback.errors import BlobCorruptError
from turnback.fsio import STEPS
from turnback.model import BlobId
from turnback.ops import maintenance
from turnback.store import blobs
from turnback.store.blobs import PACK_IDLE_S, is_pack_name
from turnback.store.records import PackedBlob

__all__ = ["workers_take_part"]  # the fixture that has small trees split over the workers


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    make_tree(tmp_path / "tree", outside)
    return tmp_path / "tree"


def packs_of(store: turnback.Store) -> Path:
    folder = store.blobs.packs
    assert folder is not None
    return Path(folder)


def packed_rows(store: turnback.Store) -> list[dict[str, object]]:
    rows = store.db.all("SELECT id, data, pack, pack_at, stored FROM blobs WHERE pack IS NOT NULL")  # type: ignore[attr-defined]
    return [dict(row) for row in rows]


def make_idle(path: Path) -> None:
    then = time.time() - PACK_IDLE_S - 60
    os.utime(path, (then, then))


def test_the_workers_bytes_are_in_private_packs_and_every_copy_opens(engine: turnback.Engine, tree: Path) -> None:
    store = engine.store
    result = cold_scan(store, tree)
    folder = packs_of(store)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    packs = sorted(folder.iterdir())
    assert packs and all(is_pack_name(pack.name) for pack in packs)
    assert all(stat.S_IMODE(pack.stat().st_mode) == 0o600 for pack in packs)
    rows = packed_rows(store)
    assert rows and all(row["data"] == b"" for row in rows)  # the database holds where they are, not the bytes
    in_packs = {pack.name: pack.stat().st_size for pack in packs}
    for row in rows:
        assert isinstance(row["pack_at"], int) and isinstance(row["stored"], int)
        assert row["pack_at"] + row["stored"] <= in_packs[str(row["pack"])]
    for path, data in files_in(tree):
        assert store.blobs.read_bytes(result.snapshot[path].blob) == data, path
    assert maintenance.verify(store).clean


def test_the_parent_counts_every_file_the_workers_packed(engine: turnback.Engine, tree: Path) -> None:
    """The files a batch holds decide when the parent commits it: each file read once is counted once, whether
    the scanning process stored it itself or a worker packed it."""
    counted: list[int] = []
    real_put, real_packed = walk.BatchedWriter.put, walk.BatchedWriter.put_packed

    def put(self: walk.BatchedWriter, chunks: Iterable[bytes]) -> tuple[BlobId, int]:
        counted.append(1)
        return real_put(self, chunks)

    def put_packed(self: walk.BatchedWriter, rows: Sequence[PackedBlob], contents: int, size: int) -> None:
        counted.append(contents)
        real_packed(self, rows, contents, size)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(walk.BatchedWriter, "put", put)
        patch.setattr(walk.BatchedWriter, "put_packed", put_packed)
        result = cold_scan(engine.store, tree)
    assert sum(counted) == result.files_read


@pytest.mark.parametrize("damage", ["gone", "cut short", "a link"])
def test_a_damaged_pack_is_named_when_a_copy_in_it_is_read(
    engine: turnback.Engine, tree: Path, tmp_path: Path, damage: str
) -> None:
    store = engine.store
    cold_scan(store, tree)
    row = max(packed_rows(store), key=lambda row: int(str(row["pack_at"])))  # the last copy of its pack
    pack = packs_of(store) / str(row["pack"])
    blob = bytes(row["id"])  # type: ignore[arg-type]
    if damage == "gone":
        pack.unlink()
    elif damage == "cut short":
        os.truncate(pack, pack.stat().st_size - 1)
    else:
        moved = tmp_path / "moved.pack"
        pack.rename(moved)
        pack.symlink_to(moved)  # the bytes are all there, through a link a restore must never follow
    with pytest.raises(BlobCorruptError) as raised:
        store.blobs.read_bytes(BlobId(blob))
    shown = word(raised.value.message, "en")
    expected = {
        "gone": f"a stored copy's pack file is missing (blob {blob[:6].hex()}, {pack.name})",
        "cut short": f"a stored copy's pack file is cut short (blob {blob[:6].hex()}, {pack.name})",
        "a link": f"a stored copy's pack file cannot be read (blob {blob[:6].hex()}, {pack.name}: ",
    }[damage]
    assert shown.startswith(expected), shown
    assert blob in maintenance.verify(store).blobs


def test_gc_folds_a_mostly_unneeded_idle_pack_into_its_rows(engine: turnback.Engine, tree: Path) -> None:
    store = engine.store
    result = cold_scan(store, tree)
    kept_path = "a5/b3/c/f2.txt"
    kept = result.snapshot[kept_path].blob
    assert kept is not None
    rows = packed_rows(store)
    name = next(str(row["pack"]) for row in rows if row["id"] == kept)
    with store.transaction():
        for row in rows:
            if row["id"] != kept:
                store.blobs.delete(bytes(row["id"]))  # type: ignore[arg-type]
    pack = packs_of(store) / name
    size = pack.stat().st_size
    assert store.blobs.reclaim_packs(store.transaction) == 0  # written a moment ago: a scan may be writing it
    assert pack.exists()
    make_idle(pack)
    with store.transaction():  # a fold there would not be committed before the pack goes: left for later
        assert store.blobs.reclaim_packs(store.transaction) == 0
    assert pack.exists()
    (stored,) = (int(str(row["stored"])) for row in rows if row["id"] == kept)
    assert store.blobs.reclaim_packs(store.transaction) >= size - stored
    assert not pack.exists()
    assert store.blobs.read_bytes(kept) == (tree / kept_path).read_bytes()  # now out of its row
    assert [row["id"] for row in packed_rows(store)] == []


def test_gc_deletes_an_idle_pack_no_record_names_and_leaves_a_fresh_one(engine: turnback.Engine, tree: Path) -> None:
    """What a worker that died wrote before its rows were sent is named by nothing: gc deletes it once it is
    idle. A pack being written by a first snapshot that runs now is newer: gc leaves it."""
    store = engine.store
    cold_scan(store, tree)
    packs = sorted(packs_of(store).iterdir())
    assert len(packs) >= 2
    idle, fresh = packs[0], packs[1]
    make_idle(idle)
    reclaimed = engine.gc()  # nothing recorded names the scan's copies: every row goes, then the idle pack
    assert reclaimed.blobs > 0
    assert not idle.exists()
    assert fresh.exists()


def test_gc_leaves_a_pack_it_cannot_read_whole_and_goes_on(engine: turnback.Engine, tree: Path) -> None:
    """An idle pack to fold that was cut short: gc does not fail, and it neither deletes the pack nor loses the
    rows' record of where their bytes were (verify still names the copy cut off)."""
    store = engine.store
    cold_scan(store, tree)
    rows = packed_rows(store)
    last = max(rows, key=lambda row: int(str(row["pack_at"])))
    name = str(last["pack"])
    with store.transaction():
        for row in rows:
            if row["pack"] == name and row["id"] != last["id"]:
                store.blobs.delete(bytes(row["id"]))  # type: ignore[arg-type]
    pack = packs_of(store) / name
    os.truncate(pack, pack.stat().st_size - 1)
    make_idle(pack)
    assert store.blobs.reclaim_packs(store.transaction) >= 0
    assert pack.exists()
    assert [row["pack"] for row in packed_rows(store) if row["id"] == last["id"]] == [name]
    assert bytes(last["id"]) in maintenance.verify(store).blobs  # type: ignore[arg-type]


def test_a_pack_holds_each_sealed_copy_where_append_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copies are gathered and written a few at a time, a large one as it is: the file holds them in order,
    each at the offset its row will name; what was gathered but never flushed is not written."""
    monkeypatch.setattr(blobs, "PACK_WRITE_BYTES", 100)
    writer = blobs.PackWriter(str(tmp_path))
    pieces = [os.urandom(n) for n in (10, 50, 60, 250, 5, 99, 1)]
    offsets = [writer.append(piece) for piece in pieces]
    writer.flush()
    writer.sync_written()
    writer.append(b"never flushed")
    writer.close()
    data = (tmp_path / writer.name).read_bytes()
    assert data == b"".join(pieces)
    assert [data[at : at + len(piece)] for at, piece in zip(offsets, pieces, strict=True)] == pieces


def test_rows_are_sent_only_for_bytes_a_finished_sync_made_durable(
    engine: turnback.Engine, tree: Path, tmp_path: Path
) -> None:
    """Each worker syncs its pack in a thread while it goes on sealing: the rows naming a copy reach the parent
    only once a sync that began after the copy was written has ended (here a sync after every copy)."""
    log = tmp_path / "order.log"
    real_sync, real_send = blobs.PackWriter.sync_written, cold._SealingScanner._send

    def note(line: str) -> None:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{os.getpid()} {line}\n".encode())
        finally:
            os.close(fd)

    def sync_written(self: blobs.PackWriter) -> None:
        written = os.fstat(self._fd).st_size if self._fd >= 0 else 0  # what this sync makes durable
        real_sync(self)
        note(f"synced {self.name} {written}")

    def send(self: cold._SealingScanner, message: tuple[object, ...], contents: Sequence[bytes] = ()) -> None:
        if message[0] == cold._PACKED:
            rows = [PackedBlob._make(row) for row in message[1]]  # type: ignore[attr-defined]
            for row in rows:
                note(f"sent {row.pack} {row.at + row.stored}")
        real_send(self, message, contents)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cold, "PACK_SYNC_BYTES", 1)
        patch.setattr(blobs, "PACK_WRITE_BYTES", 64)
        patch.setattr(blobs.PackWriter, "sync_written", sync_written)
        patch.setattr(cold._SealingScanner, "_send", send)
        result = cold_scan(engine.store, tree)
    synced: dict[tuple[str, str], int] = {}
    sent = 0
    for line in log.read_text().splitlines():
        pid, what, pack, end = line.split()
        if what == "synced":
            synced[pid, pack] = int(end)
        else:
            sent += 1
            assert int(end) <= synced.get((pid, pack), 0), line  # a row for bytes no finished sync covered
    assert sent >= len(packed_rows(engine.store)) > 1  # (two files with the same bytes: one row)
    for path, data in files_in(tree):
        assert engine.store.blobs.read_bytes(result.snapshot[path].blob) == data, path


def test_a_pack_sync_that_fails_fails_its_worker_and_no_row_names_its_bytes(
    engine: turnback.Engine, tree: Path
) -> None:
    """The sync runs in a thread of the worker: what it raises (an I/O error from the disk) still ends the worker
    as a failure, so the scan is run again in one process, and the parent stored no row of that pack."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(STEPS, "faults", {"eio": STEPS.fsyncs + 1})  # each worker's first fsync, in its sync thread
        result = cold.scan_cold(engine.store, str(tree), RULES, now_ns=time.time_ns(), processes=2)
    assert result is None
    assert packed_rows(engine.store) == []
    assert maintenance.verify(engine.store).clean

"""A first snapshot of a large tree (no stat cache yet: every file is read) split over processes.

The process that scans walks the top of the tree itself, storing what it meets there (its first small files
train the store's dictionary), down to ``SPLIT_UNITS`` folders; then forked processes, one per CPU, take those
folders one at a time and walk each as ``Scanner`` does, reading, hashing, compressing and sealing every file
(``BlobBackend.seal_chunks``: no database asked). Where the store keeps packs, each worker writes the sealed
bytes into a pack file of its own and sends, once every ``PACK_SYNC_BYTES`` a thread of it has synced, the rows
naming them; else it sends the sealed rows themselves. It sends each folder's entries once it is walked, on the
same pipe; the scanning process, the only one that writes, stores the rows one transaction per batch
(``BatchedWriter``) and puts the entries together.

A worker that fails (killed, or an error it cannot answer) makes the whole scan run again in one process, which
then meets the error where it is; what the workers sealed and the parent stored stays (the same ids).
"""

from __future__ import annotations

import errno
import marshal
import os
import selectors
import struct
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, BinaryIO

from turnback.capture.gitindex import GitIndex
from turnback.capture.holds import BlobHold
from turnback.capture.scan.entries import Entry, ScanResult, ScanRules, Snapshot
from turnback.capture.scan.heap import trim_heap
from turnback.capture.scan.split import end_workers, fork_worker, reap_worker, split_units, take_units, unit_queue
from turnback.capture.scan.walk import DIR_FLAGS, BatchedWriter, NotKnown, Scanner
from turnback.fsio import ensure_private_dir
from turnback.model import BlobId
from turnback.store.api import BlobBackend, StoreBackend
from turnback.store.blobs import PackWriter
from turnback.store.records import PackedBlob, SealedBlob

SEND_BYTES = 1 << 20  # sealed rows a worker holds before it sends them
# What a worker writes into its pack between two syncs (each sync is then followed by the rows it made durable):
# the rows wait in the worker, about 100 bytes each, and the parent's transactions hold no sealed bytes.
PACK_SYNC_BYTES = 8 << 20
# Each message on a worker's pipe: the length of its marshal's bytes and of the contents after them, the marshal's
# bytes, then the sealed contents as they are (a 4 MiB chunk not copied twice more, into marshal's bytes and a frame).
_FRAME = struct.Struct("<II")
_ROWS, _FOLDER, _PACKED = 0, 1, 2  # what a message holds: sealed rows, a folder walked, or rows of a pack


class _PackSync(threading.Thread):
    """A worker's pack synced in a thread of its own (the worker goes on sealing meanwhile), and the message of the
    rows naming what it makes durable, sent once it is done."""

    def __init__(self, pack: PackWriter, message: tuple[Any, ...]):
        super().__init__(name="turnback-pack-sync", daemon=True)
        self._pack = pack
        self.message = message
        self._error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self._pack.sync_written()
        except BaseException as exc:  # raised in the worker's own thread, by wait
            self._error = exc

    def wait(self) -> None:
        self.join()
        if self._error is not None:
            raise self._error


class _SealingScanner(Scanner):
    """A worker's walk: each file's content sealed and sent, not stored; each folder's entries sent once walked.

    Each folder handed out starts from the entry the parent recorded for it (*recorded*), so that what the walk
    finds about it (a folder it cannot list) is sent back with the rest.
    """

    def __init__(
        self,
        blobs: BlobBackend,
        recorded: Snapshot,
        rules: ScanRules,
        now_ns: int,
        root: str,
        git_index: GitIndex | None,
    ) -> None:
        super().__init__(rules, {}, self._seal, now_ns, None, root, git_index)
        self._blobs = blobs
        self._recorded = recorded
        self._out: BinaryIO | None = None
        self._rows: list[SealedBlob] = []
        self._row_bytes = 0
        self._contents = 0  # files whose rows are among those held
        self._content_bytes = 0
        self._pack = PackWriter(blobs.packs) if blobs.packs is not None else None
        self._packed: list[tuple[bytes, int, int, int, str, int]] = []
        self._unsynced = 0  # bytes appended to the pack since its last sync
        self._syncing: _PackSync | None = None

    def _seal(self, chunks: Iterable[bytes]) -> tuple[BlobId, int]:
        stored = self._blobs.seal_chunks(chunks, self._hold)
        self._contents += 1
        self._content_bytes += stored.size
        return stored.blob, stored.size

    def _hold(self, row: SealedBlob) -> None:
        if self._pack is not None:
            at = self._pack.append(row.sealed)
            self._packed.append((row.id, row.kind, row.size, len(row.sealed), self._pack.name, at))
            self._unsynced += len(row.sealed)
            if self._unsynced >= PACK_SYNC_BYTES:
                self._send_packed()
            return
        self._rows.append(row)
        self._row_bytes += len(row.sealed)
        if self._row_bytes >= SEND_BYTES:
            self._send_rows()

    def _send(self, message: tuple[Any, ...], contents: Sequence[bytes] = ()) -> None:
        assert self._out is not None
        payload = marshal.dumps(message)
        self._out.write(_FRAME.pack(len(payload), sum(map(len, contents))))
        self._out.write(payload)
        for content in contents:
            self._out.write(content)
        self._out.flush()

    def _send_rows(self) -> None:
        if not self._rows:  # (a worker writing a pack holds none: its counts go with the pack's rows)
            return
        rows = [(row.id, row.kind, row.size, len(row.sealed)) for row in self._rows]
        self._send((_ROWS, rows, self._contents, self._content_bytes), [row.sealed for row in self._rows])
        self._rows, self._row_bytes, self._contents, self._content_bytes = [], 0, 0, 0

    def _send_packed(self, *, last: bool = False) -> None:
        """Sync what the pack holds, and send the rows naming it once that is done (never a row whose bytes could
        be lost). The sync runs in a thread while this worker goes on sealing; the rows of the one before are sent
        first, once it is done. *last*: this one's rows too are sent before it returns."""
        self._send_synced()
        if self._pack is None or not self._packed:
            return
        self._pack.flush()
        message = (_PACKED, self._packed, self._contents, self._content_bytes)
        self._packed, self._unsynced, self._contents, self._content_bytes = [], 0, 0, 0
        self._syncing = _PackSync(self._pack, message)
        if last:
            self._send_synced()

    def _send_synced(self) -> None:
        """Wait for the sync under way (raising what it raised), then send the rows it made durable."""
        if self._syncing is not None:
            syncing, self._syncing = self._syncing, None
            syncing.wait()
            self._send(syncing.message)

    def walk_unit(self, fd: int, prefix: str) -> None:
        """Walk one folder the parent handed out, and send all it found: the sealed rows before the entries naming
        them; rows of the pack may come after (a worker that does not end well makes the scan run again)."""
        folder = self._recorded.get(prefix[:-1])  # (none for the top folder, handed out whole)
        if folder is not None:
            self.snapshot[prefix[:-1]] = folder
        self.walk_from(fd, prefix)
        self._send_rows()
        entries = [tuple(entry) for entry in self.snapshot.values()]
        self._send((_FOLDER, list(self.snapshot), entries, self.files_read, self.bytes_read))
        self.snapshot, self.files_read, self.bytes_read = {}, 0, 0
        trim_heap()  # a worker's own pages on a 10,000-file tree: 18 MB untrimmed, 8-12 MB trimmed after each folder

    def work(self, queue: int, units: list[tuple[int, str]], out: BinaryIO) -> None:
        self._out = out
        try:
            take_units(queue, units, self.walk_unit)
            self._send_packed(last=True)
        finally:
            if self._syncing is not None:
                self._syncing.join()  # (what it raised is moot: the worker fails) before the pack's file is closed
            if self._pack is not None:
                self._pack.close()


class _TopScanner(Scanner):
    """The scanning process's walk of the top of the tree, which keeps every folder it hands out open: one it
    cannot open or list for want of descriptors is no unreadable folder, so the scan gives way to one in one
    process (which keeps one folder open per level)."""

    def folder_unreadable(self, path: str, exc: OSError) -> None:
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            raise NotKnown from exc
        super().folder_unreadable(path, exc)


class _Parent:
    """What the scanning process puts together from its workers' messages."""

    def __init__(self, scanner: Scanner, writer: BatchedWriter):
        self.scanner = scanner
        self.writer = writer

    def take(self, message: tuple[Any, ...], sealed: memoryview) -> None:
        """One message, and the sealed contents sent after it."""
        if message[0] == _PACKED:
            _, packed, contents, size = message
            self.writer.put_packed([PackedBlob._make(row) for row in packed], contents, size)
            return
        if message[0] == _ROWS:
            _, rows, contents, size = message
            blobs, at = [], 0
            for blob_id, kind, blob_size, length in rows:
                blobs.append(SealedBlob(blob_id, kind, blob_size, bytes(sealed[at : at + length])))
                at += length
            self.writer.put_sealed(blobs, contents, size)
            return
        _, paths, entries, files_read, bytes_read = message
        self.scanner.snapshot.update(zip(paths, map(Entry._make, entries), strict=True))
        self.scanner.files_read += files_read
        self.scanner.bytes_read += bytes_read


def _receive(children: dict[int, int], take: Callable[[tuple[Any, ...], memoryview], None]) -> bool:
    """Take every message the workers send, as it comes, until each has ended; whether all ended well."""
    buffers = {found: bytearray() for found in children.values()}
    pids = {found: pid for pid, found in children.items()}
    ok = True
    with selectors.DefaultSelector() as selector:
        for found in buffers:
            selector.register(found, selectors.EVENT_READ)
        while selector.get_map():
            for key, _ in selector.select():
                found = key.fd
                data = os.read(found, 1 << 20)
                buffer = buffers[found]
                if not data:  # the worker has ended (or died): what is left is a message cut short
                    selector.unregister(found)
                    os.close(found)
                    pid = pids[found]
                    children[pid] = -1
                    ok = reap_worker(children, pid) and not buffer and ok
                    continue
                buffer += data
                start = 0
                while len(buffer) - start >= _FRAME.size:
                    length, sealed_length = _FRAME.unpack_from(buffer, start)
                    middle = start + _FRAME.size + length
                    end = middle + sealed_length
                    if end > len(buffer):
                        break
                    take(
                        marshal.loads(memoryview(buffer)[start + _FRAME.size : middle]), memoryview(buffer)[middle:end]
                    )
                    start = end
                del buffer[:start]
    return ok


def scan_cold(
    store: StoreBackend,
    root: str,
    rules: ScanRules,
    *,
    now_ns: int,
    processes: int,
    git_index: GitIndex | None = None,
    hold: BlobHold | None = None,
) -> ScanResult | None:
    """The first snapshot of the tree at *root*, its files read by *processes* forked workers; ``None`` when a
    worker failed, or the top of the tree has more folders than this process may keep open (the caller scans
    again in one process). *hold*: as ``scan_tree``'s."""
    writer = BatchedWriter(store, teach=True, hold=hold)
    scanner = _TopScanner(rules, {}, writer.put, now_ns, None, root, git_index)
    children: dict[int, int] = {}  # pid: the pipe it sends on (-1 once closed)
    units: list[tuple[int, str]] = []
    queue = -1
    try:
        if store.blobs.packs is not None:
            ensure_private_dir(store.blobs.packs)
        units = split_units(scanner, os.open(root, DIR_FLAGS))
        writer.commit()  # the dictionary trained (on the first small files met) before a worker compresses
        if units:
            queued = unit_queue(units)
            if queued is None:
                writer.commit()
                return None
            queue = queued

            def work(out: BinaryIO) -> None:
                # Made in each worker, never here: its put is its own method, a cycle that would keep the whole
                # snapshot it starts from (about 95 MB at 120k entries) alive after the scan until a collection.
                _SealingScanner(store.blobs, scanner.snapshot, rules, now_ns, root, git_index).work(queue, units, out)

            for _ in range(processes):
                try:
                    fork_worker(work, children)
                except OSError:  # no more processes now: the ones there are take it all
                    break
            if not children:
                take_units(queue, units, scanner.walk_from)  # no worker could start: this process walks it all
            elif not _receive(children, _Parent(scanner, writer).take):
                writer.commit()
                return None
    except NotKnown:
        writer.commit()
        return None
    except BaseException as exc:
        writer.abort(exc)
        raise
    finally:
        end_workers(children)
        for fd, _ in units:
            os.close(fd)
        if queue >= 0:
            os.close(queue)
    writer.commit()
    trim_heap()  # what the workers sent, read into buffers of up to a 4 MiB chunk each
    return ScanResult(scanner.snapshot, scanner.files_read, scanner.bytes_read)


__all__ = ["scan_cold"]

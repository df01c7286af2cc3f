"""Content blobs: keyed-hash ids, zstandard, AES-256-GCM, stored once.

A file's content id is the keyed hash of all its bytes. Content up to
``CHUNK_SIZE`` is one ``data`` blob; longer content is cut into chunks (each
a ``data`` blob under its own keyed id) listed by a ``chunks`` blob under
the whole content's id. So a 2 GB file never sits in memory, identical
chunks are kept once, and a restore can check each chunk and the whole.

A blob row's ``data`` is sealed with associated data ``blob || id || kind``,
so a blob cannot be swapped for another.

Small contents compress far better against a dictionary of what a project's
files share (the way git's delta packs do across files): once a store has
one (trained on a project's first files up to ``DICT_SAMPLE_MAX`` bytes,
sealed in ``meta``, never changed), every data blob is compressed with it
(kind ``KIND_DATA_DICT``). Blobs stored before it stay as they are.

A plain folder's first snapshot is read by forked workers (``capture.scan.cold``): each writes the sealed
bytes into a pack file of its own (``packs/<32 hex>.pack``, ``PackWriter``) and syncs it before the rows that
name it (``pack``, ``pack_at``, an empty ``data``) are sent to the one process that writes the database, which
then never copies those bytes into a transaction of its own. A shared store has no packs. ``gc`` folds a pack
most of whose bytes are no longer needed back into rows, and deletes a pack no row names once it is idle.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple, Protocol

import zstandard

from turnback.catalog import Message
from turnback.errors import BlobCorruptError
from turnback.fsio import STEPS
from turnback.model import BlobId
from turnback.store.crypto import ID_LEN, Crypto
from turnback.store.records import PackedBlob, SealedBlob, StoredBlob, StoredContent
from turnback.store.sql import SqlDatabase

CHUNK_SIZE = 4 << 20
KIND_DATA = 0
KIND_CHUNKS = 1
KIND_DATA_DICT = 2
ZSTD_LEVEL = 3
DICT_META_KEY = "zstd_dictionary"
DICT_BYTES = 112 << 10
# The largest content the dictionary is trained on (a larger one teaches what its own bytes hold). Every data blob
# is compressed against it, large ones too: on the benchmark's 50,000-file tree the contents over 64 KiB (438 of its
# 699 MB) came to 8.5 MB less than without it (218.3 MB against 226.8 MB in all), in the same time.
DICT_SAMPLE_MAX = 64 << 10
DICT_MIN_SAMPLES = 500  # fewer files than this teach a dictionary little
# zstd's cover parameters fixed rather than searched: the search costs about 5x the training (1.8 s against 0.35 s
# on 1,000 files here) for contents 0.4% smaller.
DICT_COVER_K = 1024
DICT_COVER_D = 8
# fastcover's acceleration: 1,000 small files of the benchmark's tree trained in 42 ms against 68 ms (accel 1), the
# same files compressed against it no larger (-0.15%).
DICT_COVER_ACCEL = 4
DICT_LOOK_AGAIN_S = 10.0


PACKS_DIR = "packs"
PACK_WRITE_BYTES = 1 << 20
PACK_IDLE_S = 3600  # a pack written to within this long may belong to a first snapshot still running
_PACK_NAME = re.compile(r"[0-9a-f]{32}\.pack")
_PACK_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def is_pack_name(name: str) -> bool:
    """Whether *name* is one ``PackWriter`` makes (a row's ``pack`` is checked before it is opened)."""
    return _PACK_NAME.fullmatch(name) is not None


class PackWriter:
    """One worker's pack file, made in *folder* (a private folder of the store) on the first write: sealed blobs
    one after the other, nothing else (the rows that name them say where each starts and how long it is).

    ``append`` gathers sealed blobs and writes them ``PACK_WRITE_BYTES`` at a time (a write per blob was a system
    call per file of a first snapshot); ``flush`` writes what it gathered, and ``sync_written`` makes all written
    durable, the file and its name: only then may rows naming them be stored. ``sync_written`` may run in another
    thread while this one appends (it touches nothing ``append`` and ``flush`` change).
    """

    def __init__(self, folder: str):
        self._folder = folder
        self.name = f"{os.urandom(16).hex()}.pack"
        self._fd = -1
        self.size = 0  # bytes appended, written or gathered
        self._gathered = bytearray()
        self._named = False  # the folder synced since the file was made

    def append(self, sealed: bytes) -> int:
        """Add *sealed* at the end of the pack; where it starts."""
        at = self.size
        self.size += len(sealed)
        if len(sealed) >= PACK_WRITE_BYTES:  # a large chunk written as it is, not copied in first
            self.flush()
            self._write(sealed)
            return at
        self._gathered += sealed
        if len(self._gathered) >= PACK_WRITE_BYTES:
            self.flush()
        return at

    def flush(self) -> None:
        """Write what ``append`` gathered."""
        if self._gathered:
            self._write(self._gathered)
            self._gathered.clear()

    def _write(self, data: bytes | bytearray) -> None:
        if self._fd < 0:
            folder = os.open(self._folder, _DIR_FLAGS)
            try:
                self._fd = os.open(
                    self.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder
                )
            finally:
                os.close(folder)
        written = 0
        with memoryview(data) as whole:  # every view released before the caller clears *data*: a view pins its size
            while written < len(whole):
                with whole[written:] as rest:
                    written += STEPS.write(self._fd, rest)

    def sync_written(self) -> None:
        """Make what was written (``flush``) durable: the file, and once the folder that names it."""
        if self._fd < 0:
            return
        STEPS.fsync(self._fd)
        if not self._named:
            folder = os.open(self._folder, _DIR_FLAGS)
            try:
                STEPS.fsync(folder)
            finally:
                os.close(folder)
            self._named = True

    def close(self) -> None:
        """Close the file; what was gathered and not flushed is dropped (no row names it)."""
        self._gathered.clear()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _pack_unreadable(blob: str, pack: str, exc: OSError) -> Message:
    return Message("blob_pack_unreadable", blob=blob, pack=pack, error=exc.strerror or type(exc).__name__)


def _context(blob_id: bytes, kind: int) -> bytes:
    return b"blob" + blob_id + bytes([kind])


# Blob ids asked about in one query (``present``).
_IDS_PER_QUERY = 500
# A blob already stored keeps its bytes, and is stored again as far as gc can tell: a scan that met it again
# names it in a record only later, and gc spares what was stored since that scan began (``BlobHold``).
_INSERT_BLOB = (
    "INSERT INTO blobs(id, kind, size, stored, data, created_at) VALUES(?,?,?,?,?,?)"
    " ON CONFLICT(id) DO UPDATE SET created_at=excluded.created_at"
)
_INSERT_PACKED = (
    "INSERT INTO blobs(id, kind, size, stored, data, pack, pack_at, created_at) VALUES(?,?,?,?,?,?,?,?)"
    " ON CONFLICT(id) DO UPDATE SET created_at=excluded.created_at"
)


class _Opened(NamedTuple):
    kind: int  # KIND_DATA or KIND_CHUNKS (a dictionary-compressed blob opens as data)
    plain: bytes


class _PutBlob(Protocol):
    def __call__(self, blob_id: BlobId, kind: int, plain: bytes, *, size: int | None = None) -> None: ...


class BlobStore:
    def __init__(self, db: SqlDatabase, crypto: Crypto, packs: str | None = None):
        """*packs*: the folder of this store's pack files (``None``: a store without any, a shared one)."""
        self._db = db
        self._crypto = crypto
        self.packs = packs
        self._compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        self._decompressor = zstandard.ZstdDecompressor()
        self._dict_compressor: zstandard.ZstdCompressor | None = None
        self._dict_decompressor: zstandard.ZstdDecompressor | None = None
        self._dict_looked_at: float | None = None

    # -- the dictionary ---------------------------------------------------------------------

    def _load_dictionary(self, *, now: bool = False) -> None:
        """Read the store's dictionary; a store without one is looked at again after ``DICT_LOOK_AGAIN_S``
        (another process may train it meanwhile), one with one never (it never changes)."""
        if self._dict_compressor is not None:
            return
        moment = time.monotonic()
        if not now and self._dict_looked_at is not None and moment - self._dict_looked_at < DICT_LOOK_AGAIN_S:
            return
        self._dict_looked_at = moment
        row = self._db.one("SELECT value FROM meta WHERE key=?", (DICT_META_KEY,))
        if row is not None:
            raw = self._crypto.open(bytes(row["value"]), DICT_META_KEY.encode())
            dictionary = zstandard.ZstdCompressionDict(raw)
            dictionary.precompute_compress(level=ZSTD_LEVEL)  # else each compress loads it again
            self._dict_compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, dict_data=dictionary)
            self._dict_decompressor = zstandard.ZstdDecompressor(dict_data=dictionary)

    def has_dictionary(self) -> bool:
        self._load_dictionary()
        return self._dict_compressor is not None

    def train_dictionary(self, samples: list[bytes]) -> bool:
        """Give the store its dictionary, trained on *samples* (contents of one project); False when it has one
        already or the samples are too few to teach one. Call inside a transaction."""
        small: list[bytes | bytearray | memoryview] = [s for s in samples if 0 < len(s) <= DICT_SAMPLE_MAX]
        if self.has_dictionary() or len(small) < DICT_MIN_SAMPLES:
            return False
        try:
            raw = zstandard.train_dictionary(
                DICT_BYTES, small, k=DICT_COVER_K, d=DICT_COVER_D, accel=DICT_COVER_ACCEL
            ).as_bytes()
        except zstandard.ZstdError:
            return False  # samples zstd can learn nothing from
        self._db.execute(
            "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT DO NOTHING",
            (DICT_META_KEY, self._crypto.seal(raw, DICT_META_KEY.encode())),
        )
        self._load_dictionary(now=True)  # another process may have given it one first: theirs is the one
        return True

    # -- writing ---------------------------------------------------------------------------

    def _seal(self, blob_id: bytes, kind: int, plain: bytes, size: int) -> SealedBlob:
        compressor = self._compressor
        if kind == KIND_DATA and self.has_dictionary():
            assert self._dict_compressor is not None
            kind, compressor = KIND_DATA_DICT, self._dict_compressor
        return SealedBlob(blob_id, kind, size, self._crypto.seal(compressor.compress(plain), _context(blob_id, kind)))

    def _put(self, blob_id: BlobId, kind: int, plain: bytes, *, size: int | None = None) -> None:
        """Store one blob; ``size`` is the content's size (a chunk list's is the whole content's, not its own).
        One already stored is only marked stored now (see ``_INSERT_BLOB``), not sealed again."""
        touched = self._db.execute("UPDATE blobs SET created_at=? WHERE id=?", (time.time_ns(), blob_id))
        if not touched.rowcount:
            self.put_sealed([self._seal(blob_id, kind, plain, len(plain) if size is None else size)])

    def put_sealed(self, rows: Sequence[SealedBlob]) -> None:
        """Store blobs sealed by ``seal_chunks`` (in this process or another); one already stored stays as it is."""
        now = time.time_ns()
        self._db.executemany(
            _INSERT_BLOB, [(row.id, row.kind, row.size, len(row.sealed), row.sealed, now) for row in rows]
        )

    def put_packed(self, rows: Sequence[PackedBlob]) -> None:
        """Store the rows of blobs a worker wrote into a pack it synced; one already stored stays as it is."""
        now = time.time_ns()
        self._db.executemany(
            _INSERT_PACKED,
            [(row.id, row.kind, row.size, row.stored, b"", row.pack, row.at, now) for row in rows],
        )

    def put_bytes(self, data: bytes) -> BlobId:
        """Store *data* (once) and return its content id."""
        return self.put_chunks([data]).blob

    def put_chunks(self, chunks: Iterable[bytes]) -> StoredContent:
        """Store content given as pieces of any size; return its content id and size.

        Call inside a transaction so the content and its chunks land together.
        """
        return self._chunked(chunks, self._put)

    def seal_chunks(self, chunks: Iterable[bytes], out: Callable[[SealedBlob], None]) -> StoredContent:
        """What ``put_chunks`` stores, handed to *out* as sealed rows instead (without asking the database
        which it has): a process forked from this one seals, the one that forked it stores (``put_sealed``)."""

        def seal(blob_id: BlobId, kind: int, plain: bytes, *, size: int | None = None) -> None:
            out(self._seal(blob_id, kind, plain, len(plain) if size is None else size))

        return self._chunked(chunks, seal)

    def _chunked(self, chunks: Iterable[bytes], put: _PutBlob) -> StoredContent:
        """Hash *chunks* whole, cut them into chunk blobs when longer than ``CHUNK_SIZE``, and *put* each blob."""
        whole = self._crypto.content_hasher()
        chunk_ids: list[bytes] = []
        pending: list[bytes] = []  # pieces not put yet (most contents are one piece: never copied whole)
        pending_size = size = 0
        for piece in chunks:
            whole.update(piece)
            size += len(piece)
            pending.append(piece)
            pending_size += len(piece)
            while pending_size > CHUNK_SIZE:
                joined = b"".join(pending)
                chunk, rest = joined[:CHUNK_SIZE], joined[CHUNK_SIZE:]
                pending, pending_size = [rest], len(rest)
                chunk_id = self._crypto.content_id(chunk)
                put(chunk_id, KIND_DATA, chunk)
                chunk_ids.append(chunk_id)
        content_id = BlobId(whole.digest())
        last = b"".join(pending)
        if not chunk_ids:
            put(content_id, KIND_DATA, last)
            return StoredContent(content_id, size)
        if last:
            chunk_id = self._crypto.content_id(last)
            put(chunk_id, KIND_DATA, last)
            chunk_ids.append(chunk_id)
        put(content_id, KIND_CHUNKS, b"".join(chunk_ids), size=size)
        return StoredContent(content_id, size)

    # -- reading ---------------------------------------------------------------------------

    def has(self, blob_id: BlobId) -> bool:
        return self._db.one("SELECT 1 FROM blobs WHERE id=?", (blob_id,)) is not None

    def present(self, blob_ids: Iterable[bytes]) -> set[bytes]:
        """Which of *blob_ids* are stored: a query per few hundred ids (each a bound parameter, well under
        SQLite's and PostgreSQL's limits)."""
        ids = list(dict.fromkeys(blob_ids))
        found: set[bytes] = set()
        for first in range(0, len(ids), _IDS_PER_QUERY):
            part = ids[first : first + _IDS_PER_QUERY]
            marks = ", ".join("?" * len(part))
            rows = self._db.all(f"SELECT id FROM blobs WHERE id IN ({marks})", part)
            found.update(row["id"] for row in rows if isinstance(row["id"], bytes))
        return found

    def _read_packed(self, blob_id: bytes, pack: object, at: object, length: object) -> bytes:
        """A packed blob's sealed bytes, read from its pack (never through a link, by a name checked first)."""
        blob = blob_id[:6].hex()
        if not (isinstance(pack, str) and isinstance(at, int) and isinstance(length, int)) or not is_pack_name(pack):
            raise BlobCorruptError(Message("blob_damaged", blob=blob))
        if self.packs is None:
            raise BlobCorruptError(Message("blob_pack_missing", blob=blob, pack=pack))
        try:
            folder = os.open(self.packs, _DIR_FLAGS)
            try:
                fd = os.open(pack, _PACK_FLAGS, dir_fd=folder)
            finally:
                os.close(folder)
        except FileNotFoundError as exc:
            raise BlobCorruptError(Message("blob_pack_missing", blob=blob, pack=pack)) from exc
        except OSError as exc:  # a link in its place (never followed), or a pack this user may not read
            raise BlobCorruptError(_pack_unreadable(blob, pack, exc)) from exc
        try:
            sealed = os.pread(fd, length, at)
        except OSError as exc:
            raise BlobCorruptError(_pack_unreadable(blob, pack, exc)) from exc
        finally:
            os.close(fd)
        if len(sealed) != length:
            raise BlobCorruptError(Message("blob_pack_short", blob=blob, pack=pack))
        return sealed

    def _sealed_row(self, blob_id: bytes) -> tuple[int, bytes]:
        """A blob's kind and its sealed bytes, from its row or its pack."""
        row = self._db.one("SELECT kind, data, pack, pack_at, stored FROM blobs WHERE id=?", (blob_id,))
        if row is None:
            raise BlobCorruptError(Message("blob_missing", blob=blob_id[:6].hex()))
        if row["pack"] is not None:
            return row["kind"], self._read_packed(blob_id, row["pack"], row["pack_at"], row["stored"])
        return row["kind"], row["data"]

    def sealed(self, blob_id: bytes) -> bytes:
        """A blob's sealed bytes as stored (a copy of the store takes them as they are, out of any pack)."""
        return self._sealed_row(blob_id)[1]

    def _get(self, blob_id: bytes) -> _Opened:
        kind, sealed = self._sealed_row(blob_id)
        if kind not in (KIND_DATA, KIND_CHUNKS, KIND_DATA_DICT) or not isinstance(sealed, bytes):
            raise BlobCorruptError(Message("blob_damaged", blob=blob_id[:6].hex()))
        decompressor = self._decompressor
        if kind == KIND_DATA_DICT:
            self._load_dictionary(now=True)
            if self._dict_decompressor is None:
                raise BlobCorruptError(Message("blob_dictionary_missing", blob=blob_id[:6].hex()))
            decompressor = self._dict_decompressor
        try:
            plain = decompressor.decompress(self._crypto.open(sealed, _context(blob_id, kind)))
        except BlobCorruptError as exc:
            raise BlobCorruptError(Message("blob_damaged", blob=blob_id[:6].hex())) from exc
        except zstandard.ZstdError as exc:
            raise BlobCorruptError(Message("blob_not_decompressing", blob=blob_id[:6].hex())) from exc
        return _Opened(KIND_DATA if kind == KIND_DATA_DICT else kind, plain)

    def iter_content(self, blob_id: BlobId) -> Iterator[bytes]:
        """Yield the content in chunks, each checked against its keyed id.

        The whole content's id is checked at the end, before the last chunk
        is yielded, so a caller that writes to a temp file and renames only
        after the loop never puts damaged content in place.
        """
        kind, plain = self._get(blob_id)
        if kind == KIND_DATA:
            if self._crypto.content_id(plain) != blob_id:
                raise BlobCorruptError(Message("blob_id_mismatch", blob=blob_id[:6].hex()))
            yield plain
            return
        if len(plain) % ID_LEN:
            raise BlobCorruptError(Message("blob_chunk_list_damaged", blob=blob_id[:6].hex()))
        whole = self._crypto.content_hasher()
        chunk_ids = [plain[i : i + ID_LEN] for i in range(0, len(plain), ID_LEN)]
        held: bytes | None = None
        for chunk_id in chunk_ids:
            chunk_kind, chunk = self._get(chunk_id)
            if chunk_kind != KIND_DATA or self._crypto.content_id(chunk) != chunk_id:
                raise BlobCorruptError(Message("blob_chunk_mismatch", blob=blob_id[:6].hex()))
            whole.update(chunk)
            if held is not None:
                yield held
            held = chunk
        if whole.digest() != blob_id:
            raise BlobCorruptError(Message("blob_id_mismatch", blob=blob_id[:6].hex()))
        if held is not None:
            yield held

    def read_bytes(self, blob_id: BlobId) -> bytes:
        return b"".join(self.iter_content(blob_id))

    def verify(self, blob_id: BlobId) -> bool:
        try:
            for _ in self.iter_content(blob_id):
                pass
        except BlobCorruptError:
            return False
        return True

    # -- what gc and verify ask -----------------------------------------------------------------

    def stored(self) -> list[StoredBlob]:
        """Every blob, with the bytes it takes in the store and when it was last stored."""
        rows = self._db.all("SELECT id, stored, created_at FROM blobs")
        return [StoredBlob(bytes(row["id"]), row["stored"], row["created_at"]) for row in rows]

    def ids(self) -> set[bytes]:
        return {bytes(row["id"]) for row in self._db.all("SELECT id FROM blobs")}

    def chunk_list_ids(self) -> list[bytes]:
        """The blobs that list the chunks of a content too large for one blob."""
        return [bytes(row["id"]) for row in self._db.all("SELECT id FROM blobs WHERE kind=?", (KIND_CHUNKS,))]

    def chunks_listed(self, blob_ids: Iterable[bytes]) -> set[bytes]:
        """The chunks that the chunk-list blobs among *blob_ids* name (their content lives there); a list that
        does not open names none."""
        found: set[bytes] = set()
        for blob_id in blob_ids:
            row = self._db.one("SELECT kind FROM blobs WHERE id=?", (blob_id,))
            if row is None or row["kind"] != KIND_CHUNKS:
                continue
            try:
                listing = self._get(blob_id).plain
            except BlobCorruptError:
                continue
            found.update(listing[i : i + ID_LEN] for i in range(0, len(listing), ID_LEN))
        return found

    def delete(self, blob_id: bytes) -> None:
        """Delete a blob nothing needs (gc decides which); a packed one's bytes go with its pack (``reclaim_packs``)."""
        self._db.execute("DELETE FROM blobs WHERE id=?", (blob_id,))

    def reclaim_packs(self, transaction: Callable[[], contextlib.AbstractContextManager[None]]) -> int:
        """Delete the idle packs no row names, and fold into their rows those whose rows need less than half of
        them, then delete them; the bytes given back. Each pack is folded in a *transaction* committed before
        the pack is deleted; one that cannot be read whole is left as it is (``verify`` names its copies). A pack
        written to in the last ``PACK_IDLE_S`` is left (a first snapshot may be writing it, its rows not stored
        yet)."""
        if self.packs is None or self._db.in_transaction:
            # Inside a transaction a fold would not be committed before its pack is deleted (a rollback would then
            # leave rows naming bytes gone): the next gc outside one reclaims them.
            return 0
        try:
            folder = os.open(self.packs, _DIR_FLAGS)
        except FileNotFoundError:
            return 0
        freed = 0
        try:
            idle_before = time.time() - PACK_IDLE_S
            for name in sorted(name for name in os.listdir(folder) if is_pack_name(name)):
                try:
                    st = os.stat(name, dir_fd=folder, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if st.st_mtime > idle_before:
                    continue
                needed = self._db.one(
                    "SELECT COUNT(*) AS rows, COALESCE(SUM(stored), 0) AS bytes FROM blobs WHERE pack=?", (name,)
                )
                assert needed is not None  # an aggregate always answers
                if needed["rows"] and needed["bytes"] * 2 >= st.st_size:
                    continue
                if needed["rows"]:
                    try:
                        self._fold(name, transaction)
                    except BlobCorruptError:
                        continue
                os.unlink(name, dir_fd=folder)
                freed += st.st_size - needed["bytes"]
        finally:
            os.close(folder)
        return freed

    def _fold(self, pack: str, transaction: Callable[[], contextlib.AbstractContextManager[None]]) -> None:
        """Put the sealed bytes of every row naming *pack* into the row itself, in one transaction."""
        with transaction():
            for row in self._db.all("SELECT id, pack_at, stored FROM blobs WHERE pack=?", (pack,)):
                sealed = self._read_packed(bytes(row["id"]), pack, row["pack_at"], row["stored"])
                self._db.execute("UPDATE blobs SET data=?, pack=NULL, pack_at=NULL WHERE id=?", (sealed, row["id"]))


__all__ = ["CHUNK_SIZE", "PACKS_DIR", "BlobStore", "PackWriter", "is_pack_name"]

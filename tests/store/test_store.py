"""The store: keys, blobs, sealed fields, schema."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from pathlib import Path

import pytest

import turnback
from tests.conftest import TEST_KEY
from turnback.store import Store
from turnback.store.blobs import CHUNK_SIZE
from turnback.store.schema import SCHEMA_VERSION


def open_store(home: Path, key: str | None = TEST_KEY) -> Store:
    return Store.open(str(home), key_secret=key, try_keyring=False)


def test_new_store_without_env_key_makes_a_private_key_file(home: Path) -> None:
    with open_store(home, key=None):
        pass
    key_file = home / "key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert (home.stat().st_mode & 0o777) == 0o700
    with open_store(home, key=None) as store:  # the same key opens it again
        blob = store.blobs.put_bytes(b"x")
        assert store.blobs.read_bytes(blob) == b"x"


def test_key_file_readable_by_others_is_refused(home: Path) -> None:
    with open_store(home, key=None):
        pass
    (home / "key").chmod(0o644)
    with pytest.raises(turnback.KeyUnavailableError, match="mode 644; it must be 600"):
        open_store(home, key=None)


def test_key_file_that_is_a_symlink_is_refused(home: Path, tmp_path: Path) -> None:
    with open_store(home, key=None):
        pass
    real = tmp_path / "elsewhere"
    (home / "key").rename(real)
    (home / "key").symlink_to(real)
    with pytest.raises(turnback.KeyUnavailableError, match="not a link"):
        open_store(home, key=None)


def test_wrong_secret_is_refused(home: Path) -> None:
    with open_store(home):
        pass
    with pytest.raises(turnback.KeyUnavailableError, match="does not open this store"):
        open_store(home, key="another-secret-of-enough-length")


def test_short_secret_is_refused(home: Path) -> None:
    with pytest.raises(turnback.KeyUnavailableError, match="at least 16"):
        open_store(home, key="short")


def test_store_keyed_by_env_needs_the_env_key(home: Path) -> None:
    with open_store(home):
        pass
    with pytest.raises(turnback.KeyUnavailableError, match="TURNBACK_KEY, which is not set"):
        open_store(home, key=None)


def test_blobs_are_stored_once_and_round_trip(home: Path) -> None:
    with open_store(home) as store:
        with store.transaction():
            first = store.blobs.put_bytes(b"same content\n")
            second = store.blobs.put_bytes(b"same content\n")
        assert first == second
        assert store.db.one("SELECT COUNT(*) FROM blobs")[0] == 1
        assert store.blobs.read_bytes(first) == b"same content\n"


def test_blob_ids_are_keyed_not_plain_hashes(home: Path, tmp_path: Path) -> None:
    data = b"a well-known file\n"
    with open_store(home) as store:
        blob = store.blobs.put_bytes(data)
    with Store.open(str(tmp_path / "other"), key_secret="another-secret-of-enough-length", try_keyring=False) as other:
        other_blob = other.blobs.put_bytes(data)
    assert blob != other_blob
    assert blob not in (hashlib.sha256(data).digest(), hashlib.blake2b(data, digest_size=32).digest())


def test_large_content_is_chunked_and_checked(home: Path) -> None:
    data = os.urandom(CHUNK_SIZE) + b"tail" + os.urandom(CHUNK_SIZE // 2)
    with open_store(home) as store:
        with store.transaction():
            blob, size = store.put_content(iter([data[:1000], data[1000:]]))
        assert size == len(data)
        assert b"".join(store.blobs.iter_content(blob)) == data
        assert store.db.one("SELECT kind FROM blobs WHERE id=?", (blob,))[0] == 1
        assert store.db.one("SELECT COUNT(*) FROM blobs")[0] == 3  # the chunk list and two chunks


def test_a_flipped_byte_is_detected(home: Path) -> None:
    with open_store(home) as store:
        blob = store.blobs.put_bytes(b"precious bytes" * 100)
        sealed = bytearray(store.db.one("SELECT data FROM blobs WHERE id=?", (blob,))[0])
        sealed[len(sealed) // 2] ^= 0x01
        store.db.execute("UPDATE blobs SET data=? WHERE id=?", (bytes(sealed), blob))
        with pytest.raises(turnback.BlobCorruptError, match="damaged"):
            store.blobs.read_bytes(blob)
        assert not store.blobs.verify(blob)


def test_sealed_data_moved_to_another_blob_does_not_open(home: Path) -> None:
    with open_store(home) as store:
        one = store.blobs.put_bytes(b"one")
        two = store.blobs.put_bytes(b"two")
        sealed = store.db.one("SELECT data FROM blobs WHERE id=?", (one,))[0]
        store.db.execute("UPDATE blobs SET data=? WHERE id=?", (sealed, two))
        with pytest.raises(turnback.BlobCorruptError):
            store.blobs.read_bytes(two)


def test_database_runs_in_wal_with_full_sync(home: Path) -> None:
    with open_store(home) as store:
        assert store.db.one("PRAGMA journal_mode")[0] == "wal"
        assert store.db.one("PRAGMA synchronous")[0] == 2  # FULL
        assert store.db.schema_version() == SCHEMA_VERSION


def test_a_store_from_a_newer_turnback_is_refused(home: Path) -> None:
    with open_store(home):
        pass
    conn = sqlite3.connect(home / "turnback.db")
    conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1).encode(),))
    conn.commit()
    conn.close()
    with pytest.raises(turnback.SchemaTooNewError, match="Upgrade turnback"):
        open_store(home)


def test_store_folder_writable_by_others_is_refused(home: Path) -> None:
    with open_store(home):
        pass
    home.chmod(0o777)
    with pytest.raises(turnback.UnsafePathError, match="can be written by other users"):
        open_store(home)


def test_a_store_opens_while_another_process_holds_its_write_lock(home: Path) -> None:
    """A command opens and reads the store while a write is under way (a long one, or one stopped mid-way)."""
    with Store.open(str(home), key_secret=TEST_KEY, try_keyring=False):
        pass
    holder = sqlite3.connect(os.path.join(home, "turnback.db"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with Store.open(str(home), key_secret=TEST_KEY, try_keyring=False) as store:
            assert store.db.schema_version() == SCHEMA_VERSION
        assert time.monotonic() - started < 5, "opening waited for the other write"
    finally:
        holder.rollback()
        holder.close()

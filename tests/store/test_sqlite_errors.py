"""What an SQLite error means is decided by SQLite's result code, never by the words of its message (issue 14:
no code decides anything from the text of a message)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import TEST_KEY
from turnback.errors import BusyError, StoreError
from turnback.store.store import DB_NAME, Store


def test_an_error_that_names_a_locked_table_is_no_lock_and_malformed_json_is_no_damage(home: Path) -> None:
    with Store.open(str(home), key_secret=TEST_KEY, try_keyring=False) as store:
        with pytest.raises(StoreError) as missing:
            store.db.one("SELECT * FROM locked_rows")  # "no such table: locked_rows": SQLITE_ERROR, not BUSY
        assert not isinstance(missing.value, BusyError)
        assert missing.value.code == "store_database_failed"
        with pytest.raises(StoreError) as malformed:
            store.db.one("SELECT json('not json')")  # "malformed JSON": the query's fault, not the file's
        assert malformed.value.code == "store_database_failed"


def test_a_file_that_is_not_a_database_is_said_to_be_damaged_by_its_code(home: Path) -> None:
    Store.open(str(home), key_secret=TEST_KEY, try_keyring=False).close()
    (home / DB_NAME).write_bytes(b"not a database " * 512)
    for suffix in ("-wal", "-shm"):
        (home / (DB_NAME + suffix)).unlink(missing_ok=True)
    with pytest.raises(StoreError) as refused:
        Store.open(str(home), key_secret=TEST_KEY, try_keyring=False).close()
    assert refused.value.code == "store_unreadable"
    assert refused.value.message.params["reason"] == "file is not a database"

"""A store kept open across requests (the hook relay's ``engine.KeptStore``): each request's engine reads what
a new opening would, and the store is opened again when a new opening would give another."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import turnback
from tests.conftest import TEST_KEY
from turnback.engine import KeptStore
from turnback.store.schema import SCHEMA_VERSION


@pytest.fixture
def kept(home: Path) -> Iterator[KeptStore]:
    """The store in *home* kept open, as the relay keeps it, after one request (closed after the test)."""
    store = KeptStore(lambda: turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False))
    try:
        store.give_back(store.engine())
        yield store
    finally:
        store.close()


def set_meta(home: Path, key: str, value: bytes) -> None:
    """What another process (a newer turnback, other keys) writes into the store's database."""
    conn = sqlite3.connect(home / "turnback.db")
    try:
        conn.execute("UPDATE meta SET value=? WHERE key=?", (value, key))
        conn.commit()
    finally:
        conn.close()


def test_each_request_shares_the_store_and_reads_the_settings_afresh(home: Path, kept: KeptStore) -> None:
    first = kept.engine()
    assert first.config.diff_lines == 20
    kept.give_back(first)
    with turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False) as other:
        other.set_config("render.diff_lines", "7")  # another process, between two requests
    second = kept.engine()
    assert second.store is first.store
    assert second.config.diff_lines == 7
    kept.give_back(second)


def test_a_schema_a_newer_turnback_migrated_to_is_refused_as_a_new_opening_refuses_it(
    home: Path, kept: KeptStore
) -> None:
    set_meta(home, "schema_version", str(SCHEMA_VERSION + 1).encode())
    with pytest.raises(turnback.SchemaTooNewError, match="Upgrade turnback"):
        kept.engine()


def test_a_database_named_in_config_toml_is_opened_instead_of_the_kept_store(home: Path, kept: KeptStore) -> None:
    (home / "config.toml").write_text('[store]\nurl = "postgresql://127.0.0.1:1/nowhere"\n')
    with pytest.raises(turnback.StoreError):  # a new opening goes there (and finds no server)
        kept.engine()


def test_keys_replaced_in_the_database_make_the_store_opened_again(home: Path, kept: KeptStore) -> None:
    first = kept.engine()
    kept.give_back(first)
    assert first.store.is_current()
    set_meta(home, "key_check", b"sealed with other keys")
    assert not first.store.is_current()
    with pytest.raises(turnback.TurnbackError):  # the key given no longer opens it: as a new opening says
        kept.engine()

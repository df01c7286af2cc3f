"""A store kept open across requests (the hook relay's ``engine.KeptStore``): each request's engine reads what
a new opening would, and the store is opened again when a new opening would give another."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import turnback
from tests.conftest import TEST_KEY
from turnback.engine import KeptStore
from turnback.store.schema import SCHEMA_VERSION


def opener(home: Path) -> KeptStore:
    return KeptStore(lambda: turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False))


def test_each_request_shares_the_store_and_reads_the_settings_afresh(home: Path) -> None:
    kept = opener(home)
    try:
        first = kept.engine()
        assert first.config.diff_lines == 20
        kept.give_back(first)
        with turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False) as other:
            other.set_config("render.diff_lines", "7")  # another process, between two requests
        second = kept.engine()
        assert second.store is first.store
        assert second.config.diff_lines == 7
        kept.give_back(second)
    finally:
        kept.close()


def test_a_schema_a_newer_turnback_migrated_to_is_refused_as_a_new_opening_refuses_it(home: Path) -> None:
    kept = opener(home)
    try:
        kept.give_back(kept.engine())
        conn = sqlite3.connect(home / "turnback.db")
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1).encode(),))
        conn.commit()
        conn.close()
        with pytest.raises(turnback.SchemaTooNewError, match="Upgrade turnback"):
            kept.engine()
    finally:
        kept.close()


def test_a_database_named_in_config_toml_is_opened_instead_of_the_kept_store(home: Path) -> None:
    kept = opener(home)
    try:
        kept.give_back(kept.engine())
        (home / "config.toml").write_text('[store]\nurl = "postgresql://127.0.0.1:1/nowhere"\n')
        with pytest.raises(turnback.StoreError):  # a new opening goes there (and finds no server)
            kept.engine()
    finally:
        kept.close()


def test_keys_replaced_in_the_database_make_the_store_opened_again(home: Path) -> None:
    kept = opener(home)
    try:
        first = kept.engine()
        kept.give_back(first)
        assert first.store.is_current()
        conn = sqlite3.connect(home / "turnback.db")
        conn.execute("UPDATE meta SET value=? WHERE key='key_check'", (b"sealed with other keys",))
        conn.commit()
        conn.close()
        assert not first.store.is_current()
        with pytest.raises(turnback.TurnbackError):  # the key given no longer opens it: as a new opening says
            kept.engine()
    finally:
        kept.close()

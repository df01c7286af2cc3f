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

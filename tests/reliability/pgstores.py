"""The reliability suite's stores in PostgreSQL (``TURNBACK_TEST_BACKEND=postgresql``, ``make test-postgres``).

A scenario's store folder then names a database of its own (``store.url`` in its config.toml), made when the
scenario first opens it (:func:`give_database`). A crash loop puts the scenario back before each crash point:
the folder as a copy of the pristine one, and the database as a copy of the pristine database (``CREATE
DATABASE … TEMPLATE``), the one dropped before it (:func:`copy_database`). With SQLite, the file is in the
folder: each is a no-op.
"""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

from tests.pgserver import PgServer

SERVER: PgServer | None = None  # the test process's server, set by conftest.py when the backend is PostgreSQL
SKIP_SQLITE_FILE = "tests what SQLite's own file does (damage, read-only, its sync order): no such file here"
_numbers = itertools.count()


def _database_name(home: Path) -> str:
    return f"rel_{hashlib.sha256(str(home).encode()).hexdigest()[:12]}_{next(_numbers)}"


def database_of(home: Path) -> str | None:
    """The name of the database *home* names; None for a store in its own SQLite file."""
    config = home / "config.toml"
    if SERVER is None or not config.exists():
        return None
    return config.read_text().split('url = "', 1)[1].split('"', 1)[0].rsplit("/", 1)[1]


def _name_in(home: Path, name: str) -> None:
    assert SERVER is not None
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[store]\nurl = "{SERVER.database_url(name)}"\n')


def give_database(home: Path) -> None:
    """A store folder about to be made names a new database of its own (PostgreSQL only)."""
    if SERVER is None or (home / "config.toml").exists():
        return
    name = _database_name(home)
    SERVER.sql(f"CREATE DATABASE {name}")
    _name_in(home, name)


def copy_database(pristine: Path, home: Path, used: str | None) -> None:
    """*home* (a copy of the folder *pristine*) names a copy of *pristine*'s database; *used*, the database of a
    crash point that is over, is dropped first (PostgreSQL only)."""
    source = database_of(pristine)
    if SERVER is None or source is None:
        return
    if used is not None and used != source:
        SERVER.sql(f"DROP DATABASE IF EXISTS {used} WITH (FORCE)")
    name = _database_name(home)
    SERVER.sql(f"CREATE DATABASE {name} TEMPLATE {source}")
    _name_in(home, name)


__all__ = ["SERVER", "SKIP_SQLITE_FILE", "copy_database", "database_of", "give_database"]

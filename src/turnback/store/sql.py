"""What the query classes ask of a database connection, whichever server holds it (SQLite, PostgreSQL).

The queries in ``store/sqlite/`` are written in the SQL both speak (``?``
placeholders, ``ON CONFLICT DO NOTHING``, ``IS NOT DISTINCT FROM``,
``RETURNING``), so one set of queries serves both backends; what only one
of them has (its integrity check, its free pages, its log) each backend
answers on its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, Protocol

from turnback.catalog import Message
from turnback.errors import SchemaTooNewError

Params = Sequence[Any] | dict[str, Any]


class SqlCursor(Protocol):
    @property
    def rowcount(self) -> int: ...


class SqlDatabase(Protocol):
    def execute(self, sql: str, params: Params = ()) -> SqlCursor: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def one(self, sql: str, params: Params = ()) -> Any:
        """The first row (its columns by name), or None."""

    def all(self, sql: str, params: Params = ()) -> list[Any]:
        """Every row, each its columns by name."""

    def transaction(
        self, *, durable: bool = True, project: str | None = None
    ) -> contextlib.AbstractContextManager[None]: ...

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction of this connection is open (a new ``transaction`` would join it)."""

    def truncate_log(self) -> None: ...

    def close(self) -> None: ...


def migrate_schema(db: SqlDatabase, found: int, migrations: list[list[str]], where: str) -> None:
    """Bring a schema at version *found* up to the last of *migrations* (inside a transaction), recording each
    step in ``meta``; one newer than the code (written by a newer turnback at *where*) is refused."""
    if found > len(migrations):
        raise SchemaTooNewError(Message("schema_too_new", path=where, version=found, known=len(migrations)))
    for number in range(found, len(migrations)):
        for statement in migrations[number]:
            db.execute(statement)
        db.execute(
            "INSERT INTO meta(key, value) VALUES('schema_version', ?) "
            "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (str(number + 1).encode(),),
        )


__all__ = ["Params", "SqlCursor", "SqlDatabase", "migrate_schema"]

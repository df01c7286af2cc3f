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

    def transaction(self, *, durable: bool = True) -> contextlib.AbstractContextManager[None]: ...

    def truncate_log(self) -> None: ...

    def close(self) -> None: ...


__all__ = ["Params", "SqlCursor", "SqlDatabase"]

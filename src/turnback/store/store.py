"""The store: one encrypted SQLite database per user, with its blobs, key and trash.

:class:`Store` is the SQLite backend of :class:`turnback.store.api.StoreBackend`,
composed of one query class per kind of record (``store/sqlite/``). It seals
every path, message, title, input and link target it keeps; nothing here
decides what an undo does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnback.store.records import CachedSnapshot
from turnback.store.sqlite.activity import ActivityQueries
from turnback.store.sqlite.calls import CallQueries
from turnback.store.sqlite.maintenance import MaintenanceQueries
from turnback.store.sqlite.notices import NoticeQueries
from turnback.store.sqlite.opening import DB_NAME, StoreOpening
from turnback.store.sqlite.operations import OperationQueries, state_from_json, state_to_json
from turnback.store.sqlite.sessions import ProjectQueries, SessionQueries
from turnback.store.sqlite.snapshots import SnapshotQueries
from turnback.store.sqlite.turns import TurnQueries


class Store(
    StoreOpening,
    ActivityQueries,
    ProjectQueries,
    TurnQueries,
    CallQueries,
    SessionQueries,
    OperationQueries,
    SnapshotQueries,
    NoticeQueries,
    MaintenanceQueries,
):
    """An open store. Use :meth:`open`; close with :meth:`close` or ``with``."""


if TYPE_CHECKING:  # mypy checks here that the SQLite store has everything the interface asks
    from turnback.store.api import StoreBackend

    _SQLITE_IS_A_BACKEND: type[StoreBackend] = Store

__all__ = ["DB_NAME", "CachedSnapshot", "Store", "state_from_json", "state_to_json"]

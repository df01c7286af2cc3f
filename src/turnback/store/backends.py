"""Which backend holds a store: the SQLite file in the store folder, or a PostgreSQL database named by URL.

The PostgreSQL backend (the ``postgres`` extra) is imported only when a URL
names it, so a hook or a command on a local store never loads psycopg.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from turnback.catalog import Message
from turnback.errors import StoreError, UsageError
from turnback.model import IdSource
from turnback.paths import is_database_url, shown_location
from turnback.store.api import StoreBackend
from turnback.store.hosts import local_host


def open_store(
    home: str,
    *,
    url: str | None = None,
    key_secret: str | None = None,
    try_keyring: bool = True,
    clock: Callable[[], int] = time.time_ns,
    ids: IdSource | None = None,
    host_id: str | None = None,
    host_lease_s: float | None = None,
) -> StoreBackend:
    """The store in *home* (SQLite), or in the database at *url* with *home* as this host's folder (trash, locks,
    log); *host_id* stands for this machine's id (``TURNBACK_HOST_ID``), *host_lease_s* for the length of its
    lease (``TURNBACK_HOST_LEASE_S``)."""
    if url is None:
        from turnback.store.store import Store

        return Store.open(home, key_secret=key_secret, try_keyring=try_keyring, clock=clock, ids=ids)
    if not is_database_url(url):
        raise UsageError(Message("pg_store_url_unknown", url=shown_location(url)))
    try:
        from turnback.store.postgres.store import PgStore
    except ImportError as exc:
        raise StoreError(Message("pg_extra_missing", reason=str(exc))) from exc
    return PgStore.open(
        url,
        home,
        key_secret=key_secret,
        try_keyring=try_keyring,
        clock=clock,
        ids=ids,
        host=local_host(host_id, host_lease_s),
    )


__all__ = ["open_store"]

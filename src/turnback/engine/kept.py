"""A store kept open across the requests of a long-lived process (the hook relay's, the MCP server's, the web
server's), each request served by an engine of its own over it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from turnback.store.api import StoreBackend

from .facade import Engine


class KeptStore:
    """The store that *open_engine* opens, opened once for many requests.

    Each request gets an :class:`Engine` of its own over it (the settings read afresh, nothing held over from
    the request before). The store is opened again only when it is no longer what opening it would give
    (:meth:`StoreBackend.is_current`: its database deleted or made again in its place, its keys replaced, the
    folder made read-only, the schema migrated by a newer turnback, the space set aside used), or when the
    folder's config.toml comes to name a database (``store.url``). A shared store (PostgreSQL) is not kept: each
    request opens its own, as before.
    Opening a store is some 1 ms of each request. *confined*: the engines over the kept store are, as
    *open_engine*'s own (the MCP server's file tools refuse paths outside the project whatever the mode).
    """

    def __init__(self, open_engine: Callable[[], Engine], *, confined: bool = False):
        self._open_engine = open_engine
        self._confined = confined
        self._store: StoreBackend | None = None
        self._retired: list[StoreBackend] = []

    def engine(self) -> Engine:
        """An engine for one request; hand it back with :meth:`give_back`."""
        if self._store is not None and self._still_this_store(self._store):
            return Engine(self._store, confined=self._confined)
        if self._store is not None:
            # Left open, idle, until this closes (as the relay always held one): SQLite's last connection to a
            # database writes its log into the file as it closes, and deletes the log by name, where the file
            # may now be emptied (a new opening must find it so) or the name another database's.
            self._retired.append(self._store)
            self._store = None
        engine = self._open_engine()
        if engine.store.database_url is None:  # the folder's own SQLite file (a shared store is not kept)
            self._store = engine.store
        return engine

    @contextlib.contextmanager
    def lent(self) -> Iterator[Engine]:
        """An engine for one request, given back when it is done."""
        engine = self.engine()
        try:
            yield engine
        finally:
            self.give_back(engine)

    def keeps(self, engine: Engine) -> bool:
        """Whether *engine* is over the store kept open (a shared store's is not: :meth:`give_back` closes it)."""
        return engine.store is self._store

    def give_back(self, engine: Engine) -> None:
        """The request is done with *engine*: its store stays open for the next, unless it is not the kept one."""
        if not self.keeps(engine):
            engine.close()

    @staticmethod
    def _still_this_store(store: StoreBackend) -> bool:
        """Whether opening *store*'s folder now would give it: current, and the folder's config.toml names no
        other database (``store.url``: a new opening goes there; ``TURNBACK_STORE`` is the process's own)."""
        from turnback.config import configured_store_url

        return store.is_current() and configured_store_url(store.home) == store.database_url

    def close(self) -> None:
        """Close every store it opened."""
        stores, self._retired, self._store = [*self._retired, self._store], [], None
        for store in stores:
            if store is not None:
                store.close()


__all__ = ["KeptStore"]

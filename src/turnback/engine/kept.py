"""A store kept open across the requests of a long-lived process (the hook relay's), each request served by an
engine of its own over it."""

from __future__ import annotations

from collections.abc import Callable

from turnback.store.api import StoreBackend

from .facade import Engine


class KeptStore:
    """The store that *open_engine* opens, opened once for many requests.

    Each request gets an :class:`Engine` of its own over it (the settings read afresh, nothing held over from
    the request before). The store is opened again only when it is no longer what opening it would give
    (:meth:`StoreBackend.is_current`: its database deleted or made again in its place, the folder made
    read-only, the schema migrated by a newer turnback, the space set aside used; a shared store, each time).
    Opening a store is some 1 ms of each request: most of what the relay does for a ``turn begin``.
    """

    def __init__(self, open_engine: Callable[[], Engine]):
        self._open_engine = open_engine
        self._store: StoreBackend | None = None

    def engine(self) -> Engine:
        """An engine for one request; hand it back with :meth:`give_back`."""
        if self._store is not None and self._store.is_current():
            return Engine(self._store)
        self.close()
        engine = self._open_engine()
        self._store = engine.store
        return engine

    def give_back(self, engine: Engine) -> None:
        """The request is done with *engine*: its store is kept open for the next while it is current."""
        if engine.store is not self._store:
            engine.close()
        elif not engine.store.is_current():
            self.close()

    def close(self) -> None:
        if self._store is not None:
            store, self._store = self._store, None
            store.close()


__all__ = ["KeptStore"]

"""The SQLite backend: opening a store folder, and the queries of each kind of record, one module each.

:class:`turnback.store.store.Store` is composed of the query classes here.
"""

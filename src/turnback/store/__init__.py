"""The encrypted local store: SQLite records, sealed fields, blobs, keys."""

from turnback.store.store import Store, state_from_json, state_to_json

__all__ = ["Store", "state_from_json", "state_to_json"]

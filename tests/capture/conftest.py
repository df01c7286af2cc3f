"""What the capture tests share: a process with no thread but its own, as a scan split over forked processes needs."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture(autouse=True)
def no_pool_threads() -> None:
    """End the PostgreSQL connection pools an earlier test in this process left (the store contract opens many
    stores on one database): their threads would keep every scan in one process (``scan_processes``)."""
    database = sys.modules.get("turnback.store.postgres.database")
    if database is not None:
        database.close_pools()

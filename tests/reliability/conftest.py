"""Fixtures of the reliability suite."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import TEST_BACKEND
from tests.reliability import pgstores

RAM_FOLDER = "/dev/shm"


@pytest.fixture
def fast_tmp(tmp_path: Path) -> Iterator[Path]:
    """A temp folder in RAM (``/dev/shm``) when there is one, else ``tmp_path``; removed after the test.

    The crash loops kill and resume a few hundred operations; every step
    fsyncs, and on a RAM file system an fsync costs nothing. What they check
    (what a killed process left, what the next one does with it) does not
    depend on the disk: the kernel keeps every completed write across a
    SIGKILL either way. The order of fsyncs is checked separately
    (``test_durable_order.py``), on the real disk.
    """
    if os.path.isdir(RAM_FOLDER) and os.access(RAM_FOLDER, os.W_OK):
        folder = Path(tempfile.mkdtemp(prefix="turnback-reliability-", dir=RAM_FOLDER))
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    else:
        yield tmp_path


@pytest.fixture(autouse=True, scope="session")
def pg_stores(request: pytest.FixtureRequest) -> None:
    """With ``TURNBACK_TEST_BACKEND=postgresql``, the scenarios' stores are databases on the test server."""
    if TEST_BACKEND == "postgresql":
        pgstores.SERVER = request.getfixturevalue("pg_server")


SQLITE_FILE_MODULES = ("test_store_damage", "test_store_damage_random", "test_store_read_only", "test_durable_order")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """On PostgreSQL, the tests of SQLite's own file are skipped, saying why (the rest run on the server)."""
    if TEST_BACKEND != "postgresql":
        return
    for item in items:
        if item.module is not None and item.module.__name__.rsplit(".", 1)[-1] in SQLITE_FILE_MODULES:
            item.add_marker(pytest.mark.skip(reason=pgstores.SKIP_SQLITE_FILE))

"""Fixtures of the reliability suite."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

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

"""npm packages the tests drive (Claude Code, the reference MCP filesystem server), installed once per pinned
version into a cache folder outside the repository, under a file lock so parallel workers install once;
skipped with the reason printed when npm or its registry cannot be had."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")
UNREACHABLE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET", "ENETUNREACH", "network")


def cache_dir(name: str) -> Path:
    """``~/.cache/turnback-tests/NAME`` (``TURNBACK_TEST_CACHE`` moves the base)."""
    base = os.environ.get("TURNBACK_TEST_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "turnback-tests")
    return Path(base) / name


def npm_install(
    package: str, version: str, folder: Path, ready: Callable[[Path], T | None], env: dict[str, str] | None = None
) -> T:
    """What *ready* finds in *folder* once ``package@version`` is installed there (it is installed first when
    *ready* finds nothing); skips when npm is missing or its registry unreachable, fails when the install
    gives nothing *ready* accepts."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = ready(folder)
        if found is not None:
            return found
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip(f"npm is not installed (CI installs Debian's nodejs and npm): cannot install {package}")
        done = subprocess.run(
            [npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund", f"{package}@{version}"],
            capture_output=True,
            timeout=600,
            env={**os.environ, "npm_config_update_notifier": "false", **(env or {})},
        )
        said = (done.stdout + done.stderr).decode("utf-8", "replace")
        if done.returncode != 0 and any(word in said for word in UNREACHABLE):
            pytest.skip(f"the npm registry is unreachable, so {package} cannot be installed: {said[-400:]}")
        found = ready(folder)
        if found is None:
            pytest.fail(f"npm install {package}@{version} gave nothing that runs (rc {done.returncode}):\n{said}")
        return found

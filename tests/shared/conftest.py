"""A store in PostgreSQL shared by hosts: each test gets a schema of its own on the test server, and hosts played
by ``TURNBACK_HOST_ID`` (each with its own store folder, as two machines would have)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result, run_cli
from tests.pgserver import PgServer

Host = Callable[..., Result]


@pytest.fixture
def store_url(pg_server: PgServer, tmp_path: Path) -> str:
    return pg_server.url(pg_server.schema_for(tmp_path))


@pytest.fixture
def host(store_url: str, tmp_path: Path, project: Path) -> Callable[..., Host]:
    """``host("a")("log")`` runs the CLI as host "a" (its own store folder) in the project, on the shared store;
    ``host("a", {"NAME": "VALUE"})`` with more settings of its own."""

    def on(name: str, settings: dict[str, str] | None = None) -> Host:
        """*settings*: more of host *name*'s environment, for each of its commands."""
        home = tmp_path / f"home-{name}"

        def run(*args: str, stdin: bytes = b"", cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
            extra = {"TURNBACK_STORE": store_url, "TURNBACK_HOST_ID": f"host-{name}", **(settings or {}), **(env or {})}
            return run_cli(home, *args, cwd=cwd or project, stdin=stdin, env=extra)

        return run

    return on

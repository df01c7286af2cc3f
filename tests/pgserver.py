"""A throwaway PostgreSQL server for the tests: a cluster in a temp folder on 127.0.0.1, a random port.

Started once per test process (``pg_server``, session-scoped) from the server programs Debian's
``postgresql`` package installs (``.ci/run`` installs it when missing); as root, the cluster runs as an
unprivileged user (initdb refuses root). Skipped with the reason printed where no server can be started.
Each store a test opens gets a schema of its own in the one database (``PgServer.url``).
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import second_user

DATABASE = "turnback"
SUPERUSER = "turnback"
CLUSTER_USER = "turnback-pg"  # the unprivileged user the cluster runs as when the tests run as root


def server_bin() -> Path | None:
    """The folder of the newest installed server's programs (initdb, pg_ctl, pg_dump)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass(frozen=True)
class PgServer:
    bin: Path
    port: int
    folder: Path
    prefix: tuple[str, ...]  # how to run a server program as the cluster's user

    def url(self, schema: str | None = None) -> str:
        """The test database; with *schema*, a store's own schema in it (made on first use)."""
        base = f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{DATABASE}"
        return base if schema is None else f"{base}?options=-csearch_path%3D{schema}"

    def database_url(self, name: str) -> str:
        """A database of its own on the server (made with :meth:`sql`)."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{name}"

    def sql(self, statement: str) -> None:
        """Run *statement* in the test database, outside a transaction (``CREATE DATABASE`` needs that)."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(statement)

    def schema_for(self, home: Path) -> str:
        """The schema that holds the store of the folder *home*, made if new."""
        import psycopg

        schema = "store_" + hashlib.sha256(str(home).encode()).hexdigest()[:16]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        return schema

    def dump(self, schema: str) -> bytes:
        """Everything the server keeps in *schema*, as ``pg_dump`` writes it."""
        done = subprocess.run(
            [str(self.bin / "pg_dump"), "--schema", schema, self.url()], capture_output=True, check=True
        )
        return done.stdout

    def ctl(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [*self.prefix, str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), *args], capture_output=True
        )

    def restart(self) -> None:
        """Stop the server at once (as a crash would) and start it again."""
        self.ctl("stop", "-m", "immediate")
        self._start()

    def _start(self) -> None:
        options = f"-h 127.0.0.1 -p {self.port} -k {self.folder} -F -c max_connections=200"
        started = self.ctl("start", "-w", "-t", "60", "-l", str(self.folder / "log"), "-o", options)
        if started.returncode != 0:
            log = (self.folder / "log").read_text(errors="replace") if (self.folder / "log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {started.stderr.decode(errors='replace')}{log}")


def start_server() -> PgServer:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed (the postgres extra): pip install -e '.[dev]'")
    bin_dir = server_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server programs (apt-get install postgresql; .ci/run does)")
    prefix: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="turnback-pg-"))
    if os.geteuid() == 0:
        prefix = second_user(CLUSTER_USER)
        shutil.chown(folder, CLUSTER_USER)
    made = subprocess.run(
        [*prefix, str(bin_dir / "initdb"), "-D", str(folder / "data"), "-U", SUPERUSER, "-A", "trust", "--no-sync"],
        capture_output=True,
    )
    if made.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"initdb failed: {made.stderr.decode(errors='replace').strip()}")
    server = PgServer(bin_dir, _free_port(), folder, tuple(prefix))
    server._start()
    subprocess.run(
        [str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(server.port), "-U", SUPERUSER, DATABASE],
        check=True,
        capture_output=True,
    )
    return server


def running_server() -> Iterator[PgServer]:
    """One PostgreSQL server (the ``pg_server`` fixture's), stopped and deleted at the end."""
    server = start_server()
    try:
        yield server
    finally:
        server.ctl("stop", "-m", "immediate")
        shutil.rmtree(server.folder, ignore_errors=True)

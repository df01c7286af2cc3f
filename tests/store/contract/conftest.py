"""The backends the store contract runs against, and the records most contract tests start from.

A backend is a way to open a store in a folder and a way to read every byte it keeps (to check that
nothing is plain). Adding one (PostgreSQL, issue 17) is one line in ``BACKENDS``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import TEST_KEY
from tests.pgserver import PgServer
from turnback.model import FileState, Project, Session, Turn
from turnback.store.api import StoreBackend
from turnback.store.postgres.store import PgStore
from turnback.store.store import DB_NAME, Store


@dataclass(frozen=True)
class Backend:
    open: Callable[[Path], StoreBackend]  # open the store kept in this folder, creating it on first use
    kept_bytes: Callable[[Path], bytes]  # every byte the backend keeps for the store in this folder


def _open_sqlite(home: Path) -> StoreBackend:
    return Store.open(str(home), key_secret=TEST_KEY, try_keyring=False)


def _sqlite_bytes(home: Path) -> bytes:
    """The database file and its write-ahead log (a commit may sit there until a checkpoint)."""
    return b"".join(path.read_bytes() for path in sorted(home.glob(DB_NAME + "*")) if path.is_file())


def _postgres(server: PgServer) -> Backend:
    """A store per folder, each in a schema of its own on the test server; its bytes as ``pg_dump`` writes them."""

    def open_store(home: Path) -> StoreBackend:
        url = server.url(server.schema_for(home))
        return PgStore.open(url, str(home), key_secret=TEST_KEY, try_keyring=False)

    return Backend(open_store, lambda home: server.dump(server.schema_for(home)))


# Each backend, made from the test's fixtures (a server backend asks for its server).
BACKENDS: dict[str, Callable[[pytest.FixtureRequest], Backend]] = {
    "sqlite": lambda request: Backend(_open_sqlite, _sqlite_bytes),
    "postgresql": lambda request: _postgres(request.getfixturevalue("pg_server")),
}


@pytest.fixture(params=sorted(BACKENDS))
def backend_kind(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param](request)


@pytest.fixture
def backend(backend_kind: Backend, home: Path) -> Iterator[StoreBackend]:
    """An open store of each backend."""
    with backend_kind.open(home) as store:
        yield store


@pytest.fixture
def reopen(backend_kind: Backend, home: Path) -> Iterator[Callable[[], StoreBackend]]:
    """Open the same store again (as another process would); each is closed after the test."""
    opened: list[StoreBackend] = []

    def open_again() -> StoreBackend:
        opened.append(backend_kind.open(home))
        return opened[-1]

    yield open_again
    for store in opened:
        store.close()


@pytest.fixture
def project(backend: StoreBackend, tmp_path: Path) -> Project:
    root = tmp_path / "project"
    root.mkdir()
    return backend.register_project(str(root)).project


@pytest.fixture
def session(backend: StoreBackend, project: Project) -> Session:
    return backend.create_session(project.id, actor="agent", title="fix the parser", incognito=False)


@pytest.fixture
def turn(backend: StoreBackend, session: Session) -> Turn:
    return backend.create_turn(session.id, "make it faster", holder_pid=None, holder_start=None)


def file_state(backend: StoreBackend, content: bytes, mode: int = 0o644) -> FileState:
    """A file's state whose content the store keeps."""
    return FileState("file", backend.blobs.put_bytes(content), len(content), mode)

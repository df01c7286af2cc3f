"""The PostgreSQL store from the command line: where it is chosen, what the server sees, a wrong key, a newer
schema, a server restarted mid-turn and an undo killed mid-way, and two hosts applying to one session at once."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.conftest import ROOT, TEST_KEY, cli_env, run_cli
from tests.pgserver import PgServer
from tests.shared.conftest import Host
from turnback.errors import BusyError, StoreError
from turnback.model import SessionId
from turnback.ops.busy import session_apply_lock
from turnback.store.hosts import LocalHost
from turnback.store.postgres.schema import MIGRATIONS as PG_MIGRATIONS
from turnback.store.postgres.store import PgStore
from turnback.store.schema import MIGRATIONS as SQLITE_MIGRATIONS

SECRETS = {
    "title": "title-of-the-session-5e1f",
    "message": "message-of-the-turn-77ab",
    "path": "secret-file-name-90cd.txt",
    "content": "content-of-the-file-3b3b",
    "root": "project-folder-c0c0",
}


def _tables(conn: psycopg.Connection[tuple[object, ...]]) -> dict[str, set[str]]:
    rows = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
    ).fetchall()
    tables: dict[str, set[str]] = {}
    for table, column in rows:
        tables.setdefault(str(table), set()).add(str(column))
    return tables


def test_the_schema_has_every_table_and_column_sqlite_has(store_url: str, tmp_path: Path) -> None:
    import sqlite3

    PgStore.open(store_url, str(tmp_path / "home"), key_secret=TEST_KEY, try_keyring=False).close()
    sqlite = sqlite3.connect(":memory:")
    for statements in SQLITE_MIGRATIONS:
        for statement in statements:
            sqlite.execute(statement)
    expected = {
        name: {row[1] for row in sqlite.execute(f"PRAGMA table_info({name})")}
        for (name,) in sqlite.execute("SELECT name FROM sqlite_master WHERE type='table'")
    }
    with psycopg.connect(store_url) as conn:
        found = _tables(conn)
    missing = {name: sorted(columns - found.get(name, set())) for name, columns in expected.items()}
    assert {name: columns for name, columns in missing.items() if columns} == {}


def test_the_server_sees_no_path_content_message_or_title(pg_server: PgServer, tmp_path: Path, store_url: str) -> None:
    project = tmp_path / SECRETS["root"]
    project.mkdir()
    (project / SECRETS["path"]).write_text(SECRETS["content"] * 20)
    env = {"TURNBACK_STORE": store_url}
    home = tmp_path / "home"
    assert run_cli(home, "init", cwd=project, env=env).rc == 0
    session = run_cli(home, "session", "new", "--title", SECRETS["title"], cwd=project, env=env).out.strip()
    assert (
        run_cli(home, "turn", "begin", "--session", session, "--message", SECRETS["message"], cwd=project, env=env).rc
        == 0
    )
    edited = run_cli(
        home,
        "edit",
        "--session",
        session,
        SECRETS["path"],
        "--old",
        SECRETS["content"],
        "--new",
        "x",
        "--all",
        cwd=project,
        env=env,
    )
    assert edited.rc == 0, edited.err
    assert run_cli(home, "turn", "end", "--session", session, cwd=project, env=env).rc == 0
    assert SECRETS["title"] in run_cli(home, "sessions", cwd=project, env=env).out  # it is all there, and reads back
    dump = pg_server.dump(store_url.rsplit("%3D", 1)[1])
    assert b"CREATE TABLE" in dump and b"COPY" in dump
    assert [name for name, value in SECRETS.items() if value.encode() in dump] == []
    assert not (home / "turnback.db").exists()  # the records are on the server, not in the folder


def test_a_host_with_another_key_is_refused(host: object, store_url: str, tmp_path: Path, project: Path) -> None:
    env = {"TURNBACK_STORE": store_url}
    assert run_cli(tmp_path / "a", "init", cwd=project, env=env).rc == 0
    other = run_cli(tmp_path / "b", "sessions", cwd=project, env={**env, "TURNBACK_KEY": "another-key-0123456789-xyz"})
    assert other.rc == 1
    assert other.err.strip() == (
        "turnback: the key does not open this store (a wrong TURNBACK_KEY or key file?); nothing was read"
    )


def test_a_database_of_a_newer_schema_is_refused(store_url: str, tmp_path: Path, project: Path) -> None:
    env = {"TURNBACK_STORE": store_url}
    assert run_cli(tmp_path / "a", "init", cwd=project, env=env).rc == 0
    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = '99'::bytea WHERE key = 'schema_version'")
    refused = run_cli(tmp_path / "a", "sessions", cwd=project, env=env)
    shown = store_url  # a URL without a password is shown as it is
    assert (refused.rc, refused.err.strip()) == (
        1,
        f"turnback: the store at {shown} has schema 99; this turnback knows up to {len(PG_MIGRATIONS)}."
        " Upgrade turnback.",
    )


def test_where_the_store_is_chosen(store_url: str, tmp_path: Path, project: Path) -> None:
    home = tmp_path / "home"
    local = run_cli(home, "init", cwd=project, env={"TURNBACK_STORE": str(tmp_path / "not-a-database")})
    assert local.rc == 0 and (home / "turnback.db").is_file()  # anything but a URL: the folder's SQLite file
    other_home = tmp_path / "other"
    assert run_cli(other_home, "--store", store_url, "init", cwd=project).rc == 0
    assert not (other_home / "turnback.db").exists()
    config_home = tmp_path / "configured"
    assert run_cli(config_home, "config", "set", "store.url", store_url, cwd=project).rc == 0
    listed = run_cli(config_home, "sessions", "--json", cwd=project).json()
    assert listed["sessions"] == []
    with psycopg.connect(store_url) as conn:
        assert conn.execute("SELECT count(*) FROM projects").fetchone() == (1,)  # the one --store registered
    bad = run_cli(config_home, "config", "set", "store.url", "mysql://db", cwd=project)
    assert (bad.rc, bad.err.strip()) == (
        2,
        "turnback: store.url must be a PostgreSQL database URL (postgresql://user@host:5432/db)",
    )


def test_an_unreachable_server_is_named(tmp_path: Path, project: Path) -> None:
    url = "postgresql://nobody:hunter2@127.0.0.1:1/none"
    failed = run_cli(tmp_path / "home", "sessions", cwd=project, env={"TURNBACK_STORE": url})
    assert failed.rc == 1
    assert failed.err.startswith("turnback: cannot reach the store's database at postgresql://nobody@127.0.0.1:1/none:")
    assert "hunter2" not in failed.err


def test_a_server_restarted_mid_turn_and_mid_undo(host, pg_server: PgServer, project: Path) -> None:  # type: ignore[no-untyped-def]
    a: Host = host("a")
    assert a("init").rc == 0
    session = a("session", "new").out.strip()
    assert a("turn", "begin", "--session", session).rc == 0
    assert a("write", "--session", session, "one.txt", stdin=b"one\n").rc == 0
    pg_server.restart()
    assert a("write", "--session", session, "two.txt", stdin=b"two\n").rc == 0  # the turn goes on
    assert a("turn", "end", "--session", session).rc == 0
    killed = a("undo", "--yes", "--session", session, env={"TURNBACK_FAULT_KILL_AFTER": "2"})
    assert killed.rc == -signal.SIGKILL
    pg_server.restart()
    status = a("status", "--session", session)
    assert "turnback undo --yes finishes it" in status.out, status.out
    resumed = a("undo", "--yes", "--session", session, "--json")
    assert resumed.rc == 0, resumed.err
    assert resumed.json()["resumed"] is True
    assert not (project / "one.txt").exists() and not (project / "two.txt").exists()


def test_two_hosts_applying_to_one_session_exactly_one_applies(store_url: str, tmp_path: Path) -> None:
    stores = [
        PgStore.open(
            store_url, str(tmp_path / name), key_secret=TEST_KEY, try_keyring=False, host=LocalHost(name, name)
        )
        for name in ("a", "b")
    ]
    try:
        root = tmp_path / "project"
        root.mkdir()
        project = stores[0].register_project(str(root)).project
        session = stores[0].create_session(project.id, actor=None, title=None, incognito=False).id
        with session_apply_lock(stores[0], SessionId(session)):  # host a applies; its lock file is on host a
            with pytest.raises(BusyError) as refused, session_apply_lock(stores[1], SessionId(session)):
                pass
            assert str(refused.value) == "an undo is being applied in this session; wait for it to finish"
        with session_apply_lock(stores[1], SessionId(session)):  # once a is done, b may
            pass
    finally:
        for store in stores:
            store.close()


def test_a_hook_process_never_loads_psycopg() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, turnback.hooks.relay, turnback.cli; print('psycopg' in sys.modules)"],
        capture_output=True,
        text=True,
        env=cli_env(ROOT),
        check=True,
    )
    assert loaded.stdout.strip() == "False"


def test_a_dropped_connection_during_a_write_leaves_nothing_half_written(store_url: str, tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    with PgStore.open(store_url, str(tmp_path / "home"), key_secret=TEST_KEY, try_keyring=False) as store:
        project = store.register_project(str(root)).project
        session = store.create_session(project.id, actor=None, title=None, incognito=False)
        backend = store.pg.one("SELECT pg_backend_pid() AS pid")
        with pytest.raises(StoreError), store.transaction():
            store.create_turn(session.id, "one", holder_pid=None, holder_start=None)
            with psycopg.connect(store_url, autocommit=True) as admin:  # the server drops this store's connection
                admin.execute("SELECT pg_terminate_backend(%s)", (backend["pid"],) if backend else ())
            store.add_busy_mark(session.id, "two", None, None)
        assert store.turns(session.id) == []  # connected again; nothing of the cut transaction was kept
        assert store.create_turn(session.id, "again", holder_pid=None, holder_start=None).number == 1


def test_two_projects_records_commit_side_by_side_and_one_projects_in_turn(store_url: str, tmp_path: Path) -> None:
    """A file tool's records take their project's lock (and the write lock shared): another project's commit
    while one is open; the same project's, and a write that may touch anything (gc, an undo's plan), wait."""
    import threading

    stores = [
        PgStore.open(store_url, str(tmp_path / f"home-{n}"), key_secret=TEST_KEY, try_keyring=False) for n in range(4)
    ]
    holder, other, same, whole = stores

    def writer(store: PgStore, project: str | None) -> threading.Thread:
        def write() -> None:
            with store.transaction(project=project):
                store.db.execute("INSERT INTO meta(key, value) VALUES(?, ?)", (f"test-{id(store)}", b"written"))

        thread = threading.Thread(target=write, daemon=True)
        thread.start()
        return thread

    try:
        with holder.transaction(project="project-1"):
            beside = writer(other, "project-2")
            beside.join(timeout=20)
            assert not beside.is_alive(), "another project's write waited for this one"
            in_turn, everything = writer(same, "project-1"), writer(whole, None)
            in_turn.join(timeout=1)
            everything.join(timeout=0.1)
            assert in_turn.is_alive() and everything.is_alive(), "a write of the same project, or of any, went first"
        for thread in (in_turn, everything):
            thread.join(timeout=20)
            assert not thread.is_alive()
        with psycopg.connect(store_url) as conn:
            written = conn.execute("SELECT count(*) FROM meta WHERE key LIKE 'test-%'").fetchone()
        assert written == (3,)
    finally:
        for store in stores:
            store.close()

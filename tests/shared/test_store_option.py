"""``turnback --store postgresql://…`` reaches every front end that opens the store itself: the MCP server (and the
engine it opens for each command), ``turnback serve`` and a hook event; with no ``TURNBACK_STORE`` set, so that
nothing but the option names the database. The folder's own SQLite store stays empty."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_env, run_cli
from tests.web.serving import serve

mcp = pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters  # noqa: E402

from tests.integrations.test_mcp import drive, ok  # noqa: E402

APP = "turnback-front-end-under-test"  # PGAPPNAME of the server a test starts: its connections, no one else's


def connections(store_url: str) -> int:
    """The connections the server a test started holds open (libpq names them with ``PGAPPNAME``)."""
    import psycopg

    with psycopg.connect(store_url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (APP,)).fetchone()
    assert row is not None
    return int(row[0])


def _titles(home: Path, *store: str) -> list[str]:
    listed = run_cli(home, *store, "sessions", "--json")
    assert listed.rc == 0, listed.err
    return [str(item["title"]) for item in listed.json()["sessions"]]  # type: ignore[index]


def test_mcp_records_into_the_database_store_names(home: Path, project: Path, store_url: str, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "turnback", "--store", store_url, "mcp", "--root", str(project), "--title", "over mcp"],
        env=cli_env(home, {"PGAPPNAME": APP}),
        cwd=str(project),
    )

    async def body(session: ClientSession) -> None:
        await ok(session, "write_file", path="notes.txt", content="one\n")
        await ok(session, "run_command", command="echo two >> notes.txt")  # an engine of its own, same store
        for number in range(10):  # a shared store is opened for each call, and closed after it
            await ok(session, "read_text_file", path="notes.txt")
            await ok(session, "write_file", path=f"scratch-{number}.txt", content="x\n")
            await ok(session, "delete_file", path=f"scratch-{number}.txt")
        assert 1 <= connections(store_url) <= 2  # the lease's own, and none left open by the calls

    drive(params, tmp_path / "server.err", body)
    assert (project / "notes.txt").read_bytes() == b"one\ntwo\n"
    assert _titles(home, "--store", store_url) == ["over mcp"]
    assert _titles(home) == []  # nothing went to the folder's SQLite file
    undone = run_cli(home, "--store", store_url, "undo", "--yes", cwd=project)
    assert undone.rc == 0, undone.err
    assert not (project / "notes.txt").exists()


def test_serve_shows_the_database_store_names(home: Path, project: Path, store_url: str) -> None:
    assert run_cli(home, "--store", store_url, "session", "new", "--title", "shared work", cwd=project).rc == 0
    served = serve(home, "--store", store_url, env={"PGAPPNAME": APP})
    try:
        for _ in range(10):  # a shared store is opened for each request, and closed after it
            reply = served.get("/api/v1/sessions")
            assert reply.status == 200, reply.body
            assert [item["title"] for item in reply.json()["sessions"]] == ["shared work"]
        assert 1 <= connections(store_url) <= 2
    finally:
        served.stop()


def test_a_hook_event_goes_to_the_database_store_names(home: Path, project: Path, store_url: str) -> None:
    event = {
        "session_id": "claude-session-1",
        "transcript_path": str(project.parent / "transcript.jsonl"),
        "cwd": str(project),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "tidy the readme",
    }
    handled = run_cli(home, "--store", store_url, "hook", "claude-code", stdin=json.dumps(event).encode(), cwd=project)
    assert (handled.rc, handled.err) == (0, "")
    assert _titles(home, "--store", store_url) == ["Claude Code"]
    assert _titles(home) == []


def test_a_hook_for_the_database_is_not_served_by_a_relay_of_the_folders_file(
    home: Path, project: Path, store_url: str
) -> None:
    from tests.integrations.test_claude_code import Claude, log_json
    from tests.integrations.test_hook_relay import stop_relay, wait_for_relay

    try:
        Claude(home, project).prompt("into the folder's file")
        wait_for_relay(home)  # a relay of the folder's SQLite store now serves the folder's hooks
        Claude(home, project, session_id="shared-1", env={"TURNBACK_STORE": store_url}).prompt("into the database")
        assert _titles(home, "--store", store_url) == ["Claude Code"]
        assert [turn["message"] for turn in log_json(home, project)["turns"]] == ["into the folder's file"]
    finally:
        stop_relay(home)

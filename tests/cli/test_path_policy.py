"""One path policy for every front end: what the MCP server refused or did on its own, the CLI does too."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import turnback
from tests.conftest import tree_state


def start_turn(cli) -> str:  # type: ignore[no-untyped-def]
    session = str(cli("session", "new").out.strip())
    assert cli("turn", "begin", "--session", session).rc == 0
    return session


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("~/x.txt", "~/x.txt starts with ~, which names no folder here; give a path inside the allowed folder"),
        ("C:\\evil.txt", "C:\\evil.txt is a Windows path; give a path inside the allowed folder"),
        ("file:///etc/evil.txt", "file:///etc/evil.txt is a URL, not a path; give a path inside the allowed folder"),
    ],
)
def test_a_path_that_names_no_place_here_makes_no_folder_in_the_project(
    cli, project: Path, path: str, said: str
) -> None:  # type: ignore[no-untyped-def]
    start = tree_state(project)
    session = start_turn(cli)
    written = cli("write", "--session", session, path, stdin=b"x\n")
    assert (written.rc, written.err) == (2, f"turnback: {said}\n")
    assert tree_state(project) == start


def test_a_folder_moved_with_the_cli_is_taken_back_by_undo(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    start = tree_state(project)
    session = start_turn(cli)
    moved = cli("mv", "--session", session, "docs", "manual")
    assert moved.rc == 0, moved.err
    assert not (project / "docs").exists()
    assert (project / "manual" / "guide.md").read_bytes() == b"no final newline"
    assert cli("turn", "end", "--session", session).rc == 0
    undone = cli("undo", "--yes")
    assert undone.rc == 0, undone.err
    assert tree_state(project) == start


def test_looking_at_a_session_records_nothing_until_asked_to(engine: turnback.Engine, project: Path) -> None:
    session = engine.new_session(str(project))
    holder = subprocess.Popen(["sleep", "60"])
    engine.begin_turn(session.id, "one", holder_pid=holder.pid)
    holder.kill()
    holder.wait()

    def statuses() -> list[str]:
        return [str(row[0]) for row in engine.store.db.all("SELECT status FROM turns ORDER BY number")]

    engine.log(session.id)
    engine.status(session.id)
    assert engine.status(session.id).running == ()  # its holder is gone: it runs no more
    assert statuses() == ["running"]  # but the record is as it was
    assert [turn.number for turn in engine.mark_interrupted(session.id)] == [1]
    assert statuses() == ["interrupted"]

"""The harness and user verbs end to end, through the real CLI as a subprocess."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import tree_state


def test_turn_of_calls_then_undo_restores_the_tree(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    start = tree_state(project)
    assert cli("init").rc == 0
    session = cli("session", "new", "--title", "t").out.strip()
    assert cli("turn", "begin", "--session", session, "--message", "change a.txt and add notes.md").rc == 0
    edit = cli("edit", "--session", session, "README.md", "--old", "line two", "--new", "line 2")
    assert edit.rc == 0, edit.err
    assert "modified README.md +1 -1" in edit.lines
    write = cli("write", "--session", session, "notes/new.md", stdin=b"hello\n")
    assert write.rc == 0, write.err
    end = cli("turn", "end", "--session", session)
    assert end.lines == ["2 files changed, +2 -1 (docs +2 -1)"]

    preview = cli("undo", "--dry-run")
    assert preview.rc == 0
    assert preview.lines[1:] == ["trash       notes/new.md", "trash       notes/", "restore     README.md"]
    applied = cli("undo", "--yes")
    assert applied.rc == 0, applied.err
    assert applied.lines[-1].startswith("undone: 1 file restored, 1 file moved to ")
    assert tree_state(project) == start

"""``turnback store copy``: a store moved from SQLite to PostgreSQL and back, every record and copy kept, so the
moved store still shows and undoes what the first one recorded; a target that is not new is refused."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli, tree_state


def _history(home: Path, project: Path, env: dict[str, str] | None = None) -> list[object]:
    shown = run_cli(home, "log", "--json", cwd=project, env=env)
    assert shown.rc == 0, shown.err
    turns = shown.json()["turns"]
    assert isinstance(turns, list)
    return turns


def test_a_store_moves_to_postgresql_and_back(store_url: str, tmp_path: Path, project: Path) -> None:
    local = tmp_path / "local"
    before = tree_state(project)
    assert run_cli(local, "init", cwd=project).rc == 0
    session = run_cli(local, "session", "new", "--title", "moving", cwd=project).out.strip()
    for number in (1, 2):
        assert run_cli(local, "turn", "begin", "--session", session, "--message", f"turn {number}", cwd=project).rc == 0
        big = bytes(range(256)) * (20_000 * number)  # more than a chunk: a chunk list and its chunks
        assert run_cli(local, "write", "--session", session, f"big{number}.bin", stdin=big, cwd=project).rc == 0
        edited = run_cli(
            local,
            "edit",
            "--session",
            session,
            "README.md",
            "--old",
            "# project",
            "--new",
            f"# project{number}",
            cwd=project,
        )
        assert edited.rc == 0, edited.err
        assert run_cli(local, "turn", "end", "--session", session, cwd=project).rc == 0
    recorded = _history(local, project)

    moved = run_cli(local, "store", "copy", str(local), store_url, cwd=project)
    assert moved.rc == 0, moved.err
    assert moved.out.startswith(f"copied {local} to {store_url} (projects: 1, sessions: 1, copies checked: ")
    shared = {"TURNBACK_STORE": store_url}
    assert _history(local, project, shared) == recorded

    back = tmp_path / "back"
    returned = run_cli(local, "store", "copy", store_url, str(back), cwd=project, env={})
    assert returned.rc == 0, returned.err
    assert _history(back, project) == recorded
    undone = run_cli(back, "undo", "--from", "1", "--yes", "--session", session, cwd=project)
    assert undone.rc == 0, undone.err
    assert tree_state(project) == before  # the twice-moved store undoes both turns, byte for byte
    assert run_cli(back, "verify", cwd=project).rc == 0

    again = run_cli(local, "store", "copy", str(local), store_url, cwd=project)
    assert (again.rc, again.err.strip()) == (
        2,
        "turnback: the target store is not new (it holds a project already); copy into a new folder or an empty"
        " database",
    )

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


def test_a_first_snapshot_kept_in_packs_moves_to_postgresql(store_url: str, tmp_path: Path) -> None:
    """A plain folder's first snapshot, read by workers, keeps its copies in pack files of the local store's
    folder; the shared store has none, so the copy puts them into its rows, and undoes from them."""
    local = tmp_path / "local"
    project = tmp_path / "plain"
    for n in range(300):  # more folders than a split hands out: workers read them
        folder = project / f"d{n:03}"
        folder.mkdir(parents=True)
        (folder / "file.txt").write_bytes(f"file {n}\n".encode() * (n + 1))
    before = tree_state(project)
    assert run_cli(local, "init", cwd=project).rc == 0
    session = run_cli(local, "session", "new", cwd=project).out.strip()
    assert run_cli(local, "turn", "begin", "--session", session, cwd=project).rc == 0
    shell = run_cli(local, "exec", "--session", session, "--", "sh", "-c", "rm -r d0*", cwd=project)
    assert shell.rc == 0, shell.err
    assert run_cli(local, "turn", "end", "--session", session, cwd=project).rc == 0
    assert [pack.suffix for pack in (local / "packs").iterdir()] == [".pack", ".pack"]  # one per worker

    moved = run_cli(local, "store", "copy", str(local), store_url, cwd=project)
    assert moved.rc == 0, moved.err
    shared = {"TURNBACK_STORE": store_url}
    for pack in (local / "packs").iterdir():
        pack.unlink()  # the shared store needs none of the local folder's packs
    undone = run_cli(local, "undo", "--yes", "--session", session, cwd=project, env=shared)
    assert undone.rc == 0, undone.err
    assert tree_state(project) == before
    assert run_cli(local, "verify", cwd=project, env=shared).rc == 0

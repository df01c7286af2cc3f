"""Hostile paths, links, keys and the store's bytes: turnback never reaches outside the project.

Every test uses real folders and a real store, and the real CLI as a
subprocess wherever argv can carry the input (a NUL in a path cannot, and a
swap between plan and apply needs the library's two steps). "Outside"
folders sit beside the project in the test's temp folder, and each test
compares their whole tree before and after.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

import turnback
from tests.conftest import TEST_KEY, Result, cli_env, make_project, run_cli, tree_state

OTHER_KEY = "another-key-9876543210-zyxwvu"


# -- helpers -----------------------------------------------------------------------------------


def start_turn(cli, message: str = "do things") -> str:  # type: ignore[no-untyped-def]
    """``init``, a new session and a running turn (held by this test process); the session id."""
    assert cli("init").rc == 0
    created = cli("session", "new", "--title", "security")
    assert created.rc == 0, created.err
    session = str(created.out.strip())
    begun = cli("turn", "begin", "--session", session, "--message", message)
    assert begun.rc == 0, begun.err
    return session


def end_turn(cli, session: str) -> None:  # type: ignore[no-untyped-def]
    ended = cli("turn", "end", "--session", session)
    assert ended.rc == 0, ended.err


def assert_clean_refusal(result: Result, codes: tuple[int, ...] = (1, 2)) -> None:
    """Refused with an expected exit code and exactly one ``turnback: ...`` line on stderr, no traceback."""
    assert result.rc in codes, (result.rc, result.out, result.err)
    assert "Traceback" not in result.err and "Traceback" not in result.out
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("turnback: "), result.err
    assert len(lines[0]) > len("turnback: ") + 5


def outside_state(
    tmp_path: Path, *, skip: tuple[str, ...] = ("store",)
) -> dict[str, tuple[str, bytes | str | None, int]]:
    """Everything in the test's temp folder except the store (which turnback is allowed to write)."""
    return {rel: state for rel, state in tree_state(tmp_path).items() if rel.split("/", 1)[0] not in skip}


def row_of(data: dict[str, object], path: str) -> dict[str, object]:
    rows = data["rows"]
    assert isinstance(rows, list)
    matching = [row for row in rows if row["path"] == path]
    assert len(matching) == 1, rows
    row = matching[0]
    assert isinstance(row, dict)
    return row


# -- a link in place of a file the agent wrote -------------------------------------------------


@pytest.mark.parametrize("how", ["created", "modified"])
def test_file_replaced_by_link_to_outside_file_is_skipped(cli, project: Path, tmp_path: Path, how: str) -> None:  # type: ignore[no-untyped-def]
    agent_bytes = b"the agent wrote this\n"
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "precious.txt"
    target.write_bytes(agent_bytes)  # the very bytes the agent wrote: following the link would pass the check
    name = "made.txt" if how == "created" else "docs/guide.md"

    session = start_turn(cli)
    assert cli("write", "--session", session, name, stdin=agent_bytes).rc == 0
    assert cli("edit", "--session", session, "README.md", "--old", "line two", "--new", "line 2").rc == 0
    end_turn(cli, session)

    (project / name).unlink()
    (project / name).symlink_to(target)
    outside_before = tree_state(outside)

    preview = cli("undo", "--dry-run")
    assert preview.rc == 0, preview.err
    assert any(line.startswith(f"skip        {name} (") for line in preview.lines), preview.out
    assert "restore     README.md" in preview.lines

    applied = cli("undo", "--yes", "--json")
    assert applied.rc == 0, applied.err
    data = applied.json()
    row = row_of(data, name)
    assert row["action"] == "skip" and row["status"] == "skipped" and row["reason"], row
    assert row_of(data, "README.md")["status"] == "done"

    assert tree_state(outside) == outside_before
    assert target.read_bytes() == agent_bytes
    assert (project / name).is_symlink() and os.readlink(project / name) == str(target)
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"


# -- a link in place of a folder the agent wrote in --------------------------------------------


@pytest.mark.parametrize("how", ["existing-folder", "new-folder"])
def test_parent_folder_replaced_by_link_to_outside_folder(cli, project: Path, tmp_path: Path, how: str) -> None:  # type: ignore[no-untyped-def]
    agent_bytes = b"agent text\n"
    folder, name = ("docs", "guide.md") if how == "existing-folder" else ("made-here", "x.txt")
    rel = f"{folder}/{name}"

    session = start_turn(cli)
    assert cli("write", "--session", session, rel, stdin=agent_bytes).rc == 0
    assert cli("edit", "--session", session, "README.md", "--old", "line two", "--new", "line 2").rc == 0
    end_turn(cli, session)

    # The outside folder holds a same-named file with exactly what the agent wrote.
    outside = tmp_path / "outside-folder"
    outside.mkdir()
    (outside / name).write_bytes(agent_bytes)
    (outside / "other.txt").write_bytes(b"other\n")
    (project / folder).rename(tmp_path / "moved-away")
    (project / folder).symlink_to(outside, target_is_directory=True)
    outside_before = tree_state(outside)

    preview = cli("undo", "--dry-run")
    assert preview.rc == 0, preview.err
    assert any(line.startswith(f"skip        {rel} (") for line in preview.lines), preview.out

    applied = cli("undo", "--yes", "--json")
    assert applied.rc == 0, applied.err
    data = applied.json()
    row = row_of(data, rel)
    assert row["action"] == "skip" and row["status"] == "skipped", row
    assert isinstance(row["reason"], str) and row["reason"], row
    assert row_of(data, "README.md")["status"] == "done"
    for other in data["rows"]:
        if other["path"] != "README.md":
            assert other["status"] == "skipped", other

    assert tree_state(outside) == outside_before
    assert (project / folder).is_symlink() and os.readlink(project / folder) == str(outside)
    store_trash = tmp_path / "store" / "trash"
    if store_trash.exists():
        trashed = [p for p in store_trash.rglob("*") if p.is_file() or p.is_symlink()]
        assert [p.name for p in trashed] == ["README.md"], trashed


@pytest.mark.parametrize("swap", ["file", "parent"])
def test_link_swapped_in_between_plan_and_apply_is_not_followed(
    engine: turnback.Engine, project: Path, tmp_path: Path, swap: str
) -> None:
    """The preview saw plain files; links to outside copies of the agent's bytes appear before the apply."""
    session = engine.new_session(str(project))
    engine.begin_turn(session.id, "swap")
    engine.write(session.id, "docs/guide.md", b"agent guide\n")
    engine.write(session.id, "new/made.txt", b"agent made\n")
    engine.end_turn(session.id)
    plan = engine.plan_undo(session.id)
    assert {row.path: row.action for row in plan.rows} == {
        "docs/guide.md": "restore",
        "new/made.txt": "trash",
        "new": "trash",
    }

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "guide.md").write_bytes(b"agent guide\n")
    (outside / "made.txt").write_bytes(b"agent made\n")
    outside_before = tree_state(outside)
    if swap == "file":
        for rel, name in (("docs/guide.md", "guide.md"), ("new/made.txt", "made.txt")):
            (project / rel).unlink()
            (project / rel).symlink_to(outside / name)
    else:
        for folder in ("docs", "new"):
            (project / folder).rename(tmp_path / f"away-{folder}")
            (project / folder).symlink_to(outside, target_is_directory=True)
    project_before = tree_state(project)

    result = engine.apply(plan)
    statuses = {row.path: row.status for row in result.plan.rows}
    assert statuses == {"docs/guide.md": "skipped", "new/made.txt": "skipped", "new": "skipped"}, statuses
    assert all(row.note or row.reason for row in result.plan.rows)
    assert tree_state(outside) == outside_before
    assert tree_state(project) == project_before
    trash = Path(engine.store.trash_root)
    assert not trash.exists() or not [p for p in trash.rglob("*") if not p.is_dir()]


def test_fifo_in_place_of_an_agent_file_is_skipped_without_blocking(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    session = start_turn(cli)
    assert cli("write", "--session", session, "made.txt", stdin=b"agent\n").rc == 0
    assert cli("edit", "--session", session, "README.md", "--old", "line two", "--new", "line 2").rc == 0
    end_turn(cli, session)
    (project / "made.txt").unlink()
    os.mkfifo(project / "made.txt")

    applied = cli("undo", "--yes", "--json")
    assert applied.rc == 0, applied.err
    row = row_of(applied.json(), "made.txt")
    assert row["action"] == "skip" and row["status"] == "skipped" and row["reason"], row
    assert stat.S_ISFIFO((project / "made.txt").lstat().st_mode)
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"


# -- paths that leave the project ---------------------------------------------------------------


@pytest.fixture
def deep_project(tmp_path: Path) -> Path:
    """A project two folders down, so ``../../etc/passwd`` stays inside the test's temp folder."""
    root = make_project(tmp_path / "deep" / "project")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_bytes(b"root:x:0:0:OLD:/root:/bin/sh\n")
    (tmp_path / "deep" / "x").write_bytes(b"x OLD outside\n")
    (tmp_path / "deep" / "project-evil").mkdir()
    (tmp_path / "deep" / "project-evil" / "a").write_bytes(b"evil OLD sibling\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "abs.txt").write_bytes(b"abs OLD outside\n")
    return root


def escaping_paths(tmp_path: Path) -> dict[str, str]:
    return {
        "dotdot": "../x",
        "dotdot-new": "../brand-new.txt",
        "etc-passwd": "../../etc/passwd",
        "inner-dotdot": "src/../../x",
        "absolute": str(tmp_path / "outside" / "abs.txt"),
        "absolute-new": str(tmp_path / "outside" / "new.txt"),
        "sibling-prefix-abs": str(tmp_path / "deep" / "project-evil" / "a"),
        "sibling-prefix-rel": "../project-evil/a",
        "sibling-prefix-new": str(tmp_path / "deep" / "project-evil" / "b"),
    }


ESCAPE_KINDS = [
    "dotdot",
    "dotdot-new",
    "etc-passwd",
    "inner-dotdot",
    "absolute",
    "absolute-new",
    "sibling-prefix-abs",
    "sibling-prefix-rel",
    "sibling-prefix-new",
]


@pytest.mark.parametrize("kind", ESCAPE_KINDS)
def test_paths_outside_the_project_are_copied_first_and_undone_exactly(
    home: Path, deep_project: Path, tmp_path: Path, kind: str
) -> None:
    """In the default mode (auto) a file tool may write outside the project: it copies first, undo puts it back."""

    def cli(*args: str, stdin: bytes = b"") -> Result:
        return run_cli(home, *args, cwd=deep_project, stdin=stdin)

    session = start_turn(cli)
    path = escaping_paths(tmp_path)[kind]
    before = outside_state(tmp_path)
    for args in (("mv", "--session", session, path, "moved-in.txt"), ("mv", "--session", session, "README.md", path)):
        refused = cli(*args)
        assert_clean_refusal(refused)
        assert "moves files inside the project only" in refused.err
        assert outside_state(tmp_path) == before, args
    existing = os.path.lexists(os.path.join(deep_project, path)) if not os.path.isabs(path) else os.path.lexists(path)
    if existing:
        edited = cli("edit", "--session", session, path, "--old", "OLD", "--new", "NEW")
        assert edited.rc == 0, edited.err
    written = cli("write", "--session", session, path, "--json", stdin=b"evil\n")
    assert written.rc == 0, written.err
    [change] = written.json()["call"]["changes"]  # type: ignore[index]
    assert os.path.isabs(change["path"]) and change["kind"] == ("modified" if existing else "new")
    assert outside_state(tmp_path) != before
    end_turn(cli, session)
    undone = cli("undo", "--yes")
    assert undone.rc == 0, undone.err
    assert outside_state(tmp_path) == before


def test_outside_writes_in_manual_mode_are_not_covered(home: Path, deep_project: Path, tmp_path: Path) -> None:
    def cli(*args: str, stdin: bytes = b"") -> Result:
        return run_cli(home, *args, cwd=deep_project, stdin=stdin)

    session = start_turn(cli)
    (home / "config.toml").write_text('mode = "manual"\n')
    target = tmp_path / "outside" / "abs.txt"
    assert cli("write", "--session", session, str(target), stdin=b"manual\n").rc == 0
    end_turn(cli, session)
    preview = cli("undo", "--dry-run")
    assert preview.rc == 0
    assert "not covered ~/outside/abs.txt (mode manual copies nothing outside the project)" in preview.lines
    undone = cli("undo", "--yes")
    assert undone.rc == 1  # nothing could be done
    assert undone.lines[-1] == "not covered ~/outside/abs.txt (mode manual copies nothing outside the project)"
    assert target.read_bytes() == b"manual\n"


def test_nul_in_a_path_is_refused_by_every_tool(engine: turnback.Engine, project: Path, tmp_path: Path) -> None:
    """argv cannot carry NUL, so the library (what the CLI calls) is asked directly."""
    session = engine.new_session(str(project))
    engine.begin_turn(session.id, "nul")
    before = outside_state(tmp_path)
    bad_paths = ["a\0b.txt", "README.md\0", "\0", "../x\0", "src/\0/main.py", str(project / "a\0")]
    for bad in bad_paths:
        attempts = [
            partial(engine.write, session.id, bad, b"evil\n"),
            partial(engine.edit, session.id, bad, "line two", "evil"),
            partial(engine.delete, session.id, bad),
            partial(engine.move, session.id, bad, "moved.txt"),
            partial(engine.move, session.id, "README.md", bad),
            partial(engine.mkdir, session.id, bad),
        ]
        for attempt in attempts:
            with pytest.raises(turnback.TurnbackError) as caught:
                attempt()
            assert caught.value.exit_code in (1, 2)
            assert "\n" not in str(caught.value)
            assert outside_state(tmp_path) == before, repr(bad)
    engine.end_turn(session.id)
    assert all(not turn.calls for turn in engine.log(session.id))


# -- hard links -------------------------------------------------------------------------------


@pytest.mark.parametrize("back", ["revert", "undo"])
def test_hard_link_to_outside_file_is_never_written_through(cli, project: Path, tmp_path: Path, back: str) -> None:  # type: ignore[no-untyped-def]
    outside = tmp_path / "outside"
    outside.mkdir()
    original = outside / "orig.txt"
    original_bytes = b"outside original line two\n"
    original.write_bytes(original_bytes)
    os.link(original, project / "hl.txt")
    os.link(original, project / "hl2.txt")
    assert original.stat().st_nlink == 3

    outside_before = tree_state(outside)

    def outside_unchanged() -> None:
        assert original.read_bytes() == original_bytes
        assert tree_state(outside) == outside_before

    session = start_turn(cli)
    written = cli("write", "--session", session, "hl.txt", "--json", stdin=b"the agent's new bytes\n")
    assert written.rc == 0, written.err
    outside_unchanged()
    assert (project / "hl.txt").read_bytes() == b"the agent's new bytes\n"
    edited = cli("edit", "--session", session, "hl2.txt", "--old", "line two", "--new", "LINE 2", "--json")
    assert edited.rc == 0, edited.err
    outside_unchanged()
    assert (project / "hl2.txt").read_bytes() == b"outside original LINE 2\n"
    assert original.stat().st_nlink == 1
    end_turn(cli, session)

    if back == "revert":
        for made in (written, edited):
            call = made.json()["call"]
            assert isinstance(call, dict)
            result = cli("revert", str(call["id"]), "--yes")
            assert result.rc == 0, result.err
            outside_unchanged()
    else:
        result = cli("undo", "--yes")
        assert result.rc == 0, result.err
        outside_unchanged()
    assert (project / "hl.txt").read_bytes() == original_bytes
    assert (project / "hl2.txt").read_bytes() == original_bytes
    assert (project / "hl.txt").stat().st_ino != original.stat().st_ino
    outside_unchanged()


def test_hard_link_swapped_in_after_the_agent_wrote_is_not_written_through(  # type: ignore[no-untyped-def]
    cli, project: Path, tmp_path: Path
) -> None:
    """The agent's files are replaced by hard links to outside files holding the same bytes: undo only
    changes directory entries in the project, never the outside inodes."""
    outside = tmp_path / "outside"
    outside.mkdir()
    session = start_turn(cli)
    assert cli("write", "--session", session, "made.txt", stdin=b"agent made\n").rc == 0
    assert cli("write", "--session", session, "README.md", stdin=b"agent readme\n").rc == 0
    end_turn(cli, session)
    for name, content in (("made.txt", b"agent made\n"), ("README.md", b"agent readme\n")):
        (outside / name).write_bytes(content)
        (project / name).unlink()
        os.link(outside / name, project / name)
    outside_before = tree_state(outside)

    result = cli("undo", "--yes", "--json")
    assert result.rc == 0, result.err
    assert {row["path"]: row["status"] for row in result.json()["rows"]} == {
        "made.txt": "done",
        "README.md": "done",
    }
    assert tree_state(outside) == outside_before
    assert not (project / "made.txt").exists()
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"
    assert (outside / "README.md").stat().st_nlink == 1


# -- a folder link on the way -----------------------------------------------------------------


def test_tools_refuse_a_parent_folder_that_is_a_link_to_outside(cli, project: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outside = tmp_path / "outside-dir"
    outside.mkdir()
    (outside / "existing.txt").write_bytes(b"outside OLD existing\n")
    (project / "linkdir").symlink_to(outside, target_is_directory=True)
    session = start_turn(cli)
    before = outside_state(tmp_path)

    for path in ("linkdir/new.txt", "linkdir/existing.txt", "linkdir/sub/new.txt"):
        result = cli("write", "--session", session, path, stdin=b"evil\n")
        assert_clean_refusal(result, codes=(1,))
        assert outside_state(tmp_path) == before, path
    for args in (
        ("edit", "--session", session, "linkdir/existing.txt", "--old", "OLD", "--new", "NEW"),
        ("rm", "--session", session, "linkdir/existing.txt"),
        ("mv", "--session", session, "linkdir/existing.txt", "in.txt"),
        ("mv", "--session", session, "README.md", "linkdir/moved.txt"),
        ("mkdir", "--session", session, "linkdir/sub"),
        ("write", "--session", session, "link-to-readme"),
        ("edit", "--session", session, "link-to-readme", "--old", "line two", "--new", "evil"),
    ):
        result = cli(*args, stdin=b"evil\n")
        assert_clean_refusal(result)
        assert outside_state(tmp_path) == before, args
    end_turn(cli, session)
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"


# -- keys --------------------------------------------------------------------------------------


def run_with_key_file(home: Path, *args: str, cwd: Path, stdin: bytes = b"") -> Result:
    """The CLI with no ``TURNBACK_KEY`` and no keyring: the store's key file is the key."""
    env = cli_env(home)
    del env["TURNBACK_KEY"]
    env["TURNBACK_NO_KEYRING"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "turnback", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )
    return Result(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


@pytest.mark.parametrize("unsafe", ["mode-644", "mode-640", "symlink"])
def test_unsafe_key_file_is_refused(home: Path, project: Path, tmp_path: Path, unsafe: str) -> None:
    def cli(*args: str, stdin: bytes = b"") -> Result:
        return run_with_key_file(home, *args, cwd=project, stdin=stdin)

    session = start_turn(cli)
    key = home / "key"
    assert stat.S_ISREG(key.lstat().st_mode) and stat.S_IMODE(key.lstat().st_mode) == 0o600
    assert cli("write", "--session", session, "before.txt", stdin=b"with a good key\n").rc == 0
    project_before = tree_state(project)

    moved = tmp_path / "key-elsewhere"
    if unsafe == "symlink":
        key.rename(moved)
        key.symlink_to(moved)  # the real key, mode 0600, but reached through a link
        expected: tuple[str, ...] = ("key file", "link")
    else:
        mode = 0o644 if unsafe == "mode-644" else 0o640
        key.chmod(mode)
        expected = ("key file", f"{mode:o}", "600")
    for args in (
        ("write", "--session", session, "x.txt"),
        ("sessions",),
        ("undo", "--session", session, "--yes"),
    ):
        result = cli(*args, stdin=b"must not be written\n")
        assert_clean_refusal(result, codes=(1,))
        assert all(word in result.err for word in expected), result.err
        assert tree_state(project) == project_before
    assert not (project / "x.txt").exists()

    if unsafe == "symlink":
        key.unlink()
        moved.rename(key)
    else:
        key.chmod(0o600)
    fixed = cli("write", "--session", session, "x.txt", stdin=b"key fixed\n")
    assert fixed.rc == 0, fixed.err


def test_wrong_turnback_key_is_refused(cli, home: Path, project: Path) -> None:  # type: ignore[no-untyped-def]
    session = start_turn(cli)
    assert cli("write", "--session", session, "kept.txt", stdin=b"good key\n").rc == 0
    project_before = tree_state(project)
    db_before = (home / "turnback.db").read_bytes()

    wrong = {"TURNBACK_KEY": OTHER_KEY}
    for args in (
        ("write", "--session", session, "x.txt"),
        ("edit", "--session", session, "README.md", "--old", "line two", "--new", "evil"),
        ("rm", "--session", session, "kept.txt"),
        ("undo", "--session", session, "--yes"),
        ("sessions",),
    ):
        result = cli(*args, stdin=b"must not be written\n", env=wrong)
        assert_clean_refusal(result, codes=(1,))
        assert "key" in result.err and "does not open this store" in result.err, result.err
        assert tree_state(project) == project_before
    assert (home / "turnback.db").read_bytes() == db_before
    assert cli("write", "--session", session, "x.txt", stdin=b"right key again\n").rc == 0


def test_turnback_key_on_a_key_file_store_is_refused(home: Path, project: Path) -> None:
    """A store made with a key file refuses an unrelated TURNBACK_KEY rather than opening with it."""
    session = start_turn(lambda *a, stdin=b"": run_with_key_file(home, *a, cwd=project, stdin=stdin))
    project_before = tree_state(project)
    result = run_cli(home, "write", "--session", session, "x.txt", cwd=project, stdin=b"evil\n")
    assert_clean_refusal(result, codes=(1,))
    assert "does not open this store" in result.err
    assert tree_state(project) == project_before


# -- nothing readable in the store's database --------------------------------------------------


SECRET_PATH = "secret-path-7f3a9.txt"
SECRET_CONTENT = "MARKER-c0ffee-4242"
SECRET_MESSAGE = "message-marker-99aa"


def _store_db_files(home: Path) -> dict[str, bytes]:
    found = {}
    for suffix in ("", "-wal", "-shm"):
        path = home / f"turnback.db{suffix}"
        if path.exists():
            found[path.name] = path.read_bytes()
    return found


def _assert_no_plain_text(files: dict[str, bytes], markers: list[str]) -> None:
    for name, data in files.items():
        for marker in markers:
            for encoded in {marker.encode("utf-8"), marker.encode("utf-16-le")}:
                assert encoded not in data, f"{marker!r} is readable in {name}"


def test_store_database_holds_no_plain_paths_contents_or_messages(home: Path, tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj-root-5e5e1d")
    markers = [
        SECRET_PATH,
        "secret-path-7f3a9",
        SECRET_CONTENT,
        SECRET_MESSAGE,
        "title-marker-31d4",
        "cli-message-marker-b0b0",
        "cli-secret-name-e1e1.md",
        "CLI-CONTENT-d00d-5150",
        "edit-old-a1a1",
        "edit-new-b2b2",
        str(project),
        "proj-root-5e5e1d",
    ]
    (project / "edit-me.txt").write_bytes(b"keep edit-old-a1a1 keep\n")

    with turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False) as engine:
        session = engine.new_session(str(project), title="title-marker-31d4")
        engine.begin_turn(session.id, SECRET_MESSAGE)
        engine.write(session.id, SECRET_PATH, f"{SECRET_CONTENT}\n".encode())
        engine.edit(session.id, "edit-me.txt", "edit-old-a1a1", "edit-new-b2b2")
        engine.end_turn(session.id)

        # A second process records a turn while this engine keeps the store open.
        def cli(*args: str, stdin: bytes = b"") -> Result:
            return run_cli(home, *args, cwd=project, stdin=stdin)

        assert cli("turn", "begin", "--session", session.id, "--message", "cli-message-marker-b0b0").rc == 0
        wrote = cli("write", "--session", session.id, "cli-secret-name-e1e1.md", stdin=b"CLI-CONTENT-d00d-5150\n")
        assert wrote.rc == 0, wrote.err
        end_turn(cli, session.id)
        assert cli("log").rc == 0

        files = _store_db_files(home)
        assert "turnback.db-wal" in files, sorted(files)
        _assert_no_plain_text(files, markers)

        # Undo both turns (plans and rows are stored too), still with the store open.
        plan = engine.plan_undo(session.id, from_turn=1)
        result = engine.apply(plan)
        assert all(row.status == "done" for row in result.plan.rows)
        assert not (project / SECRET_PATH).exists()
        _assert_no_plain_text(_store_db_files(home), markers)

    after_close = _store_db_files(home)
    assert "turnback.db" in after_close
    _assert_no_plain_text(after_close, markers)
    # And nothing else in the store (besides the trash, plain on purpose) names them either.
    for path in home.rglob("*"):
        if path.is_file() and "trash" not in path.relative_to(home).parts:
            _assert_no_plain_text({str(path.relative_to(home)): path.read_bytes()}, markers)

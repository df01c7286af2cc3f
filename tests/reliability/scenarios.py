"""The 50-file scenarios the crash loops take back: an undo, a revert, a rollback, a shell command.

Each builder makes a fresh store and project under a folder and records the
same changes every time (same paths, same bytes), so the result of an
uninterrupted run in one folder is the reference for a killed-and-resumed
run in another.

The project holds 50 files in nested folders (a ~700 KB one, binary ones, an
executable one). The change taken back modifies 30 of them, creates 10 (some
in new folders) and deletes 10.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import turnback
from tests.conftest import TEST_KEY, tree_state
from tests.reliability import pgstores
from tests.reliability.helpers import TreeState

MODIFIED_BY_WRITE = (
    [f"r{i:02d}.txt" for i in range(6)]
    + [f"a/b/b{i:02d}.bin" for i in range(8)]
    + [f"d/e/f/f{i:02d}.dat" for i in range(4)]
)
MODIFIED_BY_EDIT = [f"a/a{i:02d}.txt" for i in range(8)] + [f"c/c{i:02d}.md" for i in range(4)]
MODIFIED = MODIFIED_BY_WRITE + MODIFIED_BY_EDIT
CREATED = [
    "new0.txt",
    "new1.txt",
    "a/new2.txt",
    "c/new3.md",
    "newdir/n4.txt",
    "newdir/n5.bin",
    "newdir/deep/n6.txt",
    "newdir/deep/n7.txt",
    "newdir/deep/n8.dat",
    "newdir/deep/n9.txt",
]
DELETED = [
    "r08.txt",
    "r09.txt",
    "a/a08.txt",
    "a/a09.txt",
    "a/b/b08.bin",
    "a/b/b09.bin",
    "c/c08.md",
    "c/c09.md",
    "d/e/f/f08.dat",
    "d/e/f/f09.dat",
]
BIG = "d/e/f/f00.dat"
EXECUTABLE = "d/e/f/f01.dat"
STAGE_ENV = "TB_STAGE"


def old_content(rel: str) -> bytes:
    if rel == BIG:
        return b"".join(f"{rel} big old line {i:06d}\n".encode() for i in range(24_000))  # ~700 KB
    if rel.endswith(".bin"):
        seed = sum(rel.encode())
        return bytes((seed + i * 7) % 256 for i in range(3000 + seed))
    lines = 3 + sum(rel.encode()) % 40
    return f"# {rel}\nTOKEN-{rel}\n".encode() + b"".join(f"{rel} old {i}\n".encode() for i in range(lines))


def new_content(rel: str) -> bytes:
    if rel == BIG:
        return b"".join(f"{rel} big NEW line {i:06d} xx\n".encode() for i in range(30_000))
    if rel.endswith(".bin"):
        seed = sum(rel.encode()) * 3
        return bytes((seed + i * 13) % 256 for i in range(1000 + seed % 5000))
    return f"new content of {rel}\n".encode() * (2 + sum(rel.encode()) % 17)


def all_old_files() -> list[str]:
    files = [f"r{i:02d}.txt" for i in range(10)]
    files += [f"a/a{i:02d}.txt" for i in range(10)]
    files += [f"a/b/b{i:02d}.bin" for i in range(10)]
    files += [f"c/c{i:02d}.md" for i in range(10)]
    files += [f"d/e/f/f{i:02d}.dat" for i in range(10)]
    return files


def write_old_tree(project: Path) -> None:
    files = all_old_files()
    assert len(files) == 50
    for rel in files:
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(old_content(rel))
        path.chmod(0o644)
    (project / EXECUTABLE).chmod(0o755)


def stage_new_contents(stage: Path, rels: list[str]) -> None:
    """The new bytes of *rels*, in a folder outside the project, for a shell command to copy in."""
    for rel in rels:
        path = stage / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(new_content(rel))


def shell_script(modified: list[str], created: list[str], deleted: list[str]) -> str:
    """``sh -c`` text that copies the staged bytes over *modified* and *created* and removes *deleted*.

    The stage folder comes from ``$TB_STAGE``, so the command line names no outside path.
    """
    lines = ["set -e"]
    folders = sorted({rel.rsplit("/", 1)[0] for rel in created if "/" in rel})
    if folders:
        lines.append("mkdir -p " + " ".join(shlex.quote(folder) for folder in folders))
    for rel in modified + created:
        lines.append(f'cat "${STAGE_ENV}/{rel}" > {shlex.quote(rel)}')
    if deleted:
        lines.append("rm " + " ".join(shlex.quote(rel) for rel in deleted))
    return "\n".join(lines)


@contextlib.contextmanager
def stage_in_environment(stage: Path) -> Iterator[None]:
    """``$TB_STAGE`` set for commands run in this process (the library's run_command passes its environment on)."""
    before = os.environ.get(STAGE_ENV)
    os.environ[STAGE_ENV] = str(stage)
    try:
        yield
    finally:
        if before is None:
            del os.environ[STAGE_ENV]
        else:
            os.environ[STAGE_ENV] = before


def open_engine(home: Path) -> turnback.Engine:
    """The store in *home*; made on first use (in a database of its own, when the tests run on PostgreSQL)."""
    pgstores.give_database(home)
    engine = turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False)
    assert (engine.store_url is not None) == (pgstores.SERVER is not None), "the store is not on the backend tested"
    return engine


@dataclass
class Case:
    """A built scenario: what to run to take the change back, and the tree it starts from."""

    kind: str
    home: Path
    project: Path
    session_id: str
    args: tuple[str, ...]  # the take-back, as CLI arguments (without --json)
    resume: tuple[str, ...]  # what finishes an interrupted one
    start: TreeState
    trash_prefix: str
    keep_turn: str | None = None  # a rollback's target turn id (the head afterwards)
    goal: TreeState | None = None  # an undo's: the tree before the turn, what the undo gives back
    extra: dict[str, str] = field(default_factory=dict)


def _undo_changes(engine: turnback.Engine, session_id: str) -> None:
    for rel in MODIFIED_BY_WRITE:
        engine.write(session_id, rel, new_content(rel))
    for rel in MODIFIED_BY_EDIT:
        engine.edit(session_id, rel, f"TOKEN-{rel}", f"EDITED-{rel}-with-a-longer-replacement-text")
    for rel in CREATED:
        engine.write(session_id, rel, new_content(rel))
    for rel in DELETED:
        engine.delete(session_id, rel)


def build_undo(base: Path) -> Case:
    """One ended turn of file-tool calls: 30 modified, 10 created, 10 deleted."""
    home, project = base / "store", base / "project"
    write_old_tree(project)
    goal = tree_state(project)
    with open_engine(home) as engine:
        session = engine.new_session(str(project), title="kill test")
        engine.begin_turn(session.id, "change thirty files, add ten, delete ten")
        _undo_changes(engine, session.id)
        engine.end_turn(session.id)
    args = ("undo", "--session", session.id, "--yes")
    return Case("undo", home, project, session.id, args, args, tree_state(project), "u-", goal=goal)


def build_revert(base: Path) -> Case:
    """One turn of three calls; the middle one is a shell command that changes the 50 files. Revert it."""
    home, project, stage = base / "store", base / "project", base / "stage"
    write_old_tree(project)
    stage_new_contents(stage, MODIFIED + CREATED)
    with open_engine(home) as engine, stage_in_environment(stage):
        session = engine.new_session(str(project), title="revert kill test")
        engine.begin_turn(session.id, "a write, a big command, a write")
        engine.write(session.id, "other.txt", b"written before the command\n")
        result = engine.run_command(session.id, ["sh", "-c", shell_script(MODIFIED, CREATED, DELETED)])
        assert result.exit_code == 0, result
        engine.write(session.id, "later.txt", b"written after the command\n")
        engine.end_turn(session.id)
        call_id = result.call.id
    assert len(result.call.changes) >= 50, len(result.call.changes)
    args = ("revert", call_id, "--yes")
    return Case("revert", home, project, session.id, args, args, tree_state(project), "revert-")


def build_rollback(base: Path) -> Case:
    """Three turns; turns 2 (file tools) and 3 (a shell command) change the 50 files. Roll back to turn 1."""
    home, project, stage = base / "store", base / "project", base / "stage"
    write_old_tree(project)
    second_created, third_created = CREATED[:5], CREATED[5:]
    second_deleted, third_deleted = DELETED[:5], DELETED[5:]
    stage_new_contents(stage, MODIFIED_BY_EDIT + third_created)
    with open_engine(home) as engine, stage_in_environment(stage):
        session = engine.new_session(str(project), title="rollback kill test")
        first = engine.begin_turn(session.id, "turn one stays")
        engine.write(session.id, "t1.txt", b"turn one\n")
        engine.end_turn(session.id)
        engine.begin_turn(session.id, "file tools")
        for rel in MODIFIED_BY_WRITE + second_created:
            engine.write(session.id, rel, new_content(rel))
        for rel in second_deleted:
            engine.delete(session.id, rel)
        engine.end_turn(session.id)
        engine.begin_turn(session.id, "a shell command")
        result = engine.run_command(
            session.id, ["sh", "-c", shell_script(MODIFIED_BY_EDIT, third_created, third_deleted)]
        )
        assert result.exit_code == 0, result
        engine.end_turn(session.id)
    args = ("rollback", "1", "--session", session.id, "--confirm")
    resume = ("undo", "--session", session.id, "--yes")
    case = Case("rollback", home, project, session.id, args, resume, tree_state(project), "rollback-")
    case.keep_turn = first.id
    return case


def build_exec(base: Path) -> Case:
    """A project of 50 files, a session with a running turn held by this process; and the command's script.

    The script (``sh -c``) modifies 30 files, creates 10 (some in new folders)
    and deletes 10, copying the new bytes from ``$TB_STAGE``.
    """
    home, project, stage = base / "store", base / "project", base / "stage"
    write_old_tree(project)
    stage_new_contents(stage, MODIFIED + CREATED)
    with open_engine(home) as engine:
        session = engine.new_session(str(project), title="exec kill test")
        engine.begin_turn(session.id, "one big command")  # held by this process: it runs until the test ends it
    args = ("exec", "--session", session.id, "--", "sh", "-c", shell_script(MODIFIED, CREATED, DELETED))
    case = Case("exec", home, project, session.id, args, (), tree_state(project), "")
    case.extra = {STAGE_ENV: str(stage)}
    return case


BUILDERS = {"undo": build_undo, "revert": build_revert, "rollback": build_rollback, "exec": build_exec}

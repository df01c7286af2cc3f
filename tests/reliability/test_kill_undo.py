"""kill -9 in the middle of a 50-file undo, then a plain rerun finishes it.

A turn modifies 30 files of a 50-file project, creates 10 (some in new
folders) and deletes 10. ``turnback undo --yes`` runs as a subprocess with
``TURNBACK_FAULT_KILL_AFTER=N``, so it SIGKILLs itself right after its N-th
durable file-system step. After the kill each path must hold exactly what it
held before the turn or after it; the next ``turnback undo --yes`` must finish
the operation: the tree back to its pre-turn state byte for byte, every
displaced file in the trash exactly once, and no temp file left anywhere.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest

import turnback
import turnback.fsio
from tests.conftest import TEST_KEY, run_cli, tree_state
from turnback.model import SessionId

MODIFIED_BY_WRITE = (
    [f"r{i:02d}.txt" for i in range(6)]
    + [f"a/b/b{i:02d}.bin" for i in range(8)]
    + [f"d/e/f/f{i:02d}.dat" for i in range(4)]
)
MODIFIED_BY_EDIT = [f"a/a{i:02d}.txt" for i in range(8)] + [f"c/c{i:02d}.md" for i in range(4)]
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


def _old_content(rel: str) -> bytes:
    if rel == BIG:
        return b"".join(f"{rel} big old line {i:06d}\n".encode() for i in range(24_000))  # ~700 KB
    if rel.endswith(".bin"):
        seed = sum(rel.encode())
        return bytes((seed + i * 7) % 256 for i in range(3000 + seed))
    lines = 3 + sum(rel.encode()) % 40
    return f"# {rel}\nTOKEN-{rel}\n".encode() + b"".join(f"{rel} old {i}\n".encode() for i in range(lines))


def _new_content(rel: str) -> bytes:
    if rel == BIG:
        return b"".join(f"{rel} big NEW line {i:06d} xx\n".encode() for i in range(30_000))
    if rel.endswith(".bin"):
        seed = sum(rel.encode()) * 3
        return bytes((seed + i * 13) % 256 for i in range(1000 + seed % 5000))
    return f"new content of {rel}\n".encode() * (2 + sum(rel.encode()) % 17)


def _all_old_files() -> list[str]:
    files = [f"r{i:02d}.txt" for i in range(10)]
    files += [f"a/a{i:02d}.txt" for i in range(10)]
    files += [f"a/b/b{i:02d}.bin" for i in range(10)]
    files += [f"c/c{i:02d}.md" for i in range(10)]
    files += [f"d/e/f/f{i:02d}.dat" for i in range(10)]
    return files


@dataclass(frozen=True)
class Scenario:
    home: Path
    project: Path
    session_id: SessionId
    pre: dict[str, tuple[str, bytes | str | None, int]]
    post: dict[str, tuple[str, bytes | str | None, int]]
    displaced: dict[str, bytes]  # what the undo must move to the trash: path -> post-turn bytes


def build_scenario(base: Path) -> Scenario:
    """A 50-file project and one ended turn: 30 modified, 10 created (some in new folders), 10 deleted."""
    home = base / "store"
    project = base / "project"
    files = _all_old_files()
    assert len(files) == 50
    for rel in files:
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_old_content(rel))
        path.chmod(0o644)
    (project / EXECUTABLE).chmod(0o755)
    pre = tree_state(project)

    with turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False) as engine:
        session = engine.new_session(str(project), title="kill test")
        engine.begin_turn(session.id, "change thirty files, add ten, delete ten")
        for rel in MODIFIED_BY_WRITE:
            engine.write(session.id, rel, _new_content(rel))
        for rel in MODIFIED_BY_EDIT:
            engine.edit(session.id, rel, f"TOKEN-{rel}", f"EDITED-{rel}-with-a-longer-replacement-text")
        for rel in CREATED:
            engine.write(session.id, rel, _new_content(rel))
        for rel in DELETED:
            engine.delete(session.id, rel)
        engine.end_turn(session.id)
    post = tree_state(project)

    modified = MODIFIED_BY_WRITE + MODIFIED_BY_EDIT
    assert len(modified) == 30 and len(CREATED) == 10 and len(DELETED) == 10
    for rel in modified:
        assert post[rel][0] == "file" and post[rel][1] != pre[rel][1]
    for rel in CREATED:
        assert rel not in pre and post[rel][0] == "file"
    for rel in DELETED:
        assert rel in pre and rel not in post
    assert "newdir" not in pre and post["newdir/deep"][0] == "dir"
    displaced: dict[str, bytes] = {}
    for rel in modified + CREATED:
        content = post[rel][1]
        assert isinstance(content, bytes)
        displaced[rel] = content
    return Scenario(home, project, session.id, pre, post, displaced)


def _is_temp(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name.startswith(turnback.fsio.TEMP_PREFIX) and name.endswith(".tmp")


def _temp_files(root: Path) -> list[str]:
    if not root.exists():
        return []
    found = []
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            rel = (Path(folder) / name).relative_to(root).as_posix()
            if _is_temp(rel):
                found.append(rel)
    return found


def _files_under(root: Path) -> dict[str, bytes]:
    """Every non-folder entry under *root* (links are listed by their target, as bytes)."""
    found: dict[str, bytes] = {}
    for rel, (kind, content, _mode) in tree_state(root).items():
        if kind == "dir":
            continue
        found[rel] = content.encode() if isinstance(content, str) else (content or b"")
    return found


def assert_every_path_old_or_new(sc: Scenario) -> None:
    """Each path holds exactly its pre-turn or its post-turn state; temp files are not user content."""
    now = {rel: state for rel, state in tree_state(sc.project).items() if not _is_temp(rel)}
    for rel in sorted(set(sc.pre) | set(sc.post) | set(now)):
        current = now.get(rel)
        assert current in (sc.pre.get(rel), sc.post.get(rel)), (
            f"{rel} holds neither its pre-turn nor its post-turn state: "
            f"{None if current is None else (current[0], len(current[1] or b''), oct(current[2]))}"
        )


def assert_trash_holds_only_post_turn_bytes(sc: Scenario) -> None:
    trash_root = sc.home / "trash"
    if not trash_root.exists():
        return
    for op_folder in trash_root.iterdir():
        for rel, content in _files_under(op_folder).items():
            if _is_temp(rel):
                continue
            assert rel in sc.displaced, f"unexpected file in the trash: {op_folder.name}/{rel}"
            assert content == sc.displaced[rel], f"trash copy of {rel} is not its post-turn content"


def _undo(sc: Scenario, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return run_cli(sc.home, "undo", "--session", sc.session_id, *args, cwd=sc.project, env=env)


@pytest.fixture(scope="module")
def total_steps(tmp_path_factory: pytest.TempPathFactory) -> int:
    """How many durable file-system steps the whole undo takes: an uninterrupted undo of a copy, counted."""
    assert turnback.fsio.STEPS.kill_after is None, "TURNBACK_FAULT_KILL_AFTER must not be set for pytest itself"
    sc = build_scenario(tmp_path_factory.mktemp("dry-count"))
    with turnback.Engine.open(str(sc.home), key_secret=TEST_KEY, try_keyring=False) as engine:
        plan = engine.plan_undo(sc.session_id)
        before = turnback.fsio.STEPS.count
        result = engine.apply(plan)
        total = turnback.fsio.STEPS.count - before
    assert all(row.status == "done" for row in result.plan.rows)
    assert tree_state(sc.project) == sc.pre
    # 40 trash copies, 30 restores, 10 unlinks, 10 re-created files, 2 folders removed, trash folders made.
    assert 92 <= total <= 120, total
    return total


KILL_POINTS = ["1", "2", "3", "7", "20", "41", "60", "79", "last-1", "last"]


@pytest.mark.slow
@pytest.mark.parametrize("point", KILL_POINTS)
def test_kill_during_undo_then_rerun_finishes(tmp_path: Path, total_steps: int, point: str) -> None:
    kill_after = {"last": total_steps, "last-1": total_steps - 1}.get(point) or int(point)
    assert 1 <= kill_after <= total_steps
    sc = build_scenario(tmp_path)

    killed = _undo(sc, "--yes", env={"TURNBACK_FAULT_KILL_AFTER": str(kill_after)})
    assert killed.rc == -signal.SIGKILL, (killed.rc, killed.err)
    assert "Traceback" not in killed.err
    assert tree_state(sc.project) != sc.post, "the killed run did no step at all"
    assert_every_path_old_or_new(sc)
    assert_trash_holds_only_post_turn_bytes(sc)

    finished = _undo(sc, "--yes", "--json")
    assert finished.rc == 0, finished.err
    data = finished.json()
    assert data["schema"] == 1 and data["applied"] is True and data["resumed"] is True
    assert all(row["status"] == "done" for row in data["rows"]), data["rows"]

    assert tree_state(sc.project) == sc.pre
    assert _temp_files(sc.project) == []
    assert _temp_files(sc.home / "trash") == []

    plan = data["plan"]
    assert isinstance(plan, dict)
    trash_dir = sc.home / "trash" / f"u-{plan['id']}"
    assert data["trash"] is not None and Path(str(data["trash"])) == trash_dir
    assert sorted(p.name for p in (sc.home / "trash").iterdir()) == [trash_dir.name]
    in_trash = _files_under(trash_dir)
    assert sorted(in_trash) == sorted(sc.displaced), "the trash must hold each displaced file once, nothing else"
    for rel, content in sc.displaced.items():
        assert in_trash[rel] == content, f"trash copy of {rel} differs from its post-turn bytes"

    again = _undo(sc, "--yes")
    assert again.rc == 1, (again.out, again.err)
    assert "nothing to undo" in again.err
    assert tree_state(sc.project) == sc.pre


@pytest.mark.slow
def test_fault_hook_one_past_the_last_step_does_not_fire(tmp_path: Path, total_steps: int) -> None:
    """Proves the dry count is exact: with N = total + 1 the undo runs to the end and exits 0."""
    sc = build_scenario(tmp_path)
    result = _undo(sc, "--yes", "--json", env={"TURNBACK_FAULT_KILL_AFTER": str(total_steps + 1)})
    assert result.rc == 0, (result.rc, result.err)
    data = result.json()
    assert data["resumed"] is False
    assert tree_state(sc.project) == sc.pre
    trash_dir = Path(str(data["trash"]))
    assert _files_under(trash_dir) == sc.displaced
    assert json.dumps(data)  # one JSON object on stdout

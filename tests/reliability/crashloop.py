"""The crash loop of a take-back (undo, revert, rollback): kill after step N, check, resume, compare.

For each N, a fresh copy of the scenario is taken back by the real CLI with
``TURNBACK_FAULT_KILL_AFTER=N``, which SIGKILLs it right after its N-th
durable file-system step. Then:

- every path holds exactly what it held before the take-back or what the
  uninterrupted take-back leaves there, never a mix, empty or truncated;
- the trash holds nothing but the bytes the uninterrupted run displaces;
- ``turnback verify`` exits 0 (the store opens and is intact);
- (rollback) ``turnback status`` reports the interrupted rollback;
- a temp file is planted where a write killed mid-way would have left one
  (beside the next pending row, and in the operation's trash folder), named
  after the killed process;
- the resuming command finishes the operation (``resumed``), and the tree,
  the trash folder (each displaced file exactly once) and the head are what
  the uninterrupted run gives, with no temp file anywhere.
"""

from __future__ import annotations

import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import turnback.fsio
from tests.conftest import tree_state
from tests.reliability import pgstores
from tests.reliability.helpers import (
    TreeState,
    bytes_lost,
    files_under,
    is_temp,
    record,
    run,
    run_killed,
    temp_files,
    trash_lost,
    without_temps,
)
from tests.reliability.scenarios import BUILDERS, Case, open_engine
from turnback.capture.states import probe_state
from turnback.fsio import Tree
from turnback.model import OpId, SessionId
from turnback.paths import RelPath


@dataclass(frozen=True)
class Reference:
    """What an uninterrupted take-back of the scenario does: its steps, the tree before and after, the trash."""

    kind: str
    total: int
    start: TreeState
    final: TreeState
    trash: dict[str, bytes]


def _plan(engine: turnback.Engine, case: Case) -> turnback.Plan:
    if case.kind == "undo":
        return engine.plan_undo(SessionId(case.session_id))
    if case.kind == "revert":
        return engine.plan_revert(case.args[1])
    return engine.plan_rollback(SessionId(case.session_id), "1")


def reference(kind: str, base: Path) -> Reference:
    """Build the scenario and take it back in this process, counting its durable steps."""
    assert turnback.fsio.STEPS.kill_after is None, "TURNBACK_FAULT_KILL_AFTER must not be set for pytest itself"
    case = BUILDERS[kind](base)
    with open_engine(case.home) as engine:
        plan = _plan(engine, case)
        before = turnback.fsio.STEPS.count
        result = engine.apply(plan)
        total = turnback.fsio.STEPS.count - before
        if case.keep_turn is not None:
            assert engine.store.session(SessionId(case.session_id)).head == case.keep_turn
    assert all(row.status == "done" for row in result.plan.rows), [(r.path, r.status, r.note) for r in result.plan.rows]
    assert result.trash_dir is not None
    trash = files_under(Path(result.trash_dir))
    assert trash and all(len(content) > 0 for content in trash.values())
    final = tree_state(case.project)
    assert final != case.start
    return Reference(kind, total, case.start, final, trash)


def _plant_temps(engine: turnback.Engine, case: Case, dead_pid: int) -> list[Path]:
    """Temp files where a write killed between its temp file and its rename would leave them, named by *dead_pid*.

    The next pending row that acts is the one a real crash would have been in:
    its trash copy's temp file goes in its trash folder (when that folder was
    made), and a restore's temp file beside its path (unless its write got
    through before the kill).
    """
    planted: list[Path] = []
    name = f"{turnback.fsio.TEMP_PREFIX}{dead_pid}-deadbeef{{}}{turnback.fsio.TEMP_SUFFIX}"
    applying = engine.store.ops_in_status(SessionId(case.session_id), "applying")
    if not applying:
        return planted
    plan = engine.store.load_plan(OpId(applying[0]))
    tree = Tree(str(case.project))
    trash_dir = case.home / "trash" / f"{case.trash_prefix}{plan.id}"
    for row in plan.rows:
        if row.status != "pending" or row.action not in ("restore", "trash") or row.outside:
            continue
        assert row.target is not None
        if probe_state(tree, RelPath(row.path), engine.store).same_as(row.target):
            break  # its write got through before the kill: a real crash leaves no temp file then
        if row.trash_name is not None:
            folder = trash_dir / row.trash_name.rsplit("/", 1)[0] if "/" in row.trash_name else trash_dir
            if folder.is_dir():
                planted.append(folder / name.format("0001"))
        if row.action == "restore" and row.target.kind in ("file", "symlink"):
            folder = case.project / row.path.rsplit("/", 1)[0] if "/" in row.path else case.project
            if folder.is_dir() and not folder.is_symlink():
                planted.append(folder / name.format("0002"))
        break
    for path in planted:
        path.write_bytes(b"half of a write that was killed")
    return planted


def assert_old_or_new(now: TreeState, ref: Reference) -> None:
    for rel in sorted(set(ref.start) | set(ref.final) | set(now)):
        if is_temp(rel):
            continue
        current = now.get(rel)
        assert current in (ref.start.get(rel), ref.final.get(rel)), (
            f"{rel} holds neither its state before the {ref.kind} nor its state after it: "
            f"{None if current is None else (current[0], len(current[1] or b''), oct(current[2]))}"
        )


def _trash_folders(home: Path) -> list[Path]:
    root = home / "trash"
    return sorted(root.iterdir()) if root.exists() else []


class Pristine:
    """A scenario built once, and put back byte for byte (same paths) before each crash point."""

    def __init__(self, kind: str, base: Path):
        self.case = BUILDERS[kind](base / "case")
        self.copy = base / "pristine"
        shutil.copytree(base / "case", self.copy, symlinks=True)

    def restore(self) -> Case:
        case_folder = self.copy.parent / "case"
        used = pgstores.database_of(self.case.home)  # the last crash point's (PostgreSQL): dropped now
        shutil.rmtree(case_folder)
        shutil.copytree(self.copy, case_folder, symlinks=True)
        pgstores.copy_database(self.copy / self.case.home.relative_to(case_folder), self.case.home, used)
        return self.case


def crash_and_resume(
    ref: Reference, case: Case, kill_after: int, *, at_kill: Callable[[Case], None] | None = None
) -> dict[str, int]:
    """One crash point: kill after step *kill_after*, check, resume, compare with *ref*. Returns the numbers.

    *at_kill* checks more of what the kill left, before the resume."""
    assert tree_state(case.project) == ref.start, "the scenario is not built the same way twice"

    killed, pid = run_killed(
        case.home, *case.args, cwd=case.project, env={"TURNBACK_FAULT_KILL_AFTER": str(kill_after)}
    )
    assert killed.rc == -signal.SIGKILL, (kill_after, killed.rc, killed.out, killed.err)
    assert "Traceback" not in killed.err
    now = tree_state(case.project)
    assert_old_or_new(now, ref)
    folders = _trash_folders(case.home)
    assert len(folders) <= 1, folders
    for folder in folders:
        assert folder.name.startswith(case.trash_prefix), folder
        for rel, content in files_under(folder).items():
            assert ref.trash.get(rel) == content, f"the trash holds {rel}, which the {ref.kind} does not displace so"

    if at_kill is not None:
        at_kill(case)
    verified = run(case.home, "verify", cwd=case.project)
    assert verified.rc == 0, (kill_after, verified.out, verified.err)
    if ref.kind == "rollback":
        status = run(case.home, "status", "--session", case.session_id, cwd=case.project)
        assert status.rc == 0, status.err
        assert any(
            line.startswith("interrupted: rollback ") and line.endswith("turnback undo --yes finishes it")
            for line in status.lines
        ), status.out

    # One engine of this process for the crash point (a PostgreSQL store's database is dropped after it: a
    # second opening would keep a pool of connections to it).
    with open_engine(case.home) as engine:
        planted = _plant_temps(engine, case, pid)
        finished = run(case.home, *case.resume, "--json", cwd=case.project)
        head = engine.store.session(SessionId(case.session_id)).head

    assert finished.rc == 0, (kill_after, finished.rc, finished.out, finished.err)
    data = finished.json()
    assert data["applied"] is True and data["resumed"] is True, data
    plan = data["plan"]
    assert isinstance(plan, dict) and plan["kind"] == ref.kind, plan
    rows = data["rows"]
    assert isinstance(rows, list) and all(row["status"] == "done" for row in rows), rows

    final = tree_state(case.project)
    trash_dir = case.home / "trash" / f"{case.trash_prefix}{plan['id']}"
    assert _trash_folders(case.home) == [trash_dir]
    trash = files_under(trash_dir)
    lost = bytes_lost(ref.final, without_temps(final)) + trash_lost(ref.trash, trash)
    assert final == ref.final, sorted(
        rel for rel in set(final) | set(ref.final) if final.get(rel) != ref.final.get(rel)
    )
    assert temp_files(case.project) == [] and temp_files(case.home / "trash") == []
    assert not any(path.exists() for path in planted)
    assert trash == ref.trash, "the trash must hold each displaced file exactly once, with its displaced bytes"
    if case.keep_turn is not None:
        assert head == case.keep_turn
    assert lost == 0
    return {"planted_temps": len(planted), "lost": lost}


def run_crash_points(ref: Reference, tmp_path: Path, points: list[int]) -> None:
    planted = lost = 0
    pristine = Pristine(ref.kind, tmp_path)
    for kill_after in points:
        numbers = crash_and_resume(ref, pristine.restore(), kill_after)
        planted += numbers["planted_temps"]
        lost += numbers["lost"]
    record(
        f"crash-{ref.kind}",
        total_steps=ref.total,
        crash_points=len(points),
        points=points,
        resumed=len(points),
        planted_temps_cleaned=planted,
        bytes_lost=lost,
    )

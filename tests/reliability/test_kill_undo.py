"""kill -9 in the middle of a 50-file undo, at every step, then a plain rerun finishes it.

A turn modifies 30 files of a 50-file project, creates 10 (some in new
folders) and deletes 10 (``scenarios.build_undo``). ``turnback undo --yes``
runs as a subprocess with ``TURNBACK_FAULT_KILL_AFTER=N``, so it SIGKILLs
itself right after its N-th durable file-system step, for every N from 1 to
the last. After the kill each path must hold exactly what it held before the
turn or after it, and ``turnback verify`` must pass; the next
``turnback undo --yes`` must finish the operation: the tree back to its
pre-turn state byte for byte, every displaced file in the trash exactly
once, and no temp file left anywhere (``crashloop.crash_and_resume``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli, tree_state
from tests.reliability.crashloop import Reference, reference, run_crash_points
from tests.reliability.helpers import crash_points, files_under, record
from tests.reliability.scenarios import build_undo

CHUNKS = 10  # each crash point is a few CLI runs: spread over the workers


@pytest.fixture(scope="module")
def undo_reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """An uninterrupted undo of a copy, with its durable steps counted."""
    ref = reference("undo", tmp_path_factory.mktemp("undo-reference"))
    # Each file row in a batch: its temp file written (40), the displaced file linked into the trash (40), the
    # rename or removal (50); each batch's two syncs; 2 folders removed on their own; trash folders made.
    assert 135 <= ref.total <= 170, ref.total
    return ref


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_kill_during_undo_at_every_step_then_rerun_finishes(
    fast_tmp: Path, undo_reference: Reference, chunk: int
) -> None:
    points = crash_points(undo_reference.total)[chunk::CHUNKS]
    assert points
    run_crash_points(undo_reference, fast_tmp, points)


@pytest.mark.slow
def test_fault_hook_one_past_the_last_step_does_not_fire(tmp_path: Path, undo_reference: Reference) -> None:
    """Proves the count is exact: with N = total + 1 the undo runs to the end and exits 0."""
    case = build_undo(tmp_path)
    result = run_cli(
        case.home,
        *case.args,
        "--json",
        cwd=case.project,
        env={"TURNBACK_FAULT_KILL_AFTER": str(undo_reference.total + 1)},
    )
    assert result.rc == 0, (result.rc, result.err)
    data = result.json()
    assert data["resumed"] is False
    assert tree_state(case.project) == undo_reference.final
    assert files_under(Path(str(data["trash"]))) == undo_reference.trash
    assert json.dumps(data)  # one JSON object on stdout
    again = run_cli(case.home, *case.args, cwd=case.project)
    assert again.rc == 1, (again.out, again.err)
    assert "nothing to undo" in again.err
    assert tree_state(case.project) == undo_reference.final


def test_a_stale_temp_file_in_a_folder_the_agent_made_does_not_keep_the_folder(fast_tmp: Path) -> None:
    """A ``turnback write`` killed between its temp file and its rename leaves ``.turnback-PID-….tmp`` in the
    folder it wrote to; the undo of the turn that made that folder removes the stale temp file with the folder."""
    import subprocess

    case = build_undo(fast_tmp)
    assert case.goal is not None
    ended = subprocess.Popen(["true"])
    ended.wait()  # a pid whose process has ended, as a killed writer's has
    stale = case.project / "newdir" / "deep" / f".turnback-{ended.pid}-0123456789ab.tmp"
    stale.write_bytes(b"half of a write that was killed")
    result = run_cli(case.home, *case.args, "--json", cwd=case.project)
    assert result.rc == 0, result.err
    rows = result.json()["rows"]
    assert all(row["status"] == "done" for row in rows), [r for r in rows if r["status"] != "done"]
    assert tree_state(case.project) == case.goal
    assert not stale.exists()
    record("stale-temp", planted=1, cleaned=1)

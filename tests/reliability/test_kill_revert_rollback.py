"""kill -9 at every step of a 50-file revert and of a 50-file rollback, then the next command finishes it.

The revert takes back one shell-command call that modified 30 files, created
10 and deleted 10 (``turnback revert CALL --yes``, resumed by the same
command). The rollback goes back from turn 3 to turn 1 across a turn of
file-tool calls and a turn with a shell command, the same 50 paths between
them (``turnback rollback 1 --confirm``); ``turnback status`` must report it
interrupted and ``turnback undo --yes`` finishes it. Each crash point is
checked by ``crashloop.crash_and_resume`` against an uninterrupted run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli, tree_state
from tests.reliability.crashloop import Reference, reference, run_crash_points
from tests.reliability.helpers import crash_points
from tests.reliability.scenarios import BUILDERS

CHUNKS = 10  # each crash point is a few CLI runs: spread over the workers


@pytest.fixture(scope="module")
def revert_reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    return reference("revert", tmp_path_factory.mktemp("revert-reference"))


@pytest.fixture(scope="module")
def rollback_reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    return reference("rollback", tmp_path_factory.mktemp("rollback-reference"))


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_kill_during_revert_at_every_step_then_revert_again_finishes(
    fast_tmp: Path, revert_reference: Reference, chunk: int
) -> None:
    # Batched rows count each temp file and trash link as a step besides each rename (about 140 in all).
    assert 120 <= revert_reference.total <= 170, revert_reference.total
    run_crash_points(revert_reference, fast_tmp, crash_points(revert_reference.total)[chunk::CHUNKS])


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_kill_during_rollback_at_every_step_then_undo_finishes_it(
    fast_tmp: Path, rollback_reference: Reference, chunk: int
) -> None:
    assert 120 <= rollback_reference.total <= 170, rollback_reference.total
    run_crash_points(rollback_reference, fast_tmp, crash_points(rollback_reference.total)[chunk::CHUNKS])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["revert", "rollback"])
def test_the_step_count_is_exact(
    tmp_path: Path, revert_reference: Reference, rollback_reference: Reference, kind: str
) -> None:
    """With N = total + 1 the operation runs to the end and exits 0: the loops above tried every step."""
    ref = revert_reference if kind == "revert" else rollback_reference
    case = BUILDERS[kind](tmp_path)
    result = run_cli(
        case.home, *case.args, "--json", cwd=case.project, env={"TURNBACK_FAULT_KILL_AFTER": str(ref.total + 1)}
    )
    assert result.rc == 0, (result.rc, result.err)
    assert result.json()["resumed"] is False
    assert tree_state(case.project) == ref.final

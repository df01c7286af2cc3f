"""kill -9 inside a batch of an undo: between its temp files and its renames, and between its renames and the
sync of their folders.

An undo puts files back in batches (``turnback.ops.apply``): every temp file
of the batch is written and every displaced file linked into the trash,
then one sync makes them durable, then each path is checked and renamed
over, then one sync of the folders, then one journal commit. The crash loop
(``test_kill_undo.py``) kills at every step; this test finds, in an
uninterrupted run of the same 50-file scenario, the steps at the edges of
the first batch and checks what a kill there leaves before it resumes:

- right before the batch's first sync and right after it: no path of the
  project has changed yet (each holds what it held before the undo), and
  every file linked into the trash is a displaced file, byte for byte;
- right after the batch's last rename, before the sync of its folders:
  every row of the batch holds what the undo puts there, and the journal
  still has those rows pending, so the resume finds each one done (its
  path holds its target) and marks it.

Then ``turnback undo --yes`` resumes, and the tree, the trash and the
journal equal the uninterrupted run's (``crashloop.crash_and_resume``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import turnback
import turnback.fsio
import turnback.ops.apply
from tests.conftest import tree_state
from tests.reliability.crashloop import Pristine, Reference, crash_and_resume, reference
from tests.reliability.helpers import files_under, record, without_temps
from tests.reliability.scenarios import Case, open_engine
from turnback.model import OpId, SessionId


class _BatchSteps:
    """The step numbers (counted from the start of the undo) of each batch's syncs and renames."""

    def __init__(self) -> None:
        self.start = 0
        self.syncs: list[int] = []
        self.swaps: list[int] = []


@pytest.fixture(scope="module")
def batch_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Reference, _BatchSteps]:
    steps = _BatchSteps()
    patch = pytest.MonkeyPatch()
    real_apply, real_sync, real_swap = (
        turnback.Engine.apply,
        turnback.fsio.SyncBatch.sync,
        turnback.ops.apply._Staged.swap,
    )

    def apply(self: turnback.Engine, *args: Any, **kwargs: Any) -> Any:
        steps.start = turnback.fsio.STEPS.count
        return real_apply(self, *args, **kwargs)

    def sync(self: turnback.fsio.SyncBatch) -> Any:
        errors = real_sync(self)
        steps.syncs.append(turnback.fsio.STEPS.count - steps.start)
        return errors

    def swap(self: turnback.ops.apply._Staged) -> None:
        real_swap(self)
        steps.swaps.append(turnback.fsio.STEPS.count - steps.start)

    patch.setattr(turnback.Engine, "apply", apply)
    patch.setattr(turnback.fsio.SyncBatch, "sync", sync)
    patch.setattr(turnback.ops.apply._Staged, "swap", swap)
    try:
        ref = reference("undo", tmp_path_factory.mktemp("batch-reference"))
    finally:
        patch.undo()
    assert len(steps.syncs) >= 2 and steps.swaps, (steps.syncs, steps.swaps)
    return ref, steps


def _first_batch(steps: _BatchSteps) -> tuple[int, list[int]]:
    """The first batch's step numbers: its first sync, and its renames (and removals), the last right before
    its second sync."""
    first_sync, second_sync = steps.syncs[0], steps.syncs[1]
    renames = [n for n in steps.swaps if first_sync < n < second_sync]
    assert renames and renames[-1] == second_sync - 1, (steps.syncs, steps.swaps)
    return first_sync, renames


def _nothing_changed_yet(ref: Reference) -> Any:
    def check(case: Case) -> None:
        assert without_temps(tree_state(case.project)) == ref.start, "a path changed before the batch's renames"
        trash_root = case.home / "trash"
        for folder in trash_root.iterdir() if trash_root.exists() else ():
            linked = files_under(folder)
            assert all(ref.trash.get(rel) == content for rel, content in linked.items()), sorted(linked)

    return check


def _renamed_not_journaled(ref: Reference, renamed: int) -> Any:
    def check(case: Case) -> None:
        now = without_temps(tree_state(case.project))
        changed = sorted(rel for rel in set(now) | set(ref.start) if now.get(rel) != ref.start.get(rel))
        assert len(changed) >= renamed, (renamed, changed)
        assert all(now.get(rel) == ref.final.get(rel) for rel in changed), changed
        with open_engine(case.home) as engine:
            applying = engine.store.ops_in_status(SessionId(case.session_id), "applying")
            assert applying, "the undo is not marked applying"
            plan = engine.store.load_plan(OpId(applying[0]))
            assert not any(row.status == "done" for row in plan.rows), "a row was journaled before its folder sync"

    return check


@pytest.mark.slow
def test_kill_between_the_temp_files_and_the_renames_of_a_batch(
    fast_tmp: Path, batch_reference: tuple[Reference, _BatchSteps]
) -> None:
    ref, steps = batch_reference
    first_sync, _ = _first_batch(steps)
    pristine = Pristine("undo", fast_tmp)
    for point in (first_sync - 1, first_sync):  # the last temp write or link before the sync, and the sync
        crash_and_resume(ref, pristine.restore(), point, at_kill=_nothing_changed_yet(ref))
    record("crash-batch-before-renames", crash_points=2, points=[first_sync - 1, first_sync], bytes_lost=0)


@pytest.mark.slow
def test_kill_between_the_renames_of_a_batch_and_the_sync_of_their_folders(
    fast_tmp: Path, batch_reference: tuple[Reference, _BatchSteps]
) -> None:
    ref, steps = batch_reference
    _, renames = _first_batch(steps)
    pristine = Pristine("undo", fast_tmp)
    crash_and_resume(ref, pristine.restore(), renames[0], at_kill=_renamed_not_journaled(ref, 1))
    crash_and_resume(ref, pristine.restore(), renames[-1], at_kill=_renamed_not_journaled(ref, len(renames)))
    record("crash-batch-before-folder-sync", crash_points=2, points=[renames[0], renames[-1]], bytes_lost=0)

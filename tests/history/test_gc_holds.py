"""A gc run by another process while a command's scan is under way spares what the scan stored.

A scan stores the files it reads as it goes and names them in a record (the stat cache, the command's
snapshot, its changes) only once it is done. Another process's gc in between (the end of another session's
turn, a session deleted, ``turnback gc``) must not take those copies: the undo of what the command deleted
needs them. Planning an undo stores a file changed since, named only by the saved plan, the same way. The gc
here runs at the worst moment, from a store opened apart (as another process's is).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import turnback
from tests.conftest import TEST_KEY, Result, run_cli
from turnback.capture import commands, holds
from turnback.ops import plan as ops_plan

NOTES = b"the user's notes, written before the agent's command\n" * 20


@pytest.fixture
def gc_elsewhere(home: Path) -> Iterator[Callable[[], None]]:
    """Run a gc through a store opened apart from the test's engine (another process's connection)."""
    with turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False) as other:
        yield lambda: other.gc()


def _gc_before(monkeypatch: pytest.MonkeyPatch, name: str, gc: Callable[[], None], module: Any = commands) -> list[int]:
    """Make the gc run each time *module* (the capture code) calls *name* (after its scan, before its record);
    the runs."""
    runs: list[int] = []
    real = getattr(module, name)

    def gc_then_call(*args: Any, **kwargs: Any) -> Any:
        gc()
        runs.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, gc_then_call)
    return runs


def _undo_last_turn(engine: turnback.Engine, session: turnback.Session) -> None:
    plan = engine.plan_undo(session.id)
    engine.apply(plan)


@pytest.mark.parametrize("first", [True, False], ids=["first snapshot", "later scan"])
@pytest.mark.parametrize("known", [False, True], ids=["new content", "content stored before, named by nothing"])
def test_a_gc_between_the_scan_before_a_command_and_its_record_spares_what_undo_brings_back(
    engine: turnback.Engine,
    session: turnback.Session,
    project: Path,
    gc_elsewhere: Callable[[], None],
    monkeypatch: pytest.MonkeyPatch,
    first: bool,
    known: bool,
) -> None:
    if not first:
        engine.begin_turn(session.id)
        engine.run_command(session.id, ["true"])  # the stat cache, without the notes
        engine.end_turn(session.id)
    notes = project / "notes.txt"
    notes.write_bytes(NOTES)
    if known:  # a copy a deleted session left long ago, which only a gc would remove
        with engine.store.transaction():
            engine.store.blobs.put_bytes(NOTES)
        monkeypatch.setattr(holds, "CLOCK_STEP_NS", 0)  # (a hold spares what was stored a minute before it)
    runs = _gc_before(monkeypatch, "named_outside_paths", gc_elsewhere)
    engine.begin_turn(session.id)
    engine.run_command(session.id, ["rm", "notes.txt"])
    engine.end_turn(session.id)
    assert runs == [1] and not notes.exists()
    monkeypatch.undo()
    _undo_last_turn(engine, session)
    assert notes.read_bytes() == NOTES


def test_a_gc_between_the_scan_after_a_command_and_its_record_spares_what_it_made(
    engine: turnback.Engine,
    session: turnback.Session,
    project: Path,
    gc_elsewhere: Callable[[], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scan after a command stores what it made; a later command that deletes it is undone from that copy."""
    engine.begin_turn(session.id)
    engine.run_command(session.id, ["true"])
    runs = _gc_before(monkeypatch, "diff_snapshots", gc_elsewhere)
    engine.run_command(session.id, ["sh", "-c", "yes made by the command | head -n 50 > made.txt"])
    monkeypatch.undo()
    engine.end_turn(session.id)
    made = b"made by the command\n" * 50
    assert runs == [1] and (project / "made.txt").read_bytes() == made
    engine.begin_turn(session.id)
    engine.run_command(session.id, ["rm", "made.txt"])
    engine.end_turn(session.id)
    _undo_last_turn(engine, session)
    assert (project / "made.txt").read_bytes() == made


def test_a_gc_while_an_undo_is_planned_spares_the_copy_of_a_file_changed_since(
    engine: turnback.Engine,
    session: turnback.Session,
    project: Path,
    gc_elsewhere: Callable[[], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planning stores what a file the user changed since holds (its conflict is shown and checked from it);
    only the saved plan names it."""
    engine.begin_turn(session.id)
    engine.run_command(session.id, ["sh", "-c", "echo the agent > report.txt"])
    engine.end_turn(session.id)
    (project / "report.txt").write_bytes(b"the user's report, written after the agent\n" * 10)
    runs = _gc_before(monkeypatch, "finish_rows", gc_elsewhere, ops_plan)  # (planning's last step)
    plan = engine.plan_undo(session.id)
    (row,) = [row for row in plan.rows if row.path == "report.txt"]
    assert runs == [1] and row.conflict and row.expect is not None and row.expect.blob is not None
    assert engine.store.blobs.read_bytes(row.expect.blob) == b"the user's report, written after the agent\n" * 10


def test_turnback_gc_run_meanwhile_says_what_it_kept_for_the_running_scan(
    engine: turnback.Engine, session: turnback.Session, project: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.begin_turn(session.id)
    engine.run_command(session.id, ["true"])
    (project / "notes.txt").write_bytes(NOTES)
    said: list[Result] = []
    monkeypatch.setattr(holds, "CLOCK_STEP_NS", 0)  # (what the first command stored is not held)
    _gc_before(monkeypatch, "named_outside_paths", lambda: said.append(run_cli(home, "gc", cwd=project)))
    engine.run_command(session.id, ["rm", "notes.txt"])
    (gc,) = said
    assert gc.rc == 0
    assert gc.lines == ["reclaimed 0 copies (0 B); 1 copy a running scan stored is kept until it is done"]
    monkeypatch.undo()
    later = run_cli(home, "gc", "--json", cwd=project)
    assert later.rc == 0 and later.json()["held"] == 0

"""Property tests: undoing every turn puts the project back, and never loses a user's edit.

Each example builds its own store and project in a temp folder (hypothesis
runs many examples inside one test call, so function-scoped fixtures would
be shared between them), plays a generated sequence of file-tool calls over
one to four turns against the real library, then undoes every turn.

- (a) agent calls only: the project equals its start state exactly, and
  every undo row is done;
- (b) with user edits between calls: bytes a user wrote survive with a
  ``skip`` row, every other path is back at its start state; the same for
  every kind of user edit (deletions, write-backs of an earlier version),
  then a forced undo finishes the job;
- (b, force): the start state, and the user's version in the trash.

Profiles: ``dev`` (the default) and ``ci``, chosen with ``HYPOTHESIS_PROFILE``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import turnback
from tests.conftest import TEST_KEY, make_project, tree_state

# -- profiles -------------------------------------------------------------------------------

_COMMON: dict[str, Any] = {
    "deadline": None,
    # sealed_env (autouse, function-scoped) only points TURNBACK_* into tmp_path; every example
    # opens its own store and project, so sharing it between examples is harmless.
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
}
settings.register_profile("dev", max_examples=25, **_COMMON)
settings.register_profile("ci", max_examples=60, **_COMMON)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# -- the paths a scenario works on ----------------------------------------------------------

# In scenarios with user edits, file paths and folder paths are kept apart: no file path is a
# folder path or lies under a file path, so the agent never turns a user's file into a folder.
FILES = (
    "README.md",
    "src/main.py",
    "src/pkg/__init__.py",
    "src/pkg/crlf.txt",
    "docs/guide.md",
    "logo.bin",
    "run.sh",
    "link-to-readme",
    "new.txt",
    "src/new.py",
    "src/pkg/extra.bin",
    "docs/sub/x.md",
    "deep/a/b.txt",
    "deep/c.bin",
)
DIRS = ("src", "src/pkg", "docs", "docs/sub", "deep", "deep/a", "empty", "empty/nested/dir")
SWAP = ("swap", "swap/inner.txt")
"""Paths used both as a file and as a folder, in scenarios without user edits."""

State = tuple[str, bytes | str | None, int] | None
"""One path as ``tree_state`` describes it; None when nothing is there."""
Step = tuple[Any, ...]
Turns = list[list[Step]]
Scenario = tuple[Turns, list[Step]]
"""Turns (agent calls and user edits), then user edits after the last turn."""

# -- strategies -----------------------------------------------------------------------------

_line = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=8)
_text_bytes = st.builds(
    lambda lines, eol, final: (eol.join(lines) + (eol if final and lines else "")).encode("utf-8"),
    st.lists(_line, max_size=4),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
)
contents = st.one_of(st.just(b""), st.binary(max_size=48), _text_bytes)
"""Empty, binary, or text with LF or CRLF line ends, with or without a final newline."""
edit_texts = st.one_of(st.sampled_from(["", "\n", "\r\n", "x"]), st.text(st.characters(codec="utf-8"), max_size=6))


def agent_steps_on(file_paths: st.SearchStrategy[str], dir_paths: st.SearchStrategy[str]) -> st.SearchStrategy[Step]:
    """One file-tool call: write, edit, delete, move or mkdir (the engine may refuse it)."""
    return st.one_of(
        st.tuples(st.just("write"), file_paths, contents),
        st.tuples(st.just("edit"), file_paths, st.integers(0, 1023), st.integers(1, 16), edit_texts, st.booleans()),
        st.tuples(st.just("delete"), st.one_of(file_paths, dir_paths)),
        st.tuples(st.just("move"), file_paths, file_paths),
        st.tuples(st.just("mkdir"), dir_paths),
    )


LAST = "@last"
"""In a user step: the path the agent's latest recorded call changed last."""


def user_steps_on(file_paths: st.SearchStrategy[str], *, write_back: bool) -> st.SearchStrategy[Step]:
    """One edit behind turnback's back: write new bytes, delete, or (*write_back*) write an earlier version."""
    file_paths = st.one_of(file_paths, st.just(LAST))
    steps = [
        st.tuples(st.just("user_write"), file_paths, contents),
        st.tuples(st.just("user_delete"), file_paths),
    ]
    if write_back:
        steps.append(st.tuples(st.just("user_write_back"), file_paths, st.integers(0, 15)))
    return st.one_of(*steps)


def focus(draw: st.DrawFn, pool: tuple[str, ...], most: int, also: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    """A few paths of *pool* (and *also*) for one scenario, so that its calls meet on the same paths."""
    return st.sampled_from(draw(st.lists(st.sampled_from(pool), min_size=1, max_size=most, unique=True)) + list(also))


@st.composite
def plain_scenarios(draw: st.DrawFn) -> Turns:
    """Turns of agent calls only. File and folder paths are mixed: a path may be a file, then a folder."""
    swap = SWAP if draw(st.booleans()) else ()
    steps = agent_steps_on(focus(draw, FILES + DIRS, 6, swap), focus(draw, DIRS + FILES, 3, swap))
    return draw(st.lists(st.lists(steps, max_size=8), min_size=1, max_size=4))


@st.composite
def user_scenarios(draw: st.DrawFn, *, write_back: bool) -> Scenario:
    """Turns of agent calls with user edits mixed in, and user edits after the last turn."""
    file_paths = focus(draw, FILES, 6)
    agent = agent_steps_on(file_paths, focus(draw, DIRS, 3))
    user = user_steps_on(file_paths, write_back=write_back)
    turns = draw(st.lists(st.lists(st.one_of(agent, agent, user), max_size=7), min_size=1, max_size=4))
    return turns, draw(st.lists(user, min_size=1, max_size=3))


# -- playing a scenario ---------------------------------------------------------------------


@dataclass
class World:
    engine: turnback.Engine
    project: Path
    session: turnback.Session
    start: dict[str, tuple[str, bytes | str | None, int]]
    agent_before: dict[str, State] = field(default_factory=dict)
    """Each path the agent changed: what it held just before the agent's last call on it."""
    agent_after: dict[str, State] = field(default_factory=dict)
    """Each path the agent changed: what the agent's last call on it left there."""
    user_after: dict[str, State] = field(default_factory=dict)
    """Each path the user changed: what it held after the user's last edit of it."""
    versions: dict[str, list[bytes]] = field(default_factory=dict)
    """Each path's file contents so far (at the start and after agent calls), oldest first."""
    user_edits: int = 0
    last_agent_path: str | None = None

    @property
    def sid(self) -> Any:
        return self.session.id

    def state(self, rel: str) -> State:
        return tree_state(self.project).get(rel)

    def seen(self, states: dict[str, tuple[str, bytes | str | None, int]], paths: Sequence[str] | None = None) -> None:
        for rel in states if paths is None else paths:
            state = states.get(rel)
            if state is not None and state[0] == "file":
                assert isinstance(state[1], bytes)
                known = self.versions.setdefault(rel, [])
                if state[1] not in known:
                    known.append(state[1])


@contextmanager
def world() -> Iterator[World]:
    with tempfile.TemporaryDirectory(prefix="turnback-prop-") as tmp:
        base = Path(tmp).resolve()
        project = base / "project"
        project.mkdir()
        make_project(project)
        engine = turnback.Engine.open(str(base / "store"), key_secret=TEST_KEY, try_keyring=False)
        try:
            session = engine.new_session(str(project), title="property")
            w = World(engine, project, session, tree_state(project))
            w.seen(w.start)
            yield w
        finally:
            engine.close()


def _edit_old_text(project: Path, rel: str, start: int, length: int) -> str:
    """A piece of the file's current text to replace (start and length wrap around its size)."""
    path = project / rel
    if path.is_symlink() or not path.is_file():
        return "x"  # the engine refuses: no such file, a folder, or a link
    data = path.read_bytes()
    if not data:
        return "x"
    start %= len(data)
    for size in range(length, 0, -1):
        try:
            return data[start : start + size].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return "x"


def agent_call(w: World, step: Step) -> turnback.Call:
    engine, sid, cwd = w.engine, w.sid, str(w.project)
    kind = step[0]
    if kind == "write":
        return engine.write(sid, step[1], step[2], cwd=cwd)
    if kind == "edit":
        _, rel, start, length, new, replace_all = step
        old = _edit_old_text(w.project, rel, start, length)
        return engine.edit(sid, rel, old, new, replace_all=replace_all, cwd=cwd)
    if kind == "delete":
        return engine.delete(sid, step[1], cwd=cwd)
    if kind == "move":
        return engine.move(sid, step[1], step[2], cwd=cwd)
    assert kind == "mkdir"
    return engine.mkdir(sid, step[1], cwd=cwd)


def play_agent(w: World, step: Step) -> None:
    """Run one agent call; a request the engine refuses is skipped, and must have changed nothing."""
    paths = set(step[1:3]) if step[0] == "move" else {step[1]}
    if paths & w.user_after.keys():
        return  # the agent never touches a path after the user edited it (see the oracle below)
    before = tree_state(w.project)
    try:
        call = agent_call(w, step)
    except turnback.TurnbackError:
        assert tree_state(w.project) == before, f"a refused {step[0]} changed the project"
        event(f"agent {step[0]}: refused")
        return
    event(f"agent {step[0]}: recorded")
    after = tree_state(w.project)
    changed = [change.path for change in call.changes]
    for rel in changed:
        assert rel not in w.user_after, f"{step} changed {rel}, which the user edited"
        w.agent_before[rel] = before.get(rel)
        w.agent_after[rel] = after.get(rel)
    w.seen(after, changed)
    w.last_agent_path = changed[-1] if changed else w.last_agent_path


def play_user(w: World, step: Step) -> None:
    """Edit the project behind turnback's back: write new (unique) bytes, an earlier version, or delete."""
    kind, rel = step[0], w.last_agent_path if step[1] == LAST else step[1]
    if rel is None:
        return
    path = w.project / rel
    if kind == "user_delete":
        if not os.path.lexists(path) or (path.is_dir() and not path.is_symlink()):
            return
        path.unlink()
    else:
        if not path.parent.is_dir() or path.parent.is_symlink() or (path.is_dir() and not path.is_symlink()):
            return
        if kind == "user_write":
            w.user_edits += 1
            data = b"user edit %d\n" % w.user_edits + step[2]
        else:
            known = w.versions.get(rel)
            if not known:
                return
            data = known[step[2] % len(known)]
        if path.is_symlink():
            path.unlink()  # replace the link itself, never write through it
        path.write_bytes(data)
    w.user_after[rel] = w.state(rel)


def play(w: World, turns: Turns, after: Sequence[Step] = ()) -> None:
    for number, steps in enumerate(turns, 1):
        w.engine.begin_turn(w.sid, f"turn {number}")
        for step in steps:
            if step[0].startswith("user_"):
                play_user(w, step)
            else:
                play_agent(w, step)
        w.engine.end_turn(w.sid)
    for step in after:
        play_user(w, step)


def undo_by_stack(w: World, *, force: bool, limit: int) -> list[turnback.OpResult]:
    """``turnback undo`` again and again, until there is nothing left to undo.

    Stops early, after an operation that changed nothing: the newest pending turn had every
    row skipped, so it stays pending and plain ``undo`` would offer it again and again.
    """
    results: list[turnback.OpResult] = []
    for _ in range(limit):
        try:
            plan = w.engine.plan_undo(w.sid, force=force)
        except turnback.NothingToDoError:
            return results
        result = w.engine.apply(plan)
        results.append(result)
        if not result.changed:
            return results
    raise AssertionError(f"undo still had work after {limit} operations")


# -- (a) without user edits: undoing every turn restores the project exactly ---------------


@PROFILE
@given(turns=plain_scenarios())
def test_undoing_every_turn_restores_the_start_tree(turns: Turns) -> None:
    with world() as w:
        play(w, turns)
        with_changes = [t for t in w.engine.log(w.sid) if t.changes]
        kinds: dict[str, set[str]] = {}
        for change in (c for t in with_changes for c in t.changes):
            kinds.setdefault(change.path, set()).update({change.before.kind, change.after.kind if change.after else ""})
        if any(len(k & {"file", "dir", "symlink"}) > 1 for k in kinds.values()):
            event("a path changed kind (file, folder, link)")

        results = undo_by_stack(w, force=False, limit=len(turns) + 1)
        assert len(results) == len(with_changes), "each undo takes back one whole turn"
        for result in results:
            for row in result.plan.rows:
                assert row.action in ("restore", "trash", "mark"), (row.path, row.action, row.reason)
                assert row.status == "done", (row.path, row.action, row.status, row.reason)
        assert tree_state(w.project) == w.start
        with pytest.raises(turnback.NothingToDoError):
            w.engine.plan_undo(w.sid)


# -- (b) with user edits ---------------------------------------------------------------------
#
# The oracle. The agent never touches a path again once the user has edited it, so every user
# edit of a path comes after the agent's last call on it. Let B be what the path held just
# before that last call, A what the call left there, and U what the user left. Undo walks
# calls newest first, and the first row of the path compares U with A and B:
# - U is neither A nor B: the user changed the path after the agent. Undo must skip it (a
#   force_only skip row), and the rows below stop, so the path keeps U. With force, U goes
#   to the operation's trash and the path goes back to its start state.
# - U == A (the user's edits cancel out) or U == B (the path already holds what the call
#   replaced: "mark"): undo goes on as if the user had done nothing, to the start state.
# New bytes a user writes are unique, so they are never A or B; a deletion or a write-back of
# an earlier version can be. A path the user edited that the agent never touched keeps U.
# Every other path ends at its start state, except the folders above a user's file, which
# cannot be removed: each must still be a folder (and equal its start state if it had one).


def user_state_stands(w: World, rel: str) -> bool:
    """Whether the user's last edit of *rel* conflicts with the agent's: undo must keep it unless forced."""
    if rel not in w.agent_before:
        return True
    return w.user_after[rel] not in (w.agent_before[rel], w.agent_after[rel])


def expected_end(w: World, rel: str, *, forced: bool) -> State:
    """What *rel*, which the user edited, holds once every turn is undone (see the oracle)."""
    if rel in w.agent_before and (forced or not user_state_stands(w, rel)):
        return w.start.get(rel)
    return w.user_after[rel]


def undo_everything(w: World, *, force: bool, turn_count: int) -> list[turnback.OpResult]:
    """``turnback undo`` until it stops; if a turn blocks it (all rows skipped), ``undo --from 1``."""
    results = undo_by_stack(w, force=force, limit=turn_count + 1)
    if results and not results[-1].changed:
        event("plain undo blocked by a turn whose rows were all skipped; undo --from 1 for the rest")
        try:
            results.append(w.engine.apply(w.engine.plan_undo(w.sid, from_turn=1, force=force)))
        except turnback.NothingToDoError:
            pass
    return results


def skipped_paths(results: list[turnback.OpResult]) -> set[str]:
    return {row.path for r in results for row in r.plan.rows if row.action == "skip" and row.force_only}


def check_other_paths(w: World, end: dict[str, tuple[str, bytes | str | None, int]], *, forced: bool) -> None:
    """Every path the user did not edit is at its start state, but folders above a user's file stay, and
    nothing is below a user's file (one the user wrote where the agent removed a folder: ``LAST``)."""
    kept = {rel for rel in w.user_after if expected_end(w, rel, forced=forced) is not None}
    holders = {"/".join(rel.split("/")[:i]) for rel in kept for i in range(1, rel.count("/") + 1)}
    files = [rel for rel in kept if (expected_end(w, rel, forced=forced) or ("absent",))[0] != "dir"]
    for rel in sorted((w.start.keys() | end.keys()) - w.user_after.keys()):
        above = [file for file in files if rel.startswith(file + "/")]
        if above:
            assert rel not in end, f"{rel} is below the user's file {above[0]}, so nothing can be there"
        elif rel in holders and rel not in w.start:
            assert end.get(rel, ("absent",))[0] == "dir", f"{rel} holds a user's file, so it must stay a folder"
        else:
            assert end.get(rel) == w.start.get(rel), f"{rel} is not back at its start state"


def note_user_edits(w: World) -> None:
    for rel in w.user_after:
        if rel not in w.agent_before:
            event("user edit of a path the agent left alone")
        elif user_state_stands(w, rel):
            event("user edit after the agent: a conflict")
        else:
            event("user edit after the agent that left A or B")


@PROFILE
@given(scenario=user_scenarios(write_back=False))
def test_undo_keeps_the_bytes_a_user_wrote(scenario: Scenario) -> None:
    """(b) New bytes a user wrote are never overwritten, and are reported as skipped."""
    turns, after = scenario
    with world() as w:
        play(w, turns, after)
        note_user_edits(w)
        results = undo_everything(w, force=False, turn_count=len(turns))
        end = tree_state(w.project)
        skipped = skipped_paths(results)
        for rel, user_state in w.user_after.items():
            if user_state is None:
                continue  # a deletion: see test_undo_keeps_every_user_edit
            assert end.get(rel) == user_state, f"{rel}: the user's bytes were lost"
            if rel in w.agent_before:
                assert rel in skipped, f"{rel}: the user changed it after the agent, but undo reported no skip"
        check_other_paths(w, end, forced=False)

        # Undoing again changes nothing on disk: what was skipped stays skipped.
        try:
            w.engine.apply(w.engine.plan_undo(w.sid, from_turn=1))
        except turnback.NothingToDoError:
            pass
        assert tree_state(w.project) == end


@PROFILE
@given(scenario=user_scenarios(write_back=True))
@example(  # (1): README ends at its start content; the user's "A" is moved to the trash unforced
    scenario=(
        [
            [("write", "README.md", b"A\n"), ("write", "README.md", b"B\n")],
            [("write", "README.md", b"C\n"), ("write", "new.txt", b"n\n")],
        ],
        [("user_write_back", "README.md", 1)],  # README's versions: start, A, B, C; the user writes A back
    )
)
@example(  # (2): after undo, undo, undo --from 1 --force, new.txt holds b"a\n" instead of being absent
    scenario=(
        [[("write", "new.txt", b"a\n")], [("write", "new.txt", b"b\n"), ("write", "README.md", b"r\n")]],
        [("user_delete", "new.txt")],
    )
)
@example(  # (3): after undo and undo --from 1 --force, the empty folder docs/sub is left behind
    scenario=(
        [[("write", "docs/sub/x.md", b"a\n"), ("write", "docs/sub/x.md", b"b\n")]],
        [("user_delete", "docs/sub/x.md")],
    )
)
@example(  # (4): the user writes a file where the agent deleted a folder; what was in it cannot come back
    scenario=([[("delete", "docs/guide.md"), ("delete", "docs")]], [("user_write", LAST, b"")])
)
def test_undo_keeps_every_user_edit(scenario: Scenario) -> None:
    """(b) Every user edit after the agent stands (deletions and write-backs too); force then still finishes."""
    turns, after = scenario
    with world() as w:
        play(w, turns, after)
        note_user_edits(w)
        results = undo_everything(w, force=False, turn_count=len(turns))
        end = tree_state(w.project)
        skipped = skipped_paths(results)
        for rel in w.user_after:
            assert end.get(rel) == expected_end(w, rel, forced=False), f"{rel}: the user's edit was lost"
            if rel in w.agent_before and user_state_stands(w, rel):
                assert rel in skipped, f"{rel}: the user changed it after the agent, but undo reported no skip"
        check_other_paths(w, end, forced=False)

        # Forcing what was skipped then takes every path the agent touched back to its start state.
        try:
            w.engine.apply(w.engine.plan_undo(w.sid, from_turn=1, force=True))
        except turnback.NothingToDoError:
            pass
        end = tree_state(w.project)
        for rel in w.user_after:
            assert end.get(rel) == expected_end(w, rel, forced=True), f"{rel}: not at its start state after force"
        check_other_paths(w, end, forced=True)


@PROFILE
@given(scenario=user_scenarios(write_back=True))
def test_forced_undo_keeps_the_user_version_in_the_trash(scenario: Scenario) -> None:
    """(b, force) A forced undo puts back the start state, and the user's version is in the trash."""
    turns, after = scenario
    with world() as w:
        play(w, turns, after)
        note_user_edits(w)
        results = undo_everything(w, force=True, turn_count=len(turns))
        end = tree_state(w.project)
        for rel, user_state in w.user_after.items():
            assert end.get(rel) == expected_end(w, rel, forced=True), f"{rel}: wrong state after a forced undo"
            if rel not in w.agent_before or not user_state_stands(w, rel):
                continue
            forced = [
                (result, row)
                for result in results
                for row in result.plan.rows
                if row.path == rel and row.conflict and row.status == "done"
            ]
            assert len(forced) == 1, f"{rel}: expected one forced row, got {forced}"
            if user_state is None:
                continue  # the user deleted it: nothing to keep
            event("forced over a user's file")
            result, row = forced[0]
            assert result.trash_dir is not None and row.trash_name is not None, f"{rel}: nothing sent to the trash"
            assert row.trash_name == rel or row.trash_name.startswith(f"{rel}~"), row.trash_name
            kept = Path(result.trash_dir) / row.trash_name
            assert kept.read_bytes() == user_state[1], f"{rel}: the trash does not hold the user's version"
        check_other_paths(w, end, forced=True)

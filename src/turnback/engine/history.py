"""Reading a session's history: its turns and calls as shown, what a turn changed, the history tree's
active line, and what of a call is never shown (files .gitignore ignores). Nothing here records anything,
but the copies a view of a cut-short call needs (see :meth:`History.call_as_it_stands`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from turnback.catalog import Message
from turnback.errors import NothingToDoError, RefusedError, TurnbackError, UnsafePathError, UsageError
from turnback.fsio import Tree
from turnback.model import Call, CallId, FileState, OpId, Plan, Project, SessionId, Turn, TurnId, TurnSummary, short_id

from .values import CallHidden, TurnDiff

if TYPE_CHECKING:
    from .facade import Engine


class History:
    """The history facet of an :class:`~turnback.engine.Engine`."""

    def __init__(self, engine: Engine):
        self._engine = engine
        self._store = engine.store

    # -- turns -----------------------------------------------------------------------------

    def log(self, session_id: SessionId) -> list[Turn]:
        """The session's turns, oldest first, with their calls and changes."""
        return self._store.turns(session_id, with_calls=True)

    def turn(self, session_id: SessionId, ref: str) -> Turn:
        """The turn *ref* names in the session: its number, or a unique id prefix."""
        if ref.isdigit() and len(ref) < 12:
            return self._store.turn(self._store.turn_by_number(session_id, int(ref)).id, with_calls=True)
        turn = self._store.turn(TurnId(self._store.resolve_id("turns", ref, "turn")), with_calls=True)
        if turn.session_id != session_id:
            raise UsageError(Message("turn_of_another_session", turn=short_id(turn.id)))
        return turn

    def turn_summary(self, turn: Turn) -> TurnSummary:
        """``3 files changed, +24 -7 (docs +3)``, and notes for outside files and commands that ran unasked."""
        from turnback.render import views
        from turnback.render.summary import net_changes, summary_line

        changes = net_changes(turn.calls, self._engine.load)
        files = [c for c in changes if "dir" not in (c.before.kind, c.after.kind) and not c.outside]
        project = self._engine._sessions.project_of_session(turn.session_id)
        line = summary_line(changes, self._engine.config_for(project).groups)
        if line is None and turn.calls and self._store.session(turn.session_id).incognito:
            # An incognito session records no change, so "no files changed" would be a guess: say what is known.
            line = Message("incognito_turn_calls", count=len(turn.calls))
        return TurnSummary(
            files=len(files),
            added=sum(c.added for c in files),
            removed=sum(c.removed for c in files),
            line=line,
            notes=tuple(
                views.turn_notes(changes, unasked=any(c.unasked for c in turn.calls), project_root=project.root)
            ),
        )

    def turn_diff(self, session_id: SessionId, ref: str | None = None) -> TurnDiff:
        """What a turn changed (the newest, or the one *ref* names), with the files git ignores."""
        from turnback.render.summary import net_changes

        if ref is None:
            turns = self._store.turns(session_id)
            if not turns:
                raise NothingToDoError(Message("session_has_no_turn"))
            turn = self._store.turn(turns[-1].id, with_calls=True)
        else:
            turn = self.turn(session_id, ref)
        changes = net_changes(turn.calls, self._engine.load)
        project = self._engine._sessions.project_of_session(session_id)
        paths = [c.path for c in changes if not c.outside and "dir" not in (c.before.kind, c.after.kind)]
        ignored, note = self._ignored(project, paths)
        return TurnDiff(turn, tuple(changes), ignored, note)

    def _ignored(self, project: Project, paths: Sequence[str]) -> tuple[frozenset[str], Message | None]:
        from turnback.capture import git

        try:
            scratch = os.path.join(self._engine.home, "gitignore-scratch.git")
            return frozenset(git.ignored_paths(project.root, paths, scratch_git_dir=scratch)), None
        except UnsafePathError:
            return frozenset(paths), Message("ignored_unknown_no_git")

    def hidden_paths(self, session_id: SessionId, paths: Sequence[str]) -> frozenset[str]:
        """Which of *paths* the project's .gitignore files ignore: front ends never show their contents."""
        inside = [path for path in paths if not path.startswith("/")]
        return self._ignored(self._engine._sessions.project_of_session(session_id), inside)[0]

    # -- the history tree ------------------------------------------------------------------

    def active_line(self, session_id: SessionId) -> list[Turn]:
        """The turns from the session's first to its head, oldest first (without calls)."""
        session = self._store.session(session_id)
        by_id = {turn.id: turn for turn in self._store.turns(session_id)}
        line: list[Turn] = []
        current = session.head
        while current is not None and current in by_id:
            line.append(by_id[current])
            current = by_id[current].parent
        return list(reversed(line))

    def undo_next(self, session_id: SessionId) -> TurnId | None:
        """The turn a plain ``undo`` takes back now, by the stack rule the plan follows; None when there is none,
        or when that turn is still running (the undo is refused until it ends)."""
        from turnback.ops.plan import select_undo_turns

        changed = self._store.turns_with_changes(session_id)
        try:
            chosen = select_undo_turns(
                self.active_line(session_id), changed, number=None, from_number=None, force=False
            )
        except NothingToDoError:
            return None
        return None if chosen[0].status == "running" else chosen[0].id

    def turn_ref(self, session_id: SessionId, ref: str) -> Turn | None:
        """The turn *ref* names (a number, or an id prefix of any session, so a wrong one is named); 0: the start."""
        if ref.strip() in ("0", "start"):
            return None
        if ref.isdigit() and len(ref) < 12:
            return self._store.turn_by_number(session_id, int(ref))
        turn = self._store.turn(TurnId(self._store.resolve_id("turns", ref, "turn")))
        if turn.session_id != session_id:
            raise RefusedError(
                Message("turn_of_another_session_refused", turn=short_id(turn.id), session=short_id(session_id))
            )
        return turn

    def turn_number(self, session_id: SessionId, ref: int | str | None) -> int | None:
        """The number of the turn *ref* names (a number, or an id or unique prefix of one)."""
        if ref is None or isinstance(ref, int):
            return ref
        if ref.strip().isdigit() and len(ref.strip()) < 12:
            return int(ref)  # a number the session may not have: the undo says so in its words
        turn = self.turn_ref(session_id, ref)
        return 0 if turn is None else turn.number

    def files(self, session_id: SessionId) -> list[tuple[str, Message]]:
        """Each file the active line touched, and its state: as of, created in, deleted in turn N, or reverted."""
        latest: dict[str, Message] = {}
        touched: dict[str, None] = {}
        for turn in self.active_line(session_id):
            for call in self._store.calls_of_turn(turn.id):
                for change in call.changes:
                    if "dir" in (change.before.kind, change.after.kind if change.after else ""):
                        continue
                    touched.setdefault(change.path)
                    if not change.reverted:
                        latest[change.path] = Message(
                            "file_created_in"
                            if change.kind == "new"
                            else ("file_deleted_in" if change.kind == "deleted" else "file_as_of"),
                            number=turn.number,
                        )
        return [(path, latest.get(path) or Message("file_reverted")) for path in touched]

    # -- operations ------------------------------------------------------------------------

    def operations(self, session_id: SessionId) -> list[Plan]:
        """The session's applied operations, oldest first."""
        return [self._store.load_plan(op_id) for op_id, *_ in self._store.ops_of_session(session_id)]

    def taken_back_by(self, session_id: SessionId) -> dict[str, str]:
        """Which operation took back which: operation id -> the redo's id."""
        return {op_id: by for op_id, _, _, _, by in self._store.ops_of_session(session_id) if by}

    def plan(self, op_ref: str) -> Plan:
        """A stored plan (or operation) by id prefix."""
        return self._store.load_plan(OpId(self._store.resolve_id("ops", op_ref, "operation")))

    # -- calls -----------------------------------------------------------------------------

    def call(self, ref: str) -> Call:
        """The call whose id starts with *ref*, with its changes."""
        return self._store.call(CallId(self._store.resolve_id("calls", ref, "call")))

    def as_it_stands(self, call: Call) -> Call:
        """*call* as shown: a harness's ``call before`` whose ``call after`` never came left its files' later
        state unknown (drawn as a deletion, counted as nothing); what they hold now is shown instead.

        Only shown: the record keeps the state unknown, so an undo still treats the call as cut short. What
        the files hold is stored as content (a view draws a diff from the store's copies).
        """
        if not call.cut_short or all(change.after is not None for change in call.changes):
            return call
        if self._store.session(call.session_id).incognito:
            return call  # no copy of anything is kept, not even to show
        with self._store.transaction():
            afters = self._unrecorded_afters(call)
        changes = tuple(
            change if now is None else change._replace(after=now)
            for change, now in zip(call.changes, afters, strict=True)
        )
        return call._replace(changes=changes)

    def _unrecorded_afters(self, call: Call) -> list[FileState | None]:
        """For each change of *call* whose later state was never recorded, what its path holds now (stored)."""
        from turnback.capture.states import capture_state

        tree = Tree(self._engine._sessions.project_of_session(call.session_id).root)
        afters: list[FileState | None] = []
        for change in call.changes:
            now = None
            if change.after is None and not change.outside and not change.not_covered:
                try:
                    now = capture_state(tree, change.path, self._store)
                except TurnbackError:
                    pass  # left unknown, shown as before
            afters.append(now)
        return afters

    def missing_input_reason(self, call: Call) -> Message:
        """Why a call has no recorded input."""
        if self._store.session(call.session_id).incognito:
            return Message("input_not_kept_incognito")
        if any(change.evicted for change in call.changes):
            return Message("input_dropped_by_cap")
        return Message("no_input_recorded")

    def call_hidden(self, call: Call) -> CallHidden:
        """Which files .gitignore ignores that the call is about, and so what of it is never shown.

        A tool call is about the paths its arguments name (whatever the tool,
        and whether it changed anything or failed) and the paths it changed; a
        command, about the paths it changed. When the kept part of a tool's
        clipped arguments names no path, turnback cannot tell: its text is hidden.
        """
        from turnback.render import inputs

        paths = [change.path for change in call.changes]
        named: list[str] | None = []
        if call.kind == "tool" and call.input is not None:
            named = inputs.named_paths(call.input)
        if named:
            project = self._engine._sessions.project_of_session(call.session_id)
            for path in named:
                try:
                    where = self._engine._paths.locate(project, path, None)
                except TurnbackError:
                    continue  # not a path in the project (the store, a link into it, empty): no .gitignore rules it
                if not where.outside:
                    paths.append(where.rel)
        hidden = self.hidden_paths(call.session_id, paths)
        return CallHidden(hidden, call.kind == "tool" and (named is None or bool(hidden)))

    def call_input(self, call: Call) -> str | None:
        """The call's raw arguments; of a call about a file .gitignore ignores, only its paths and flags."""
        from turnback.render import inputs

        if call.input is None:
            return None
        hidden = self.call_hidden(call)
        if not hidden.text:
            return call.input  # a command's input is its own words, which its title shows anyway
        if inputs.named_paths(call.input) is None:
            return inputs.unreadable()
        return inputs.without_contents(call.input)


__all__ = ["History"]

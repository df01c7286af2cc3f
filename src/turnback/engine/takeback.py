"""Taking changes back: one preparation for every plan (undo, revert, rollback, resend, redo), the plan
itself (``ops/plan.py``, read-only), stored; then apply (``ops/apply.py``) and what the assistant is told."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from turnback.capture.holds import BlobHold
from turnback.catalog import Message
from turnback.errors import NothingToDoError, RefusedError, TurnbackError, UsageError
from turnback.fsio import Tree
from turnback.model import (
    OP_NOUNS,
    FileState,
    OpId,
    OpResult,
    Plan,
    Project,
    Session,
    SessionId,
    Turn,
    TurnId,
    short_id,
)
from turnback.ops.busy import refuse_if_busy
from turnback.paths import RelPath

from .values import ResendFile, notice_text

if TYPE_CHECKING:
    from .facade import Engine


class Preparation(NamedTuple):
    """What every plan is made from: the session, its project and tree, and a new operation id."""

    session: Session
    project: Project
    tree: Tree
    op_id: Callable[[], OpId]


class TakeBack:
    """The taking-back facet of an :class:`~turnback.engine.Engine`."""

    def __init__(self, engine: Engine):
        self._engine = engine
        self._store = engine.store

    def interrupted(self, session_id: SessionId) -> Plan | None:
        """The session's operation that was applying when it was cut short, if any."""
        applying = self._store.ops_in_status(session_id, "applying")
        return self._store.load_plan(applying[0]) if applying else None

    def _plan(self, session_id: SessionId, make: Callable[[Preparation], Plan]) -> Plan:
        """The one preparation of every plan, then *make*'s plan, stored (not applied).

        Turns nothing runs any more are ended, busy marks whose holder ended are removed, and a session
        still busy is refused; commands whose end was never recorded are recorded, so the plan sees their
        changes. An operation of the session cut short while applying comes back instead of a new plan.
        """
        sessions = self._engine._sessions
        session = self._store.session(session_id)
        project = sessions.project_of(session)
        _refuse_elsewhere(project)
        sessions.settle_turns(session_id)
        sessions.remove_dead_busy_marks(session_id)
        refuse_if_busy(self._store, session_id)
        self._engine._commands.record_orphans(project)
        interrupted = self.interrupted(session_id)
        if interrupted is not None:
            return interrupted
        # What planning stores (a file changed since, to show and check its conflict) is named only by the saved
        # plan: held until then, so another process's gc meanwhile spares it.
        hold = BlobHold(self._store, project.id)
        hold.take()
        try:
            plan = make(Preparation(session, project, Tree(project.root), lambda: OpId(self._store.new_id())))
            self._store.save_plan(plan)
        finally:
            hold.release()
        return plan

    def _title_for(self) -> Callable[[Turn], str]:
        from turnback.render.summary import turn_title

        return lambda turn: turn_title(turn, self._engine.load)

    def plan_undo(
        self,
        session_id: SessionId,
        *,
        turn: int | str | None = None,
        from_turn: int | str | None = None,
        force: bool = False,
    ) -> Plan:
        """Plan an undo (stored, not applied). An interrupted operation of the session comes back first.

        *turn* and *from_turn* are a turn's number or its id (or a unique prefix), as ``log`` prints them.
        """
        from turnback.ops.plan import plan_undo, select_undo_turns

        history = self._engine._history

        def make(at: Preparation) -> Plan:
            number, from_number = history.turn_number(session_id, turn), history.turn_number(session_id, from_turn)
            turns = history.active_line(session_id)
            changed = self._store.turns_with_changes(session_id)
            if at.session.incognito and not changed:
                raise NothingToDoError(Message("undo_incognito_no_copies"))
            chosen = [
                self._store.turn(t.id, with_calls=True)
                for t in select_undo_turns(turns, changed, number=number, from_number=from_number, force=force)
            ]
            plan = plan_undo(
                self._store,
                at.tree,
                at.session,
                at.project,
                chosen,
                force=force,
                title_for=self._title_for(),
                op_id=at.op_id(),
            )
            return _with_commands_note(plan, chosen)

        return self._plan(session_id, make)

    def plan_revert(self, call_ref: str, *, anyway: bool = False) -> Plan:
        """Plan reverting one call (stored, not applied). An interrupted operation of its session comes back first."""
        from turnback.ops.plan import plan_revert
        from turnback.render.summary import call_title

        call = self._engine._history.call(call_ref)

        def make(at: Preparation) -> Plan:
            turn = self._store.turn(call.turn_id)
            return plan_revert(
                self._store,
                at.tree,
                at.session,
                at.project,
                call,
                turn,
                anyway=anyway,
                title=call_title(call),
                op_id=at.op_id(),
            )

        return self._plan(call.session_id, make)

    def plan_rollback(
        self, session_id: SessionId, target: str, *, expect_head: str | None = None, confirming: bool = False
    ) -> Plan:
        """Plan rolling back to turn *target* (number or id; ``0``: the session's start), stored, not applied.

        *expect_head* is the head the caller saw (number or id): a stale one is refused, nothing changed.
        *confirming* without *expect_head*: the head the session's last rollback preview saw is expected,
        so a turn that arrived after the preview is never rolled back unseen.
        """
        from turnback.ops.plan import plan_rollback

        history = self._engine._history

        def make(at: Preparation) -> Plan:
            head = at.session.head
            if expect_head is None and confirming:
                previewed = self._last_rollback_preview(session_id)
                if previewed is not None and previewed.head_from != head:
                    shown = self._store.turn(previewed.head_from).number if previewed.head_from else 0
                    raise RefusedError(
                        Message(
                            "rollback_head_moved_since_preview",
                            shown=shown,
                            head=self._head_number(head),
                            target=target,
                        )
                    )
            if expect_head is not None:
                seen = history.turn_ref(session_id, expect_head)
                if (seen.id if seen else None) != head:
                    raise RefusedError(Message("rollback_stale_head", head=self._head_number(head), given=expect_head))
            node = history.turn_ref(session_id, target)
            line = history.active_line(session_id)
            if node is not None and node.id not in {turn.id for turn in line}:
                raise RefusedError(Message("rollback_abandoned_branch", number=node.number))
            start = 0 if node is None else [turn.id for turn in line].index(node.id) + 1
            rewound = [self._store.turn(turn.id, with_calls=True) for turn in reversed(line[start:])]
            if not rewound:
                raise NothingToDoError(Message("rollback_nothing_head", number=node.number if node else 0))
            plan = plan_rollback(
                self._store,
                at.tree,
                at.session,
                at.project,
                node,
                rewound,
                title_for=self._title_for(),
                op_id=at.op_id(),
            )
            return _with_commands_note(plan, rewound)

        return self._plan(session_id, make)

    def _head_number(self, head: TurnId | None) -> int:
        return self._store.turn(head).number if head else 0

    def _last_rollback_preview(self, session_id: SessionId) -> Plan | None:
        """The session's newest rollback plan shown since its last applied operation (None: none kept)."""
        applied = self._store.ops_in_status(session_id, "done")
        for op_id in reversed(self._store.ops_in_status(session_id, "planned")):
            if applied and op_id < applied[-1]:
                break  # shown before an operation that changed the session: that preview is spent
            plan = self._store.load_plan(op_id)
            if plan.kind == "rollback":
                return plan
        return None

    def plan_resend(self, session_id: SessionId, target: str, *, mode: str = "revert") -> Plan:
        """Plan editing and resending turn *target*'s message: the calls from that turn on are taken away.

        *mode*: ``revert`` (revert their changes, newest call first; a change
        that cannot be reverted stops the resend), ``anyway`` (revert what can
        be, drop the copies of the rest), ``keep`` (leave the files).
        """
        from turnback.ops.plan import plan_resend

        if mode not in ("revert", "anyway", "keep"):
            raise UsageError(Message("resend_mode_unknown", mode=repr(mode)))
        history = self._engine._history

        def make(at: Preparation) -> Plan:
            edited = history.turn_ref(session_id, target)
            if edited is None:
                raise UsageError(Message("resend_give_turn"))
            line = history.active_line(session_id)
            ids = [turn.id for turn in line]
            if edited.id not in ids:
                raise RefusedError(Message("resend_abandoned_branch", number=edited.number))
            dropped = [self._store.turn(turn.id, with_calls=True) for turn in reversed(line[ids.index(edited.id) :])]
            edited_turn = self._store.turn(edited.id)
            return plan_resend(
                self._store, at.tree, at.session, at.project, edited_turn, dropped, mode=mode, op_id=at.op_id()
            )

        return self._plan(session_id, make)

    def resend_files(self, plan: Plan) -> list[ResendFile]:
        """For a resend: each file its calls changed, once: how many calls, and the lines a revert adds and removes."""
        from turnback.render.diff import diff_bytes

        tree = Tree(self._store.project(plan.project_id).root)
        counts: dict[str, int] = {}
        first: dict[str, FileState] = {}
        outside: set[str] = set()
        evicted: set[str] = set()  # the earliest state's copy was dropped by the cap: a revert writes nothing back
        for turn_id in reversed(plan.turn_ids):
            for call in self._store.calls_of_turn(TurnId(turn_id)):
                for path in dict.fromkeys(c.path for c in call.changes if not c.reverted):
                    counts[path] = counts.get(path, 0) + 1
                for change in call.changes:
                    if not change.reverted:
                        if change.path not in first and change.evicted:
                            evicted.add(change.path)
                        first.setdefault(change.path, change.before)
                        if change.outside:
                            outside.add(change.path)
        files = []
        for name, calls in counts.items():
            before = first[name]
            if before.kind == "dir" or name in outside:
                continue
            if name in evicted:
                files.append(ResendFile(name, calls, 0, 0))
                continue
            try:
                now = tree.read_bytes(RelPath(name))
            except (OSError, TurnbackError):
                now = None
            earlier = self._engine.load(before.blob) if before.kind == "file" and before.blob else None
            diff = diff_bytes(now, earlier)
            files.append(ResendFile(name, calls, diff.added, diff.removed))
        return files

    def plan_redo(self, session_id: SessionId) -> Plan:
        """Plan taking back the session's newest operation (undo, revert, rollback, or a redo), stored, not applied."""
        from turnback.ops.plan import plan_redo

        def make(at: Preparation) -> Plan:
            op_id = self._store.newest_op_to_take_back(session_id)
            if op_id is None:
                raise NothingToDoError(Message("redo_nothing"))
            op = self._store.load_plan(op_id)
            if op.kind == "resend":
                raise RefusedError(Message("redo_resend_refused", op=short_id(op.id)))
            if op.moves_head and at.session.head != op.head_to:
                raise RefusedError(Message("redo_head_moved", kind=OP_NOUNS[op.kind], op=short_id(op.id)))
            return plan_redo(self._store, at.tree, at.session, at.project, op, op_id=at.op_id())

        return self._plan(session_id, make)

    def plan_again(self, shown: Plan, *, anyway: bool = False, mode: str | None = None) -> Plan:
        """*shown*, a plan the user saw, planned again as confirmed: over its conflicts (*anyway*: a revert's
        ``--anyway``, an undo's ``--force``) or, for a resend, with the choice *mode*. Stored, not applied.

        What the user confirmed is what *shown* showed: a path that holds something else now than *shown* saw,
        a row that would act on a path *shown* did not list, other turns, or a head that moved since, is
        refused (nothing changed). Applying then checks each row again, as for any plan.
        """
        if shown.kind == "revert" and shown.call_id is not None and mode is None:
            again = self.plan_revert(shown.call_id, anyway=anyway)
        elif shown.kind == "undo" and mode is None:
            newest_first = shown.turn_ids
            turn, from_turn = (newest_first[0], None) if len(newest_first) == 1 else (None, newest_first[-1])
            again = self.plan_undo(shown.session_id, turn=turn, from_turn=from_turn, force=anyway)
        elif shown.kind == "resend" and shown.resend_turn is not None and not anyway:
            again = self.plan_resend(shown.session_id, shown.resend_turn, mode=mode or shown.resend_mode or "revert")
        else:
            raise UsageError(Message("plan_again_not_for_kind", kind=OP_NOUNS[shown.kind]))
        seen = {(row.path, row.outside): row.expect for row in shown.rows}
        for row in again.rows:
            key = (row.path, row.outside)
            changed = key in seen and row.expect is not None and not row.expect.same_as(seen[key])
            if changed or (key not in seen and row.acts):
                raise RefusedError(Message("changed_since_shown", path=row.path, then=Message("plan_again")))
        if set(again.turn_ids) != set(shown.turn_ids) or again.head_from != shown.head_from:
            raise RefusedError(Message("changed_since_shown_turns", then=Message("plan_again")))
        return again

    def apply(self, plan: Plan) -> OpResult:
        """Apply a stored plan, row by row with compare-and-swap; resumes an interrupted one.

        After a revert (or an edit and resend) the assistant gets a notice per
        file (``Reverted the change to PATH``) and must read the file again
        before changing it; a file a service loads adds a note naming the
        service's own check. (An undo or a rollback rewinds the conversation
        with the files, so there is nothing to tell.)
        """
        from turnback.ops.apply import apply_plan
        from turnback.services import service_note

        project = self._store.project(plan.project_id)
        _refuse_elsewhere(project)
        result = apply_plan(self._store, Tree(project.root), plan)
        reverted = [
            row.path
            for row in result.plan.rows
            if row.status == "done" and row.action in ("restore", "trash") and row.ref is None
        ]
        if reverted and result.plan.kind in ("revert", "resend"):
            with self._store.transaction():
                self._store.add_notices(plan.session_id, [(path, notice_text(path)) for path in reverted])
        notes = [note for note in (service_note(path) for path in reverted) if note]
        return result._replace(notes=result.notes + tuple(notes))


def _refuse_elsewhere(project: Project) -> None:
    """Only the host a project's files are on may change them ("only the device that ran the call can revert
    it"): any other host sharing the store may look, and is told where to run it."""
    if project.other_host is not None:
        raise RefusedError(Message("host_files_elsewhere", host=project.other_host))


def _with_commands_note(plan: Plan, turns: Sequence[Turn]) -> Plan:
    """*plan* saying, once, that what the turns' commands did outside the recorded files is not undone."""
    from turnback.render.summary import commands_not_undone

    note = commands_not_undone([call for turn in turns for call in turn.calls])
    return plan._replace(notes=(*plan.notes, note)) if note else plan


__all__ = ["Preparation", "TakeBack"]

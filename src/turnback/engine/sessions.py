"""Projects, sessions and turns: registering a project, opening a session, beginning and ending a turn,
the turns nothing runs any more, busy marks and the assistant's notices."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from turnback.catalog import Message
from turnback.errors import BusyError, RefusedError, StoreError, UsageError
from turnback.model import CallId, Project, Session, SessionId, Turn, TurnId, TurnSummary, short_id
from turnback.ops.busy import (
    harness_runs,
    live_commands,
    live_running_turns,
    mark_interrupted_turns,
    remove_dead_busy_marks,
    session_apply_lock,
    settle_running_turns,
)
from turnback.procs import process_alive, process_start

from .values import AgentNotice, SessionPick, SessionStatus, stored_notice

if TYPE_CHECKING:
    from .facade import Engine

TURN_WAIT_S = 60.0
RESERVE_FULL = Message("store_disk_full")  # a turn ended only after the store's disk reserve was freed


class _HeldTurn(NamedTuple):
    """The turn a :meth:`Sessions.tool_turn` holds, and the calls made in it, to be marked done when it ends."""

    turn: Turn
    done: list[CallId]


class Sessions:
    """The sessions facet of an :class:`~turnback.engine.Engine`."""

    def __init__(self, engine: Engine):
        self._engine = engine
        self._store = engine.store
        self._held: dict[SessionId, _HeldTurn] = {}  # what each tool_turn of this engine holds while its call runs

    # -- projects and sessions -------------------------------------------------------------

    def init_project(self, root: str) -> tuple[Project, bool]:
        """Register the folder *root* as a project; returns the project and whether it is new."""
        return self._store.register_project(self._engine._paths.project_root(root))

    def project_of(self, session: Session) -> Project:
        return self._store.project(session.project_id)

    def project_of_session(self, session_id: SessionId) -> Project:
        return self._store.project(self._store.session(session_id).project_id)

    def new_session(
        self, project_root: str, *, title: str | None = None, actor: str | None = None, incognito: bool = False
    ) -> Session:
        """A new session in the project at *project_root* (registered on first use)."""
        project, _ = self.init_project(project_root)
        return self._store.create_session(project.id, actor=actor, title=title, incognito=incognito)

    def session(self, ref: str) -> Session:
        """The session whose id starts with *ref*."""
        return self._store.session(SessionId(self._store.resolve_id("sessions", ref, "session")))

    def pick_session(self, ref: str | None, cwd: str, *, with_turns: bool = False) -> SessionPick:
        """The session *ref* names, else the default session of the project holding *cwd*.

        For recording, the default is the most recently active session. For
        looking and taking back (*with_turns*), it is the most recently active
        session with turns: an empty newer one (an MCP server's start, a forked
        or read-only restart of a client) would hide the work in the one before.
        """
        if ref:
            return SessionPick(self.session(ref))
        project = self._store.project_containing(cwd)
        if project is None:
            raise UsageError(Message("cwd_in_no_project", path=cwd))
        sessions = self._store.sessions(project.id)
        if not sessions:
            raise UsageError(Message("project_has_no_session", root=project.root))
        if with_turns:
            default = self.default_session(sessions)
            return SessionPick(default, tuple(sessions[: sessions.index(default)]))
        return SessionPick(sessions[0])

    def default_session(self, sessions: Sequence[Session]) -> Session:
        """Of one project's *sessions* (most recently active first): the first with turns, else the first."""
        return next((session for session in sessions if self._store.turns(session.id)), sessions[0])

    def default_sessions(self, sessions: Sequence[Session]) -> set[SessionId]:
        """Of *sessions*, the default of each project among them: the one a bare undo, log or diff there acts on."""
        return {
            self.default_session([s for s in sessions if s.project_id == project_id]).id
            for project_id in {session.project_id for session in sessions}
        }

    def sessions(self, project_root: str | None = None) -> list[Session]:
        if project_root is None:
            return self._store.sessions()
        project = self._store.project_by_root(os.path.realpath(project_root))
        return self._store.sessions(project.id) if project else []

    def session_for(self, harness: str, external: str, project_root: str, *, title: str | None = None) -> Session:
        """The session a harness knows by its own id; made (and its project registered) on first use."""
        key = self._store.external_id(harness, external)
        session = self._store.session_by_external_id(key)
        if session is not None:
            return session
        session = self.new_session(project_root, title=title or f"{harness} session")
        with self._store.transaction():
            self._store.set_session_external_id(session.id, key)
        return self._store.session(session.id)

    def watched_project(self, path: str) -> Project:
        """The registered project holding *path*."""
        real = os.path.realpath(path)
        project = self._store.project_containing(real)
        if project is None:
            raise UsageError(Message("path_in_no_project", path=real))
        return project

    # -- turns -----------------------------------------------------------------------------

    def begin_turn(self, session_id: SessionId, message: str | None = None, *, holder_pid: int | None = None) -> Turn:
        """Begin a turn; it runs until :meth:`end_turn` or until the holding process ends.

        A turn that arrives while an undo applies waits for it (up to
        ``TURN_WAIT_S``) rather than fail: the message was already sent.
        """
        from turnback.capture import git

        with session_apply_lock(self._store, session_id, wait_s=TURN_WAIT_S):
            pass
        pid = holder_pid if holder_pid is not None else os.getpid()
        refs = git.read_refs(self.project_of_session(session_id).root)
        with self._store.transaction():  # the check and the new turn in one write: two begins cannot both pass
            _, running = settle_running_turns(self._store, session_id)
            if running:
                raise BusyError(Message("turn_still_running", number=running[-1].number))
            return self._store.create_turn(
                session_id, message, holder_pid=pid, holder_start=process_start(pid), refs=refs
            )

    def running_turn(self, session_id: SessionId) -> Turn:
        """The session's running turn whose holder lives; refused when none runs. Reads only: a turn whose
        holder ended is marked interrupted by :meth:`mark_interrupted`, which the caller runs first."""
        running = live_running_turns(self._store, session_id)
        if not running:
            from turnback.render.text import interrupted_reason

            turns = self._store.turns(session_id)
            if turns and turns[-1].status == "interrupted":
                raise RefusedError(
                    Message("no_turn_running_interrupted", number=turns[-1].number, why=interrupted_reason(turns[-1]))
                )
            raise RefusedError(Message("no_turn_running"))
        return running[-1]

    def mark_interrupted(self, session_id: SessionId) -> list[Turn]:
        """Mark the session's running turns whose holder has ended as interrupted; the turns marked."""
        return mark_interrupted_turns(self._store, session_id)

    def current_turn(self, session_id: SessionId) -> Turn:
        """The turn a call of the session joins: the running one, once those whose holder ended are marked
        (inside :meth:`tool_turn`, the turn it holds: this process runs it, and no other turn can begin)."""
        held = self._held.get(session_id)
        if held is not None:
            return held.turn
        self.mark_interrupted(session_id)
        return self.running_turn(session_id)

    def done_later(self, session_id: SessionId) -> list[CallId] | None:
        """Where the session's file tools leave their calls for the :meth:`tool_turn` that holds it to mark
        done; ``None`` outside one (each call marks itself done)."""
        held = self._held.get(session_id)
        return held.done if held is not None else None

    def end_turn(self, session_id: SessionId) -> tuple[Turn, TurnSummary]:
        """End the running turn: record the git refs it moved, and sum up what it changed."""
        from turnback.capture import git
        from turnback.render.summary import call_title

        turn = self.current_turn(session_id)
        project = self.project_of_session(session_id)
        before = self._store.refs_at_turn_start(turn.id)
        after = git.read_refs(project.root) if before is not None else None

        def record_end() -> None:
            with self._store.transaction():
                if before is not None and after is not None:
                    moved = [(m.name, m.target, m.expect) for m in git.ref_moves(before, after)]
                    self._store.add_ref_changes(turn.id, moved)
                self._store.end_turn(turn.id, "ended")

        try:
            record_end()
        except StoreError:
            if not self._store.use_reserve():  # a full disk must not leave the turn running (undo busy)
                raise
            record_end()
        warnings: list[Message] = []
        try:
            self._engine.enforce_caps(project)
        except StoreError as exc:  # the turn has ended; the cap is enforced again at the next end
            warnings.append(Message("cap_not_enforced", why=exc.message))
        if self._store.reserve_used:
            warnings.append(RESERVE_FULL)
        ended = self._store.turn(turn.id, with_calls=True)
        cut_short = [
            Message("call_maybe_cut_short", call=short_id(call.id), title=call_title(call))
            for call in ended.calls
            if call.kind == "tool" and call.status == "running"
        ]
        history = self._engine._history
        summary = history.turn_summary(ended._replace(calls=tuple(map(history.as_it_stands, ended.calls))))
        return ended, summary._replace(notes=(*summary.notes, *cut_short, *warnings))

    def settle_turns(self, session_id: SessionId) -> list[Turn]:
        """End the session's running turns that nothing runs any more: their holder (the agent) is gone, or a
        command a harness began (:meth:`~turnback.engine.Engine.begin_command`) is left running and no process
        of the holder runs it (:func:`~turnback.ops.busy.harness_runs`). Their commands are recorded now; the
        turns that were ended.

        A harness sends no event when the agent is killed or its call is interrupted, so without this the
        turn would stay running (and undo refused) until the agent's next event.
        """
        settled = []
        for turn, holder_start in self._store.running_turns(session_id):
            pending = [
                call
                for call in self._store.calls_of_turn(turn.id)
                if call.kind == "command" and call.status == "running" and call.pid is None
            ]
            holder = turn.holder_pid
            gone = holder is not None and not process_alive(holder, holder_start)
            if not gone and not (pending and holder is not None and not harness_runs(self._store, pending, holder)):
                continue
            for call in pending:
                note = Message("agent_stopped_during_command" if gone else "command_cut_short_recorded_later")
                with contextlib.suppress(StoreError):
                    self._engine._commands.finish_command(call.id, error=note)
            with self._store.transaction():
                self._store.end_turn(turn.id, "interrupted")
            settled.append(turn)
        return settled

    @contextlib.contextmanager
    def tool_turn(self, session_id: SessionId, *, gap_s: float, holder_pid: int | None = None) -> Iterator[Turn]:
        """A turn that runs only while one tool call runs (an MCP server's): the session's running turn if
        someone began one, else the last one again if it ended less than *gap_s* ago and is not undone, else
        a new one. It is ended when the call returns, so an idle server never blocks an undo; the file tools'
        calls made in it are marked done in that same write (until then they show as running, as the turn)."""
        pid = holder_pid if holder_pid is not None else os.getpid()
        _, running = settle_running_turns(self._store, session_id)
        if running:
            turn = running[-1]
        else:
            last = self._store.last_turn(session_id)
            fresh = (
                last is not None
                and last.ended_at is not None
                and last.undone == "no"
                and not last.resent
                and (self._store.now() - last.ended_at) / 1e9 < gap_s
            )
            if last is not None and fresh and self._reopen_tool_turn(last.id, pid):
                turn = last._replace(status="running", ended_at=None, holder_pid=pid)
            else:
                turn = self.begin_turn(session_id, None, holder_pid=pid)
        outer = self._held.get(session_id)
        done: list[CallId] = []
        self._held[session_id] = _HeldTurn(turn, done)
        try:
            yield turn
        finally:
            if outer is None:
                del self._held[session_id]
            else:
                self._held[session_id] = outer
            # Not synced on its own (each sync costs a write call milliseconds): losing these marks to a power
            # cut leaves the turn "running" for a holder that is gone, which counts as not running, and its
            # calls "may be cut short", which is handled.
            with self._store.transaction(durable=False):
                for call_id in done:
                    self._store.finish_call(call_id, "done")
                self._store.end_turn(turn.id, "ended")

    def _reopen_tool_turn(self, turn_id: TurnId, pid: int) -> bool:
        """Reopen a tool turn without a sync of its own: the call's record, committed durably next, makes it
        durable too (a WAL sync covers the commits before it); lost before that, no call was made in it."""
        with self._store.transaction(durable=False):
            return self._store.reopen_turn(turn_id, holder_pid=pid, holder_start=process_start(pid))

    # -- busy marks, notices, status -------------------------------------------------------

    def busy_start(self, session_id: SessionId, reason: Message | str, *, holder_pid: int | None = None) -> str:
        """Mark the session busy (compaction, an approval waiting): undo, revert, rollback and resend refuse."""
        why = _busy_reason(reason)
        self._store.session(session_id)
        pid = holder_pid if holder_pid is not None else os.getpid()
        return self._store.add_busy_mark(session_id, why.dumps(), pid, process_start(pid))

    def busy_end(self, session_id: SessionId, reason: Message | str | None = None) -> int:
        """End the session's busy marks (those with *reason*, or all); how many ended."""
        wanted = _busy_reason(reason) if reason is not None else None
        ended = 0
        with self._store.transaction():
            for mark_id, mark_reason, _, _ in self._store.busy_marks(session_id):
                if wanted is None or Message.loads(mark_reason) == wanted:
                    self._store.remove_busy_mark(mark_id)
                    ended += 1
        return ended

    def remove_dead_busy_marks(self, session_id: SessionId) -> None:
        """Remove the session's busy marks whose holder ended without ending them."""
        remove_dead_busy_marks(self._store, session_id)

    def take_notices(self, session_id: SessionId) -> list[AgentNotice]:
        """Pending notices for the assistant (``Reverted the change to PATH``), each delivered once."""
        return [stored_notice(path, text) for path, text in self._store.take_notices(session_id)]

    def catch_up(self, session_id: SessionId) -> None:
        """Record what happened unseen before the session is looked at: turns whose holder ended are
        interrupted, and commands whose end turnback never recorded (it was killed) are recorded now."""
        self.mark_interrupted(session_id)
        self._engine._commands.record_orphans(self.project_of_session(session_id))

    def status(self, session_id: SessionId) -> SessionStatus:
        """What is going on in a session: its head, what runs, what marks it busy, an interrupted operation.

        Reads only: :meth:`catch_up` records first what happened unseen."""
        session = self._store.session(session_id)
        return SessionStatus(
            session=session,
            head=self._store.turn(session.head) if session.head else None,
            running=tuple(live_running_turns(self._store, session_id)),
            busy=tuple(Message.loads(reason) for _, reason, _, _ in self._store.busy_marks(session_id)),
            commands=tuple(live_commands(self._store, self.project_of(session).id)),
            interrupted=self._engine._takeback.interrupted(session_id),
            kept_bytes=self._engine.kept_bytes(),
        )


__all__ = ["TURN_WAIT_S", "Sessions"]


def _busy_reason(reason: Message | str) -> Message:
    """What a busy mark says: turnback's own message, or the text a harness or a user gave, trimmed."""
    if isinstance(reason, Message):
        return reason
    if not reason.strip():
        raise UsageError(Message("busy_needs_reason"))
    return Message("plain", text=reason.strip())

"""The engine: every verb a front end (CLI, hooks, MCP, HTTP) may call.

Front ends parse, call one method here, and print; the rules live here and
in the layers below (capture, ops, store, fsio). The engine never prints
and reads no environment: the caller passes the store folder and key.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from turnback.capture import calls as tools
from turnback.capture.calls import CallRecorder, CallTarget
from turnback.config import Config, load_config
from turnback.errors import BusyError, NothingToDoError, RefusedError, UnsafePathError, UsageError
from turnback.fsio import Tree
from turnback.model import (
    BlobId,
    Call,
    CallId,
    IdSource,
    OpId,
    OpResult,
    Plan,
    Project,
    ProjectId,
    Session,
    SessionId,
    Turn,
    TurnId,
    TurnSummary,
    short_id,
)
from turnback.ops.apply import apply_plan
from turnback.ops.busy import live_running_turns, refuse_if_busy
from turnback.ops.plan import plan_revert, plan_undo, select_undo_turns
from turnback.paths import RelPath, resolve_user_path
from turnback.procs import process_start
from turnback.render.summary import call_title, net_changes, summary_line, turn_title
from turnback.store import Store


class CallHandle:
    """A call whose files the harness writes itself: ``before(path)``, write, ``after(path)``, ``end()``."""

    def __init__(self, engine: Engine, recorder: CallRecorder, cwd: str | None):
        self._engine = engine
        self._recorder = recorder
        self._cwd = cwd
        self.id = recorder.id

    def _path(self, path: str) -> RelPath:
        return self._engine.resolve_path(self._recorder.target.project, path, self._cwd)

    def before(self, path: str) -> None:
        self._recorder.before(self._path(path))

    def after(self, path: str) -> None:
        self._recorder.after(self._path(path))

    def end(self, *, failed: str | None = None) -> Call:
        self._recorder.finish(failed=failed)
        return self._engine.call(self.id)

    def __enter__(self) -> CallHandle:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.end(failed=(str(exc) or type(exc).__name__) if exc is not None else None)


class Engine:
    """An open turnback store and the verbs that act on it. Use :meth:`open`; close when done."""

    def __init__(self, store: Store, config: Config | None = None):
        self.store = store
        self.config = config or load_config(store.home)
        self._real_home = os.path.realpath(store.home)

    @classmethod
    def open(
        cls,
        home: str,
        *,
        key_secret: str | None = None,
        try_keyring: bool = True,
        clock: Callable[[], int] | None = None,
        ids: IdSource | None = None,
    ) -> Engine:
        """Open the store in *home* (creating it on first use) with the given key secret, if any."""
        kwargs = {"clock": clock} if clock else {}
        store = Store.open(home, key_secret=key_secret, try_keyring=try_keyring, ids=ids, **kwargs)
        try:
            return cls(store)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def home(self) -> str:
        return self.store.home

    # -- content ---------------------------------------------------------------------------

    def load(self, blob: BlobId) -> bytes:
        """The content stored under *blob*."""
        return self.store.blobs.read_bytes(blob)

    # -- projects and sessions -------------------------------------------------------------

    def init_project(self, root: str) -> tuple[Project, bool]:
        """Register the folder *root* as a project; returns the project and whether it is new."""
        real = os.path.realpath(root)
        if not os.path.isdir(real):
            raise UsageError(f"{root} is not a folder")
        store_home = self._real_home
        if real == store_home or real.startswith(store_home + os.sep):
            raise UnsafePathError(f"{root} is inside turnback's store; a project cannot live there")
        return self.store.register_project(real)

    def project(self, project_id: ProjectId) -> Project:
        return self.store.project(project_id)

    def project_of(self, session: Session) -> Project:
        return self.store.project(session.project_id)

    def new_session(
        self,
        project_root: str,
        *,
        title: str | None = None,
        actor: str | None = None,
        incognito: bool = False,
    ) -> Session:
        """A new session in the project at *project_root* (registered on first use)."""
        project, _ = self.init_project(project_root)
        return self.store.create_session(project.id, actor=actor, title=title, incognito=incognito)

    def session(self, ref: str) -> Session:
        """The session whose id starts with *ref*."""
        return self.store.session(SessionId(self.store.resolve_id("sessions", ref, "session")))

    def find_session(self, ref: str | None, cwd: str) -> Session:
        """The session *ref* names, else the most recently active session of the project holding *cwd*."""
        if ref:
            return self.session(ref)
        project = self.store.project_containing(cwd)
        if project is None:
            raise UsageError(f"{cwd} is in no turnback project; give --session, or run turnback init in the project")
        sessions = self.store.sessions(project.id)
        if not sessions:
            raise UsageError(f"the project {project.root} has no session yet; start one with turnback session new")
        return sessions[0]

    def sessions(self, project_root: str | None = None) -> list[Session]:
        if project_root is None:
            return self.store.sessions()
        project = self.store.project_by_root(os.path.realpath(project_root))
        return self.store.sessions(project.id) if project else []

    # -- turns -----------------------------------------------------------------------------

    def begin_turn(self, session_id: SessionId, message: str | None = None, *, holder_pid: int | None = None) -> Turn:
        """Begin a turn; it runs until :meth:`end_turn` or until the holding process ends."""
        running = live_running_turns(self.store, session_id)
        if running:
            raise BusyError(
                f"turn {running[-1].number} is still running in this session; end it first (turnback turn end)"
            )
        pid = holder_pid if holder_pid is not None else os.getpid()
        return self.store.create_turn(session_id, message, holder_pid=pid, holder_start=process_start(pid))

    def running_turn(self, session_id: SessionId) -> Turn:
        running = live_running_turns(self.store, session_id)
        if not running:
            raise RefusedError("no turn is running in this session; begin one first (turnback turn begin)")
        return running[-1]

    def end_turn(self, session_id: SessionId) -> tuple[Turn, TurnSummary]:
        turn = self.running_turn(session_id)
        with self.store.transaction():
            self.store.end_turn(turn.id, "ended")
        ended = self.store.turn(turn.id, with_calls=True)
        return ended, self.turn_summary(ended)

    def turn_summary(self, turn: Turn) -> TurnSummary:
        changes = [c for c in net_changes(turn.calls, self.load) if "dir" not in (c.before.kind, c.after.kind)]
        return TurnSummary(
            files=len(changes),
            added=sum(c.added for c in changes),
            removed=sum(c.removed for c in changes),
            line=summary_line(changes, self.config.groups),
        )

    def turn(self, session_id: SessionId, ref: str) -> Turn:
        """The turn *ref* names in the session: its number, or a unique id prefix."""
        if ref.isdigit() and len(ref) < 12:
            return self.store.turn(self.store.turn_by_number(session_id, int(ref)).id, with_calls=True)
        turn = self.store.turn(TurnId(self.store.resolve_id("turns", ref, "turn")), with_calls=True)
        if turn.session_id != session_id:
            raise UsageError(f"turn {short_id(turn.id)} belongs to another session")
        return turn

    def log(self, session_id: SessionId) -> list[Turn]:
        """The session's turns, oldest first, with their calls and changes."""
        live_running_turns(self.store, session_id)  # marks turns whose holder died as interrupted
        return self.store.turns(session_id, with_calls=True)

    # -- file tools ------------------------------------------------------------------------

    def resolve_path(self, project: Project, path: str, cwd: str | None) -> RelPath:
        """A path typed by a user or agent, as a path in *project*; refused if outside it or in the store."""
        rel = resolve_user_path(project.root, cwd or project.root, path)
        absolute = os.path.join(project.root, rel)
        store_home = self._real_home
        if absolute == store_home or absolute.startswith(store_home + os.sep):
            raise UnsafePathError(f"{path} is inside turnback's store, which the agent's tools never write")
        return rel

    def _target(self, session_id: SessionId) -> CallTarget:
        session = self.store.session(session_id)
        turn = self.running_turn(session_id)
        project = self.project_of(session)
        return CallTarget(self.store, Tree(project.root), project, turn, session.incognito)

    def write(self, session_id: SessionId, path: str, data: bytes, *, cwd: str | None = None) -> Call:
        """Write *data* to *path* (making missing folders), keeping what it held before."""
        target = self._target(session_id)
        return self.store.call(tools.record_write(target, self.resolve_path(target.project, path, cwd), data))

    def edit(
        self,
        session_id: SessionId,
        path: str,
        old: str,
        new: str,
        *,
        replace_all: bool = False,
        cwd: str | None = None,
    ) -> Call:
        """Replace *old* by *new* in *path*: it must occur once, or every time with *replace_all*."""
        target = self._target(session_id)
        rel = self.resolve_path(target.project, path, cwd)
        return self.store.call(tools.record_edit(target, rel, old, new, replace_all=replace_all))

    def delete(self, session_id: SessionId, path: str, *, cwd: str | None = None) -> Call:
        target = self._target(session_id)
        return self.store.call(tools.record_delete(target, self.resolve_path(target.project, path, cwd)))

    def move(self, session_id: SessionId, src: str, dst: str, *, cwd: str | None = None) -> Call:
        target = self._target(session_id)
        project = target.project
        return self.store.call(
            tools.record_move(target, self.resolve_path(project, src, cwd), self.resolve_path(project, dst, cwd))
        )

    def mkdir(self, session_id: SessionId, path: str, *, cwd: str | None = None) -> Call:
        target = self._target(session_id)
        return self.store.call(tools.record_mkdir(target, self.resolve_path(target.project, path, cwd)))

    def begin_call(
        self, session_id: SessionId, tool: str, raw_input: object = None, *, cwd: str | None = None
    ) -> CallHandle:
        """Start a call whose files the harness writes itself (see :class:`CallHandle`)."""
        text = raw_input if isinstance(raw_input, str) or raw_input is None else json.dumps(raw_input)
        return CallHandle(self, CallRecorder.begin(self._target(session_id), tool, text), cwd)

    def resume_call(self, call_ref: str, *, cwd: str | None = None) -> CallHandle:
        """The handle of a call begun earlier (by another process), to record ``after`` and end it."""
        call = self.call(call_ref)
        session = self.store.session(call.session_id)
        project = self.project_of(session)
        turn = self.store.turn(call.turn_id)
        target = CallTarget(self.store, Tree(project.root), project, turn, session.incognito)
        return CallHandle(self, CallRecorder(target, call.id), cwd)

    # -- calls -----------------------------------------------------------------------------

    def call(self, ref: str) -> Call:
        """The call whose id starts with *ref*, with its changes."""
        return self.store.call(CallId(self.store.resolve_id("calls", ref, "call")))

    def turn_of(self, call: Call) -> Turn:
        return self.store.turn(call.turn_id)

    # -- taking changes back ---------------------------------------------------------------

    def _interrupted(self, session_id: SessionId) -> Plan | None:
        applying = self.store.ops_in_status(session_id, "applying")
        return self.store.load_plan(applying[0]) if applying else None

    def plan_undo(
        self,
        session_id: SessionId,
        *,
        turn: int | None = None,
        from_turn: int | None = None,
        force: bool = False,
    ) -> Plan:
        """Plan an undo (stored, not applied). An interrupted operation of the session comes back first."""
        session = self.store.session(session_id)
        refuse_if_busy(self.store, session_id)
        interrupted = self._interrupted(session_id)
        if interrupted is not None:
            return interrupted
        turns = self.store.turns(session_id)
        changed = self.store.turns_with_changes(session_id)
        if session.incognito and not changed:
            raise NothingToDoError("nothing to undo: this session is incognito, so it keeps no copies")
        chosen = [
            self.store.turn(t.id, with_calls=True)
            for t in select_undo_turns(turns, changed, number=turn, from_number=from_turn, force=force)
        ]
        project = self.project_of(session)
        plan = plan_undo(
            self.store,
            Tree(project.root),
            session,
            project,
            chosen,
            force=force,
            title_for=lambda t: turn_title(t, self.load),
            op_id=OpId(self.store.new_id()),
        )
        self.store.save_plan(plan)
        return plan

    def plan_revert(self, call_ref: str, *, anyway: bool = False) -> Plan:
        """Plan reverting one call (stored, not applied). An interrupted operation of its session comes back first."""
        call = self.call(call_ref)
        session = self.store.session(call.session_id)
        refuse_if_busy(self.store, session.id)
        interrupted = self._interrupted(session.id)
        if interrupted is not None:
            return interrupted
        project = self.project_of(session)
        plan = plan_revert(
            self.store,
            Tree(project.root),
            session,
            project,
            call,
            self.store.turn(call.turn_id),
            anyway=anyway,
            title=call_title(call),
            op_id=OpId(self.store.new_id()),
        )
        self.store.save_plan(plan)
        return plan

    def plan(self, op_ref: str) -> Plan:
        """A stored plan (or operation) by id prefix."""
        return self.store.load_plan(OpId(self.store.resolve_id("ops", op_ref, "operation")))

    def apply(self, plan: Plan) -> OpResult:
        """Apply a stored plan, row by row with compare-and-swap; resumes an interrupted one."""
        project = self.store.project(plan.project_id)
        return apply_plan(self.store, Tree(project.root), plan)


__all__ = ["CallHandle", "Engine"]

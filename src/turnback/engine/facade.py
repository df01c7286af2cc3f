"""The engine: every verb a front end (CLI, hooks, MCP, HTTP) may call, each handed to the facet of its concern.

Front ends parse, call one method here, and print; the rules live in the facets
(``paths``, ``sessions``, ``history``, ``tools``, ``commands``, ``watcher``,
``takeback``, ``storage``) and in the layers below (capture, ops, store, fsio).
The engine never prints and reads no environment: the caller passes the store
folder and key. What it starts for an agent gets ``home.agent_environment()``:
none of turnback's own settings.

A query (``log``, ``status``, ``running_turn``…) records nothing; what must be
recorded before one is looked at is a step of its own the caller runs first
(:meth:`Engine.mark_interrupted`, :meth:`Engine.catch_up`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, NoReturn

from turnback.capture.calls import TextEdit
from turnback.catalog import Message
from turnback.model import (
    BlobId,
    Call,
    CallId,
    Change,
    IdSource,
    OpResult,
    Plan,
    Project,
    ProjectId,
    Session,
    SessionId,
    Turn,
    TurnId,
    TurnSummary,
)
from turnback.store.api import StoreBackend
from turnback.store.backends import open_store

from .commands import Commands
from .history import History
from .paths import PathPolicy
from .sessions import Sessions
from .storage import Storage
from .takeback import TakeBack
from .tools import CallHandle, FileTools
from .values import (
    AgentNotice,
    CallHidden,
    CommandResult,
    Coverage,
    ResendFile,
    SessionPick,
    SessionStatus,
    TextEdited,
    TurnDiff,
)
from .watcher import Watcher, auto_start_watchers

if TYPE_CHECKING:
    from turnback.capture.watch import WatcherStatus
    from turnback.config import Config
    from turnback.fsio import Tree
    from turnback.ops import maintenance
    from turnback.paths import RelPath
    from turnback.store.copy import StoreCopied
    from turnback.store.records import SessionActivity


class TurnHandle:
    """A running turn, for a harness embedding turnback: ``with engine.start_turn(sid, msg) as turn: ...``."""

    def __init__(self, engine: Engine, turn: Turn, cwd: str | None):
        self._engine = engine
        self.turn = turn
        self.session_id = turn.session_id
        self._cwd = cwd

    def run(self, argv: Sequence[str], **options: object) -> CommandResult:
        """Run a shell command in the turn; see :meth:`Engine.run_command`."""
        options.setdefault("cwd", self._cwd)
        return self._engine.run_command(self.session_id, argv, **options)  # type: ignore[arg-type]

    def write(self, path: str, data: bytes) -> Call:
        return self._engine.write(self.session_id, path, data, cwd=self._cwd)

    def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> Call:
        return self._engine.edit(self.session_id, path, old, new, replace_all=replace_all, cwd=self._cwd)

    def delete(self, path: str) -> Call:
        return self._engine.delete(self.session_id, path, cwd=self._cwd)

    def move(self, src: str, dst: str) -> Call:
        return self._engine.move(self.session_id, src, dst, cwd=self._cwd)

    def mkdir(self, path: str) -> Call:
        return self._engine.mkdir(self.session_id, path, cwd=self._cwd)

    def call(self, tool: str, raw_input: object = None) -> CallHandle:
        return self._engine.begin_call(self.session_id, tool, raw_input, cwd=self._cwd)

    def end(self) -> TurnSummary:
        return self._engine.end_turn(self.session_id)[1]

    def __enter__(self) -> TurnHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()


class _CommandVerbs:
    """The verbs of shell commands, background jobs and the watcher: :class:`Engine`'s, kept apart as their
    own concern (``commands.py``, ``watcher.py``)."""

    _commands: Commands
    _watcher: Watcher

    # -- shell commands and background jobs (commands.py) ----------------------------------

    def begin_command(
        self,
        session_id: SessionId,
        command: str,
        *,
        cwd: str | None = None,
        external_id: tuple[str, str] | None = None,
        background: bool = False,
    ) -> CallId:
        return self._commands.begin_command(
            session_id, command, cwd=cwd, external_id=external_id, background=background
        )

    def finish_command(
        self,
        call_id: CallId,
        *,
        exit_code: int | None = None,
        error: Message | str | None = None,
        started_at: float | None = None,
        ran: bool = True,
    ) -> Call:
        return self._commands.finish_command(call_id, exit_code=exit_code, error=error, started_at=started_at, ran=ran)

    def record_edit_since_scan(
        self, session_id: SessionId, tool: str, raw_input: object, path: str, *, cwd: str | None = None
    ) -> Call:
        return self._commands.record_edit_since_scan(session_id, tool, raw_input, path, cwd=cwd)

    def unfinished_commands(self, session_id: SessionId) -> list[Call]:
        return self._commands.unfinished_commands(session_id)

    def unfinished_file_calls(self, session_id: SessionId) -> list[Call]:
        return self._commands.unfinished_file_calls(session_id)

    def overlap_notes(self, call: Call) -> Callable[[Change], Message | None]:
        return self._commands.overlap_notes(call)

    def run_command(
        self,
        session_id: SessionId,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        timeout: float | None = None,
        stdout: IO[bytes] | int | None = None,
        stderr: IO[bytes] | int | None = None,
        unasked: bool = False,
        process_group: bool = False,
        started: Callable[[int], None] | None = None,
    ) -> CommandResult:
        return self._commands.run_command(
            session_id,
            argv,
            cwd=cwd,
            timeout=timeout,
            stdout=stdout,
            stderr=stderr,
            unasked=unasked,
            process_group=process_group,
            started=started,
        )

    def begin_exec(
        self,
        session_id: SessionId,
        argv: Sequence[str],
        *,
        runner_pid: int,
        cwd: str | None = None,
        unasked: bool = False,
    ) -> tuple[CallId, str] | None:
        return self._commands.begin_exec(session_id, argv, runner_pid=runner_pid, cwd=cwd, unasked=unasked)

    def exec_started(self, call_id: CallId, pid: int) -> None:
        self._commands.exec_started(call_id, pid)

    def finish_exec(self, call_id: CallId, exit_code: int, *, started_at: float | None) -> CommandResult:
        return self._commands.finish_exec(call_id, exit_code, started_at=started_at)

    def fail_exec(self, call_id: CallId, program: str, error_number: int | None, why: str | None) -> NoReturn:
        self._commands.fail_exec(call_id, program, error_number, why)

    def watch_command(self, call_id: CallId) -> None:
        self._commands.watch_command(call_id)

    def start_job(
        self,
        session_id: SessionId,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        output: str | None = None,
        unasked: bool = False,
    ) -> Call:
        return self._commands.start_job(session_id, argv, cwd=cwd, output=output, unasked=unasked)

    def run_job(self, call_id: CallId, argv: Sequence[str], *, cwd: str, output: str | None) -> None:
        self._commands.run_job(call_id, argv, cwd=cwd, output=output)

    def jobs(self, session_id: SessionId | None = None, *, project_id: ProjectId | None = None) -> list[Call]:
        return self._commands.jobs(session_id, project_id=project_id)

    def stop_job(self, call_ref: str) -> Call:
        return self._commands.stop_job(call_ref)

    def covers(self, session_id: SessionId, argv: Sequence[str], *, cwd: str | None = None) -> Coverage:
        return self._commands.covers(session_id, argv, cwd=cwd)

    def scan(self, project: Project) -> int:
        return self._commands.scan(project)

    def adopt_git_objects(self, project_id: ProjectId) -> int:
        return self._commands.adopt_git_objects(project_id)

    def take_first_snapshot(self, project_id: ProjectId) -> int:
        return self._commands.take_first_snapshot(project_id)

    # -- the watcher (watcher.py) ----------------------------------------------------------

    def watch_start(self, project: Project) -> int:
        return self._watcher.start(project)

    def run_watcher(self, project_id: ProjectId, idle_s: float | None = None) -> None:
        self._watcher.run(project_id, idle_s)

    @staticmethod
    def auto_start_watchers() -> None:
        auto_start_watchers()

    def watch_status(self, project: Project) -> WatcherStatus | None:
        return self._watcher.status(project)

    def watch_stop(self, project: Project) -> int | None:
        return self._watcher.stop(project)


class Engine(_CommandVerbs):
    """An open turnback store and the verbs that act on it. Use :meth:`open`; close when done.

    Each verb is the facet's of its concern; see each facet for what it does.
    """

    def __init__(self, store: StoreBackend, config: Config | None = None, *, confined: bool = False):
        self.store = store
        self._storage = Storage(self, config)
        self._paths = PathPolicy(store.home, confined=confined, mode_of=lambda project: self.config_for(project).mode)
        self._sessions = Sessions(self)
        self._history = History(self)
        self._tools = FileTools(self)
        self._commands = Commands(self)
        self._watcher = Watcher(self)
        self._takeback = TakeBack(self)

    @classmethod
    def open(
        cls,
        home: str,
        *,
        key_secret: str | None = None,
        try_keyring: bool = True,
        clock: Callable[[], int] | None = None,
        ids: IdSource | None = None,
        confined: bool = False,
        store_url: str | None = None,
        host_id: str | None = None,
        host_lease_s: float | None = None,
    ) -> Engine:
        """Open the store in *home* (creating it on first use) with the given key secret, if any.

        *store_url* (else ``store.url`` in the folder's config.toml): a PostgreSQL database that holds the
        store, *home* keeping what stays on this host; *host_id* stands for this machine's id there, *host_lease_s*
        for the length of its lease (``store/hosts.py``)."""
        from turnback.config import configured_store_url

        kwargs = {"clock": clock} if clock else {}
        store = open_store(
            home,
            url=store_url or configured_store_url(home),
            key_secret=key_secret,
            try_keyring=try_keyring,
            ids=ids,
            host_id=host_id,
            host_lease_s=host_lease_s,
            **kwargs,
        )
        try:
            return cls(store, confined=confined)
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

    @property
    def store_url(self) -> str | None:
        """The PostgreSQL database that holds the store; None for the folder's own SQLite file."""
        return self.store.database_url

    def load(self, blob: BlobId) -> bytes:
        """The content stored under *blob*."""
        return self.store.blobs.read_bytes(blob)

    # -- settings and the store's upkeep (storage.py) --------------------------------------

    @property
    def config(self) -> Config:
        return self._storage.config

    def config_for(self, project: Project) -> Config:
        return self._storage.config_for(project)

    def config_value(self, key: str, *, project_root: str | None = None) -> object:
        return self._storage.config_value(key, project_root=project_root)

    def set_config(self, key: str, value: str, *, project_root: str | None = None) -> object:
        return self._storage.set_config(key, value, project_root=project_root)

    def enforce_caps(self, project: Project | None = None) -> maintenance.Reclaimed:
        return self._storage.enforce_caps(project)

    def kept_bytes(self) -> int:
        return self._storage.kept_bytes()

    def gc(self, *, vacuum: bool | None = None) -> maintenance.Reclaimed:
        return self._storage.gc(vacuum=vacuum)

    def verify(self) -> maintenance.Damage:
        return self._storage.verify()

    def delete_session(self, session_id: SessionId) -> None:
        self._storage.delete_session(session_id)

    def copy_to(self, target: Engine) -> StoreCopied:
        """Copy this whole store into *target*, a new store (another folder or backend); reopen it after."""
        from turnback.store.copy import copy_store

        return copy_store(self.store, target.store)

    # -- projects, sessions, turns (sessions.py) -------------------------------------------

    def init_project(self, root: str) -> tuple[Project, bool]:
        return self._sessions.init_project(root)

    def project_of(self, session: Session) -> Project:
        return self._sessions.project_of(session)

    def new_session(
        self, project_root: str, *, title: str | None = None, actor: str | None = None, incognito: bool = False
    ) -> Session:
        return self._sessions.new_session(project_root, title=title, actor=actor, incognito=incognito)

    def session(self, ref: str) -> Session:
        return self._sessions.session(ref)

    def pick_session(self, ref: str | None, cwd: str, *, with_turns: bool = False) -> SessionPick:
        return self._sessions.pick_session(ref, cwd, with_turns=with_turns)

    def default_session(self, sessions: Sequence[Session]) -> Session:
        return self._sessions.default_session(sessions)

    def default_sessions(self, sessions: Sequence[Session]) -> set[SessionId]:
        return self._sessions.default_sessions(sessions)

    def sessions(self, project_root: str | None = None) -> list[Session]:
        return self._sessions.sessions(project_root)

    def session_for(self, harness: str, external: str, project_root: str, *, title: str | None = None) -> Session:
        return self._sessions.session_for(harness, external, project_root, title=title)

    def begin_turn(self, session_id: SessionId, message: str | None = None, *, holder_pid: int | None = None) -> Turn:
        return self._sessions.begin_turn(session_id, message, holder_pid=holder_pid)

    def start_turn(
        self,
        session_id: SessionId,
        message: str | None = None,
        *,
        cwd: str | None = None,
        holder_pid: int | None = None,
    ) -> TurnHandle:
        """Begin a turn and return a handle to work in it (the library's ``turn.run(...)``, ``turn.write(...)``)."""
        return TurnHandle(self, self.begin_turn(session_id, message, holder_pid=holder_pid), cwd)

    def running_turn(self, session_id: SessionId) -> Turn:
        return self._sessions.running_turn(session_id)

    def mark_interrupted(self, session_id: SessionId) -> list[Turn]:
        return self._sessions.mark_interrupted(session_id)

    def end_turn(self, session_id: SessionId) -> tuple[Turn, TurnSummary]:
        return self._sessions.end_turn(session_id)

    def settle_turns(self, session_id: SessionId) -> list[Turn]:
        return self._sessions.settle_turns(session_id)

    def tool_turn(
        self, session_id: SessionId, *, gap_s: float, holder_pid: int | None = None
    ) -> contextlib.AbstractContextManager[Turn]:
        return self._sessions.tool_turn(session_id, gap_s=gap_s, holder_pid=holder_pid)

    def busy_start(self, session_id: SessionId, reason: Message | str, *, holder_pid: int | None = None) -> str:
        return self._sessions.busy_start(session_id, reason, holder_pid=holder_pid)

    def busy_end(self, session_id: SessionId, reason: Message | str | None = None) -> int:
        return self._sessions.busy_end(session_id, reason)

    def take_notices(self, session_id: SessionId) -> list[AgentNotice]:
        return self._sessions.take_notices(session_id)

    def catch_up(self, session_id: SessionId) -> None:
        return self._sessions.catch_up(session_id)

    def status(self, session_id: SessionId) -> SessionStatus:
        return self._sessions.status(session_id)

    def watched_project(self, path: str) -> Project:
        return self._sessions.watched_project(path)

    # -- what changed, for a front end that shows sessions live -----------------------------

    def data_version(self) -> int:
        """A number that changes whenever another process commits to the store: poll it, then read activity()."""
        return self.store.data_version()

    def activity(self) -> list[SessionActivity]:
        """Each session's newest turn, call and operation, with a marker that changes when any of its records do."""
        return self.store.activity()

    def change_mark(self, session_id: SessionId) -> str | None:
        """The session's marker of :meth:`activity`: a live view of one session redraws when it moves."""
        return next((seen.marker for seen in self.store.activity() if seen.session_id == session_id), None)

    # -- history (history.py) --------------------------------------------------------------

    def log(self, session_id: SessionId) -> list[Turn]:
        return self._history.log(session_id)

    def turn(self, session_id: SessionId, ref: str) -> Turn:
        return self._history.turn(session_id, ref)

    def turn_of(self, call: Call) -> Turn:
        return self.store.turn(call.turn_id)

    def turn_diff(self, session_id: SessionId, ref: str | None = None) -> TurnDiff:
        return self._history.turn_diff(session_id, ref)

    def hidden_paths(self, session_id: SessionId, paths: Sequence[str]) -> frozenset[str]:
        return self._history.hidden_paths(session_id, paths)

    def active_line(self, session_id: SessionId) -> list[Turn]:
        return self._history.active_line(session_id)

    def undo_next(self, session_id: SessionId) -> TurnId | None:
        return self._history.undo_next(session_id)

    def files(self, session_id: SessionId) -> list[tuple[str, Message]]:
        return self._history.files(session_id)

    def operations(self, session_id: SessionId) -> list[Plan]:
        return self._history.operations(session_id)

    def taken_back_by(self, session_id: SessionId) -> dict[str, str]:
        return self._history.taken_back_by(session_id)

    def plan(self, op_ref: str) -> Plan:
        return self._history.plan(op_ref)

    def call(self, ref: str) -> Call:
        return self._history.call(ref)

    def call_as_it_stands(self, ref: str) -> Call:
        return self._history.as_it_stands(self._history.call(ref))

    def missing_input_reason(self, call: Call) -> Message:
        return self._history.missing_input_reason(call)

    def call_hidden(self, call: Call) -> CallHidden:
        return self._history.call_hidden(call)

    def call_input(self, call: Call) -> str | None:
        return self._history.call_input(call)

    # -- paths (paths.py) ------------------------------------------------------------------

    def browse(
        self, session_id: SessionId, path: str, *, cwd: str | None = None, follow_last: bool = True
    ) -> tuple[Tree, RelPath | None]:
        project = self._sessions.project_of_session(session_id)
        return self._paths.browse(project, path, cwd, follow_last=follow_last)

    def unlisted(self, session_id: SessionId) -> Callable[[str], bool]:
        return self._paths.unlisted(self._sessions.project_of_session(session_id))

    # -- file tools (tools.py) -------------------------------------------------------------

    def write(
        self,
        session_id: SessionId,
        path: str,
        data: bytes,
        *,
        cwd: str | None = None,
        tool: str = "write",
        raw_input: object = None,
        uncovered: bool = False,
    ) -> Call:
        return self._tools.write(session_id, path, data, cwd=cwd, tool=tool, raw_input=raw_input, uncovered=uncovered)

    def edit(
        self,
        session_id: SessionId,
        path: str,
        old: str,
        new: str,
        *,
        replace_all: bool = False,
        cwd: str | None = None,
        uncovered: bool = False,
    ) -> Call:
        edits = [TextEdit(old, new)]
        edited = self._tools.edit(session_id, path, edits, replace_all=replace_all, cwd=cwd, uncovered=uncovered)
        assert edited.call is not None
        return edited.call

    def edit_text(
        self,
        session_id: SessionId,
        path: str,
        edits: Sequence[TextEdit],
        *,
        cwd: str | None = None,
        dry_run: bool = False,
        tool: str = "edit",
        raw_input: object = None,
    ) -> TextEdited:
        """Make a list of edits the agent gave (numbered in what is refused); *dry_run* changes nothing."""
        return self._tools.edit(
            session_id, path, edits, numbered=True, cwd=cwd, dry_run=dry_run, tool=tool, raw_input=raw_input
        )

    def delete(self, session_id: SessionId, path: str, *, cwd: str | None = None, uncovered: bool = False) -> Call:
        return self._tools.delete(session_id, path, cwd=cwd, uncovered=uncovered)

    def move(
        self,
        session_id: SessionId,
        src: str,
        dst: str,
        *,
        cwd: str | None = None,
        uncovered: bool = False,
        replace: bool = True,
    ) -> Call:
        return self._tools.move(session_id, src, dst, cwd=cwd, uncovered=uncovered, replace=replace)

    def mkdir(self, session_id: SessionId, path: str, *, cwd: str | None = None) -> Call:
        return self._tools.mkdir(session_id, path, cwd=cwd)

    def read(self, session_id: SessionId, path: str, *, cwd: str | None = None) -> bytes:
        return self._tools.read(session_id, path, cwd=cwd)

    def begin_call(
        self,
        session_id: SessionId,
        tool: str,
        raw_input: object = None,
        *,
        cwd: str | None = None,
        external_id: tuple[str, str] | None = None,
        before: Sequence[str] = (),
        uncovered: bool = False,
    ) -> CallHandle:
        return self._tools.begin_call(
            session_id, tool, raw_input, cwd=cwd, external_id=external_id, before=before, uncovered=uncovered
        )

    def external_call(self, session_id: SessionId, harness: str, external: str) -> Call | None:
        return self._tools.external_call(session_id, harness, external)

    def resume_call(self, call_ref: str, *, cwd: str | None = None) -> CallHandle:
        return self._tools.resume_call(call_ref, cwd=cwd)

    # -- taking changes back (takeback.py) -------------------------------------------------

    def plan_undo(
        self,
        session_id: SessionId,
        *,
        turn: int | str | None = None,
        from_turn: int | str | None = None,
        force: bool = False,
    ) -> Plan:
        return self._takeback.plan_undo(session_id, turn=turn, from_turn=from_turn, force=force)

    def plan_revert(self, call_ref: str, *, anyway: bool = False) -> Plan:
        return self._takeback.plan_revert(call_ref, anyway=anyway)

    def plan_rollback(
        self, session_id: SessionId, target: str, *, expect_head: str | None = None, confirming: bool = False
    ) -> Plan:
        return self._takeback.plan_rollback(session_id, target, expect_head=expect_head, confirming=confirming)

    def plan_resend(self, session_id: SessionId, target: str, *, mode: str = "revert") -> Plan:
        return self._takeback.plan_resend(session_id, target, mode=mode)

    def resend_files(self, plan: Plan) -> list[ResendFile]:
        return self._takeback.resend_files(plan)

    def plan_redo(self, session_id: SessionId) -> Plan:
        return self._takeback.plan_redo(session_id)

    def plan_again(self, shown: Plan, *, anyway: bool = False, mode: str | None = None) -> Plan:
        return self._takeback.plan_again(shown, anyway=anyway, mode=mode)

    def apply(self, plan: Plan) -> OpResult:
        return self._takeback.apply(plan)


__all__ = ["Engine", "TurnHandle"]

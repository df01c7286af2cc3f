"""The engine: every verb a front end (CLI, hooks, MCP, HTTP) may call.

Front ends parse, call one method here, and print; the rules live here and
in the layers below (capture, ops, store, fsio). The engine never prints
and reads no environment: the caller passes the store folder and key. What
it starts for an agent gets ``home.agent_environment()``: none of turnback's
own settings.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, NamedTuple

from turnback.capture import calls as tools
from turnback.capture.calls import CallRecorder, CallTarget
from turnback.errors import (
    BusyError,
    NothingToDoError,
    RefusedError,
    StoreError,
    TurnbackError,
    UncoveredError,
    UnsafePathError,
    UsageError,
)
from turnback.fsio import ROOT_TREE, Tree
from turnback.home import agent_environment
from turnback.model import (
    BlobId,
    Call,
    CallId,
    Change,
    FileState,
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
from turnback.ops.busy import (
    harness_runs,
    live_commands,
    live_running_turns,
    orphaned_commands,
    refuse_if_busy,
    session_apply_lock,
)
from turnback.paths import RelPath, absolute_user_path, make_rel_path
from turnback.procs import hide_own_environment, process_alive, process_start
from turnback.store import Store
from turnback.store.records import Notice

if TYPE_CHECKING:  # imported where used: a hook process imports only what its event needs
    from turnback.capture import commands
    from turnback.capture.scan import ScanRules
    from turnback.capture.watch import WatcherStatus
    from turnback.config import Config
    from turnback.ops import maintenance
    from turnback.render.summary import NetChange

TURN_WAIT_S = 60.0
WATCH_START_S = 10.0


def _agent_command_environment() -> dict[str, str]:
    """The environment for an agent's command about to start, with this process's own (which may hold the
    store's key) hidden from it: the command runs as the same user and could read ``/proc/PPID/environ``."""
    hide_own_environment()
    return agent_environment()


class CommandNotStarted(UsageError):
    """The command could not be started (not found, not executable); ``errno`` tells which."""

    def __init__(self, message: str, errno: int | None):
        super().__init__(message)
        self.errno = errno


class CallHandle:
    """A call whose files the harness writes itself: ``before(path)``, write, ``after(path)``, ``end()``."""

    def __init__(self, engine: Engine, recorder: CallRecorder, cwd: str | None):
        self._engine = engine
        self._recorder = recorder
        self._cwd = cwd
        self.id = recorder.id

    def _path(self, path: str) -> tools.Location:
        return self._engine.locate(self._recorder.target.project, path, self._cwd)

    def _link_target(self, where: tools.Location, link: str | None) -> tools.Location | None:
        """Where the link *where* (pointing at *link*) leads, when a write through it can land there."""
        if link is None:
            return None
        folder = os.path.dirname(os.path.join(where.tree.root, where.rel))
        try:
            target = self._path(os.path.realpath(os.path.join(folder, link)))
        except TurnbackError:
            return None  # the store, or outside a confined root: nothing there is written through it
        return target if target.recorded != where.recorded else None

    def before(self, path: str, *, uncovered: bool = False) -> None:
        """Keep what *path* holds; when it is a link, what it leads to as well (a harness may write through it).

        A copy turnback cannot keep is refused (:class:`UncoveredError`), unless *uncovered*: then the path is
        recorded as not covered, and the change cannot be undone.
        """
        where = self._path(path)
        entry = where.tree.lstat(where.rel)
        target = None
        if entry is not None and entry.is_symlink:
            target = self._link_target(where, os.readlink(os.path.join(where.tree.root, where.rel)))
        kept = self._engine.keepable(self._recorder.target, [where] if target is None else [where, target], uncovered)
        for location in kept:
            self._recorder.before(location)

    def after(self, path: str) -> None:
        """Record what *path* (and, when it was a link, what it led to) holds after the write."""
        where = self._path(path)
        was = self._recorder.recorded_before(where)
        self._recorder.after(where)
        target = self._link_target(where, was.target if was is not None and was.kind == "symlink" else None)
        if target is not None and self._recorder.recorded_before(target) is not None:
            self._recorder.after(target)

    def end(self, *, failed: str | None = None, after: Sequence[str] = ()) -> Call:
        """End the call; *after*: paths to record :meth:`after` for first, in the same write."""
        with self._engine.store.transaction():
            for path in after:
                self.after(path)
            self._recorder.finish(failed=failed)
        return self._engine.call(self.id)

    def __enter__(self) -> CallHandle:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.end(failed=(str(exc) or type(exc).__name__) if exc is not None else None)


class SessionStatus(NamedTuple):
    session: Session
    head: Turn | None
    running: tuple[Turn, ...]
    busy: tuple[str, ...]
    commands: tuple[Call, ...]
    interrupted: Plan | None
    kept_bytes: int


class ResendFile(NamedTuple):
    """A file an edit and resend would revert: how many calls changed it, and the lines a revert adds and removes."""

    path: str
    calls: int
    added: int
    removed: int


class Coverage(NamedTuple):
    """Whether turnback can take back what a command may destroy, and if not, why."""

    covered: bool
    reasons: tuple[str, ...]


class SessionPick(NamedTuple):
    """The session a command acts on, and the newer sessions of its project it passed over (they have no turns)."""

    session: Session
    passed_over: tuple[Session, ...] = ()


class TurnDiff(NamedTuple):
    """What one turn changed, path by path, and which of those paths git ignores (contents never shown)."""

    turn: Turn
    changes: tuple[NetChange, ...]
    ignored: frozenset[str]
    note: str | None = None


class CallHidden(NamedTuple):
    """What of a call is never shown: the contents of *paths* (ignored by .gitignore), and, when *text* is set,
    what the agent's call carries of them (its arguments but paths and flags, its error message)."""

    paths: frozenset[str]
    text: bool


class CommandResult(NamedTuple):
    """A shell command's call, its exit status (``None`` while it runs on), and the ``changed …`` line."""

    call: Call
    exit_code: int | None
    timed_out: bool
    line: str


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


class Engine:
    """An open turnback store and the verbs that act on it. Use :meth:`open`; close when done."""

    def __init__(self, store: Store, config: Config | None = None, *, confined: bool = False):
        self.store = store
        self.confined = confined  # paths outside a project are refused whatever the mode (an MCP server's roots)
        self._config = config
        self._project_configs: dict[str, Config] = {}
        self._real_home = os.path.realpath(store.home)

    @property
    def config(self) -> Config:
        """The store-wide settings (read on first use: a hook that needs none never parses config.toml)."""
        if self._config is None:
            from turnback.config import load_config

            self._config = load_config(self.home)
        return self._config

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
    ) -> Engine:
        """Open the store in *home* (creating it on first use) with the given key secret, if any."""
        kwargs = {"clock": clock} if clock else {}
        store = Store.open(home, key_secret=key_secret, try_keyring=try_keyring, ids=ids, **kwargs)
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

    def config_for(self, project: Project) -> Config:
        """The settings for *project*: the store's, with the project's own table of config.toml over them."""
        from turnback.config import load_config

        if project.root not in self._project_configs:
            self._project_configs[project.root] = load_config(self.home, project.root)
        return self._project_configs[project.root]

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

    def find_session(self, ref: str | None, cwd: str, *, with_turns: bool = False) -> Session:
        """The session *ref* names, else the most recently active session of the project holding *cwd*.

        *with_turns*: the most recently active session that has turns (see :meth:`pick_session`).
        """
        return self.pick_session(ref, cwd, with_turns=with_turns).session

    def pick_session(self, ref: str | None, cwd: str, *, with_turns: bool = False) -> SessionPick:
        """The session *ref* names, else the default session of the project holding *cwd*.

        For recording, the default is the most recently active session. For
        looking and taking back (*with_turns*), it is the most recently active
        session with turns: an empty newer one (an MCP server's start, a forked
        or read-only restart of a client) would hide the work in the one before.
        """
        if ref:
            return SessionPick(self.session(ref))
        project = self.store.project_containing(cwd)
        if project is None:
            raise UsageError(f"{cwd} is in no turnback project; give --session, or run turnback init in the project")
        sessions = self.store.sessions(project.id)
        if not sessions:
            raise UsageError(f"the project {project.root} has no session yet; start one with turnback session new")
        if with_turns:
            default = self.default_session(sessions)
            return SessionPick(default, tuple(sessions[: sessions.index(default)]))
        return SessionPick(sessions[0])

    def default_session(self, sessions: Sequence[Session]) -> Session:
        """Of one project's *sessions* (most recently active first): the first with turns, else the first."""
        return next((session for session in sessions if self.store.turns(session.id)), sessions[0])

    def sessions(self, project_root: str | None = None) -> list[Session]:
        if project_root is None:
            return self.store.sessions()
        project = self.store.project_by_root(os.path.realpath(project_root))
        return self.store.sessions(project.id) if project else []

    # -- turns -----------------------------------------------------------------------------

    def begin_turn(self, session_id: SessionId, message: str | None = None, *, holder_pid: int | None = None) -> Turn:
        """Begin a turn; it runs until :meth:`end_turn` or until the holding process ends.

        A turn that arrives while an undo applies waits for it (up to
        ``TURN_WAIT_S``) rather than fail: the message was already sent.
        """
        from turnback.capture import git

        with session_apply_lock(self.store, session_id, wait_s=TURN_WAIT_S):
            pass
        pid = holder_pid if holder_pid is not None else os.getpid()
        project = self.project_of(self.store.session(session_id))
        refs = git.read_refs(project.root)
        with self.store.transaction():  # the check and the new turn in one write: two begins cannot both pass
            running = live_running_turns(self.store, session_id)
            if running:
                raise BusyError(
                    f"turn {running[-1].number} is still running in this session; end it first (turnback turn end)"
                )
            return self.store.create_turn(
                session_id, message, holder_pid=pid, holder_start=process_start(pid), refs=refs
            )

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
        running = live_running_turns(self.store, session_id)
        if not running:
            from turnback.render.text import interrupted_reason

            turns = self.store.turns(session_id)
            if turns and turns[-1].status == "interrupted":
                raise RefusedError(
                    f"no turn is running in this session: turn {turns[-1].number} was interrupted, "
                    f"{interrupted_reason(turns[-1])}. A turn lasts while the process that ran turnback turn begin "
                    "(its shell) runs; a harness whose steps run in separate processes passes turn begin --pid "
                    "with a process that lives for the whole turn, and ends it with turn end. "
                    "Begin one again (turnback turn begin)"
                )
            raise RefusedError("no turn is running in this session; begin one first (turnback turn begin)")
        return running[-1]

    def end_turn(self, session_id: SessionId) -> tuple[Turn, TurnSummary]:
        """End the running turn: record the git refs it moved, and sum up what it changed."""
        from turnback.capture import git

        turn = self.running_turn(session_id)
        before = self.store.refs_at_turn_start(turn.id)
        after = git.read_refs(self.project_of(self.store.session(session_id)).root) if before is not None else None
        from turnback.store.store import RESERVE_FULL

        def record_end() -> None:
            with self.store.transaction():
                if before is not None and after is not None:
                    moved = [(m.name, m.target, m.expect) for m in git.ref_moves(before, after)]
                    self.store.add_ref_changes(turn.id, moved)
                self.store.end_turn(turn.id, "ended")

        try:
            record_end()
        except StoreError:
            if not self.store.use_reserve():  # a full disk must not leave the turn running (undo busy)
                raise
            record_end()
        warnings = []
        try:
            self.enforce_caps(self.project_of(self.store.session(session_id)))
        except StoreError as exc:  # the turn has ended; the cap is enforced again at the next end
            warnings.append(f"the store's size cap could not be enforced now: {exc}")
        if self.store.reserve_used:
            warnings.append(RESERVE_FULL)
        ended = self.store.turn(turn.id, with_calls=True)
        from turnback.render.summary import call_title

        cut_short = [
            f"call {short_id(call.id)} ({call_title(call)}) may be cut short: its end was never recorded; "
            "counted as its files are now"
            for call in ended.calls
            if call.kind == "tool" and call.status == "running"
        ]
        summary = self.turn_summary(ended._replace(calls=tuple(self._as_it_stands(call) for call in ended.calls)))
        return ended, summary._replace(notes=(*summary.notes, *cut_short, *warnings))

    def _unrecorded_afters(self, call: Call) -> list[FileState | None]:
        """For each change of *call* whose later state was never recorded, what its path holds now (stored)."""
        from turnback.capture.states import capture_state

        tree = Tree(self.project_of(self.store.session(call.session_id)).root)
        afters: list[FileState | None] = []
        for change in call.changes:
            now = None
            if change.after is None and not change.outside and not change.not_covered:
                try:
                    now = capture_state(tree, change.path, self.store)
                except TurnbackError:
                    pass  # left unknown, shown as before
            afters.append(now)
        return afters

    def call_as_it_stands(self, ref: str) -> Call:
        """The call *ref* names; a change whose later state was never recorded shows what its path holds now."""
        return self._as_it_stands(self.call(ref))

    def _as_it_stands(self, call: Call) -> Call:
        """*call* as shown: a harness's ``call before`` whose ``call after`` never came left its files' later
        state unknown (drawn as a deletion, counted as nothing); what they hold now is shown instead.

        Only shown: the record keeps the state unknown, so an undo still treats the call as cut short.
        """
        if not call.cut_short or all(change.after is not None for change in call.changes):
            return call
        if self.store.session(call.session_id).incognito:
            return call  # no copy of anything is kept, not even to show
        with self.store.transaction():
            afters = self._unrecorded_afters(call)
        changes = tuple(
            change if now is None else change._replace(after=now)
            for change, now in zip(call.changes, afters, strict=True)
        )
        return call._replace(changes=changes)

    def turn_summary(self, turn: Turn) -> TurnSummary:
        """``3 files changed, +24 -7 (docs +3)``, and notes for outside files and commands that ran unasked."""
        from turnback.render import views
        from turnback.render.summary import net_changes, summary_line

        changes = net_changes(turn.calls, self.load)
        files = [c for c in changes if "dir" not in (c.before.kind, c.after.kind) and not c.outside]
        project = self.project_of(self.store.session(turn.session_id))
        return TurnSummary(
            files=len(files),
            added=sum(c.added for c in files),
            removed=sum(c.removed for c in files),
            line=summary_line(changes, self.config_for(project).groups),
            notes=tuple(
                views.turn_notes(changes, unasked=any(c.unasked for c in turn.calls), project_root=project.root)
            ),
        )

    def turn_diff(self, session_id: SessionId, ref: str | None = None) -> TurnDiff:
        """What a turn changed (the newest, or the one *ref* names), with the files git ignores."""
        from turnback.render.summary import net_changes

        if ref is None:
            turns = self.store.turns(session_id)
            if not turns:
                raise NothingToDoError("the session has no turn yet")
            turn = self.store.turn(turns[-1].id, with_calls=True)
        else:
            turn = self.turn(session_id, ref)
        changes = net_changes(turn.calls, self.load)
        project = self.project_of(self.store.session(session_id))
        paths = [c.path for c in changes if not c.outside and "dir" not in (c.before.kind, c.after.kind)]
        ignored, note = self._ignored(project, paths)
        return TurnDiff(turn, tuple(changes), ignored, note)

    def _ignored(self, project: Project, paths: Sequence[str]) -> tuple[frozenset[str], str | None]:
        from turnback.capture import git

        try:
            scratch = os.path.join(self.home, "gitignore-scratch.git")
            return frozenset(git.ignored_paths(project.root, paths, scratch_git_dir=scratch)), None
        except UnsafePathError:
            note = "git cannot run here, so turnback cannot tell which files are ignored: no contents are shown"
            return frozenset(paths), note

    def hidden_paths(self, session_id: SessionId, paths: Sequence[str]) -> frozenset[str]:
        """Which of *paths* the project's .gitignore files ignore: front ends never show their contents."""
        inside = [path for path in paths if not path.startswith("/")]
        return self._ignored(self.project_of(self.store.session(session_id)), inside)[0]

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

    def locate(self, project: Project, path: str, cwd: str | None) -> tools.Location:
        """Where a path typed by a user or agent is written: in the project, or outside it per ``mode``.

        Outside the project, ``auto`` and ``full`` keep a copy, ``manual`` and
        ``cautious`` keep none (the write is recorded as not covered). The
        store itself, and any ``.git`` folder, are refused.
        """
        absolute = absolute_user_path(cwd or project.root, path)
        parent, name = os.path.split(absolute)
        real = os.path.join(os.path.realpath(parent), name) if name else absolute
        store_home = self._real_home
        if real == store_home or real.startswith(store_home + os.sep):
            raise UnsafePathError(f"{path} is inside turnback's store, which the agent's tools never touch")
        root = project.root.rstrip("/")
        if absolute == root or real == root:
            raise UsageError(f"{path} is the project root itself, not a file in it")
        if absolute.startswith(root + "/"):
            return tools.Location(Tree(project.root), make_rel_path(absolute[len(root) + 1 :]))
        if real.startswith(root + "/"):
            raise UnsafePathError(f"{path} reaches into the project through a link; turnback does not follow links")
        if self.confined:
            raise UnsafePathError(f"{path} is outside the allowed folder {project.root}")
        mode = self.config_for(project).mode
        uncovered = None if mode in ("auto", "full") else f"mode {mode} copies nothing outside the project"
        return tools.Location(ROOT_TREE, make_rel_path(real.lstrip("/")), outside=True, uncovered=uncovered)

    def resolve_path(self, project: Project, path: str, cwd: str | None) -> RelPath:
        """A path typed by a user or agent, as a path in *project*; refused if outside it or in the store."""
        where = self.locate(project, path, cwd)
        if where.outside:
            raise UnsafePathError(f"{path} is outside the project {project.root}")
        return where.rel

    def _target(self, session_id: SessionId) -> CallTarget:
        session = self.store.session(session_id)
        turn = self.running_turn(session_id)
        project = self.project_of(session)
        return CallTarget(self.store, Tree(project.root), project, turn, session.incognito)

    def _writable(self, session_id: SessionId, where: tools.Location) -> tools.Location:
        """*where*, unless the file was reverted since the assistant last read it (then refused).

        A file the revert removed has nothing to read: writing it anew is fine.
        """
        if self.store.must_read(session_id, where.recorded) and where.tree.lstat(where.rel) is not None:
            raise RefusedError(
                f"{where.recorded} was reverted since the assistant last read it; read it again first "
                f"(turnback read {where.recorded}) so the change is made to what it holds now"
            )
        return where

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
        """Write *data* to *path* (making missing folders), keeping what it held before.

        Every file tool refuses (:class:`UncoveredError`) to destroy what it cannot keep a copy of (see
        :meth:`keepable`); *uncovered* goes ahead, and records the change as one that cannot be undone.
        """
        target = self._target(session_id)
        where = self._writable(session_id, self.locate(target.project, path, cwd))
        (where,) = self.keepable(target, [where], uncovered)
        shown = None if raw_input is None else raw_input if isinstance(raw_input, str) else json.dumps(raw_input)
        return self.store.call(tools.record_write(target, where, data, tool=tool, raw_input=shown))

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
        """Replace *old* by *new* in *path*: it must occur once, or every time with *replace_all*."""
        target = self._target(session_id)
        where = self._writable(session_id, self.locate(target.project, path, cwd))
        (where,) = self.keepable(target, [where], uncovered)
        max_file_mib = self.config_for(target.project).max_file_mib
        return self.store.call(
            tools.record_edit(target, where, old, new, max_file_mib=max_file_mib, replace_all=replace_all)
        )

    def delete(self, session_id: SessionId, path: str, *, cwd: str | None = None, uncovered: bool = False) -> Call:
        target = self._target(session_id)
        where = self._writable(session_id, self.locate(target.project, path, cwd))
        (where,) = self.keepable(target, [where], uncovered)
        return self.store.call(tools.record_delete(target, where))

    def move(
        self, session_id: SessionId, src: str, dst: str, *, cwd: str | None = None, uncovered: bool = False
    ) -> Call:
        target = self._target(session_id)
        project = target.project
        wheres = [self._writable(session_id, self.locate(project, path, cwd)) for path in (src, dst)]
        kept = self.keepable(target, wheres, uncovered)
        reason = next((where.uncovered for where in kept if where.uncovered), None)
        if reason is not None:  # a move's two states are one content: without a copy of it, neither is covered
            kept = [where._replace(uncovered=where.uncovered or reason) for where in kept]
        return self.store.call(tools.record_move(target, kept[0], kept[1]))

    def keepable(
        self, target: CallTarget, wheres: Sequence[tools.Location], uncovered: bool = False
    ) -> list[tools.Location]:
        """*wheres*, when turnback can keep a copy of what each holds before a call overwrites or removes it.

        The one rule for every file tool: a copy the call needs must fit ``store.max_mib`` beside what the
        running turn keeps already (the cap never drops the newest turn's copies, so a copy that does not
        fit would put the store over its cap), and the file must be readable. Otherwise the call is refused
        (:class:`UncoveredError`, nothing changed); with *uncovered* the paths come back marked not covered
        with the reason, so the change is recorded as one that cannot be undone and every view says so.
        An incognito session, and an outside path the mode copies nothing of, keep no copy anyway.
        """
        from turnback.ops import maintenance
        from turnback.render.diff import human_size

        if target.incognito:
            return list(wheres)
        max_mib = self.config.store_max_mib
        sized: list[tuple[int, int]] = []  # (index, size) of each file whose copy the call needs
        refused: dict[int, str] = {}
        for index, where in enumerate(wheres):
            entry = where.tree.lstat(where.rel) if where.uncovered is None else None
            if entry is None or not entry.is_file:
                continue
            try:
                with where.tree.open_file(where.rel):
                    pass
            except FileNotFoundError:
                continue
            except UnsafePathError as exc:
                refused[index] = f"it cannot be read: {exc}"
                continue
            sized.append((index, entry.size))
        kept = maintenance.turn_kept_bytes(self.store, target.turn.id) if sized else 0
        needed = kept
        for index, size in sized:
            if needed + size <= max_mib << 20:
                needed += size
                continue
            if size <= max_mib << 20 and self._already_kept(wheres[index]):
                continue  # e.g. what an earlier call of the turn wrote: its copy costs nothing more
            beside = f"; the running turn keeps {human_size(kept)} already" if kept else ""
            refused[index] = f"{human_size(size)}, over store.max_mib ({max_mib} MiB){beside}"
        if not refused:
            return list(wheres)
        if not uncovered:
            raise UncoveredError(tuple((wheres[i].recorded, reason) for i, reason in sorted(refused.items())))
        return [where._replace(uncovered=refused[i]) if i in refused else where for i, where in enumerate(wheres)]

    def _already_kept(self, where: tools.Location) -> bool:
        """Whether the store holds what *where* holds now (its copy is content-addressed): read and hashed only
        when the cap would refuse it otherwise."""
        from turnback.capture.states import probe_state

        try:
            state = probe_state(where.tree, where.rel, self.store)
        except (OSError, UnsafePathError):
            return False
        return state.blob is not None and self.store.blobs.has(state.blob)

    def mkdir(self, session_id: SessionId, path: str, *, cwd: str | None = None) -> Call:
        target = self._target(session_id)
        return self.store.call(tools.record_mkdir(target, self.locate(target.project, path, cwd)))

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
        """Start a call whose files the harness writes itself (see :class:`CallHandle`).

        *external_id* (harness, id), e.g. a tool use id, lets another process find the call again.
        *before*: paths to record :meth:`CallHandle.before` for now, in the same write (one fsync, not three:
        a hook's agent waits for it). A copy of one that turnback cannot keep refuses the call, nothing
        recorded (:class:`UncoveredError`), unless *uncovered* (see :meth:`keepable`).
        """
        text = raw_input if isinstance(raw_input, str) or raw_input is None else json.dumps(raw_input)
        target = self._target(session_id)
        with self.store.transaction():
            handle = CallHandle(self, CallRecorder.begin(target, tool, text), cwd)
            if external_id is not None:
                self.store.set_call_external_id(handle.id, self.store.external_id(*external_id))
            for path in before:
                handle.before(path, uncovered=uncovered)
        return handle

    def external_call(self, session_id: SessionId, harness: str, external: str) -> Call | None:
        """The call a harness knows by its own id (begun by another process), if any."""
        call_id = self.store.call_by_external_id(session_id, self.store.external_id(harness, external))
        return self.store.call(call_id) if call_id else None

    def session_for(self, harness: str, external: str, project_root: str, *, title: str | None = None) -> Session:
        """The session a harness knows by its own id; made (and its project registered) on first use."""
        key = self.store.external_id(harness, external)
        session = self.store.session_by_external_id(key)
        if session is not None:
            return session
        session = self.new_session(project_root, title=title or f"{harness} session")
        with self.store.transaction():
            self.store.set_session_external_id(session.id, key)
        return self.store.session(session.id)

    def begin_command(
        self,
        session_id: SessionId,
        command: str,
        *,
        cwd: str | None = None,
        external_id: tuple[str, str] | None = None,
        background: bool = False,
    ) -> CallId:
        """A shell command the harness runs itself: scan now; :meth:`finish_command` scans after and records.

        Until then the call shows "may be cut short" but blocks nothing (no
        process of turnback's waits for it).
        """
        from turnback.capture import commands

        target = self._target(session_id)
        workdir = self._workdir(target.project, cwd)
        call_id, _ = commands.start_call(
            target,
            ["sh", "-c", command],
            workdir,
            self._scan_rules(target.project),
            self._outside_rules(target.project),
            kind="job" if background else "command",
            unasked=False,
        )
        if external_id is not None:
            with self.store.transaction():
                self.store.set_call_external_id(call_id, self.store.external_id(*external_id))
        return call_id

    def finish_command(
        self,
        call_id: CallId,
        *,
        exit_code: int | None = None,
        error: str | None = None,
        started_at: float | None = None,
        ran: bool = True,
    ) -> Call:
        """Scan after a command the harness ran, and record what changed since :meth:`begin_command`.

        *started_at* (seconds since the epoch): when the command really started, if the harness tells it; a
        change whose file's ctime is earlier happened before the command ran (while a permission prompt
        waited) and is not the command's. *ran* False: the command never ran (denied), so nothing is its.
        """
        from turnback.capture import commands

        call = self.store.call(call_id)
        if call.status != "running":
            return call
        if not ran:
            with self.store.transaction():
                self.store.finish_call(call_id, "failed", error)
            return self.store.call(call_id)
        project = self.project_of(self.store.session(call.session_id))
        commands.finish_call(
            self.store,
            project,
            call,
            commands.load_call_before(self.store, call_id),
            self._scan_rules(project),
            self._outside_rules(project),
            exit_code=exit_code,
            error=error,
            started_ns=int(started_at * 1e9) if started_at is not None else None,
        )
        return self.store.call(call_id)

    def settle_turns(self, session_id: SessionId) -> list[Turn]:
        """End the session's running turns that nothing runs any more: their holder (the agent) is gone, or a
        command a harness began (:meth:`begin_command`) is left running and no process of the holder runs it
        (:func:`~turnback.ops.busy.harness_runs`). Their commands are recorded now; the turns that were ended.

        A harness sends no event when the agent is killed or its call is interrupted, so without this the
        turn would stay running (and undo refused) until the agent's next event.
        """
        settled = []
        for turn, holder_start in self.store.running_turns(session_id):
            pending = [
                call
                for call in self.store.calls_of_turn(turn.id)
                if call.kind == "command" and call.status == "running" and call.pid is None
            ]
            holder = turn.holder_pid
            gone = holder is not None and not process_alive(holder, holder_start)
            if not gone and not (pending and holder is not None and not harness_runs(self.store, pending, holder)):
                continue
            for call in pending:
                note = "the agent was stopped during the command" if gone else "the command was cut short"
                with contextlib.suppress(StoreError):
                    self.finish_command(call.id, error=f"{note}: recorded when turnback was next used")
            with self.store.transaction():
                self.store.end_turn(turn.id, "interrupted")
            settled.append(turn)
        return settled

    def unfinished_commands(self, session_id: SessionId) -> list[Call]:
        """Commands a harness began (:meth:`begin_command`) in the running turn and never finished."""
        turn = self.running_turn(session_id)
        return [
            call
            for call in self.store.calls_of_turn(turn.id)
            if call.kind in ("command", "job") and call.status == "running" and call.pid is None
        ]

    def resume_call(self, call_ref: str, *, cwd: str | None = None) -> CallHandle:
        """The handle of a call begun earlier (by another process), to record ``after`` and end it."""
        call = self.call(call_ref)
        session = self.store.session(call.session_id)
        project = self.project_of(session)
        turn = self.store.turn(call.turn_id)
        target = CallTarget(self.store, Tree(project.root), project, turn, session.incognito)
        return CallHandle(self, CallRecorder(target, call.id), cwd)

    # -- shell commands and background jobs ----------------------------------------------

    def _scan_rules(self, project: Project) -> ScanRules:
        from turnback.capture.scan import ScanRules

        config = self.config_for(project)
        root = project.root.rstrip("/") + "/"
        store_inside = self._real_home.startswith(root)
        return ScanRules(
            max_file_bytes=config.max_file_bytes,
            exclude=config.exclude,
            max_file_mib=config.max_file_mib,
            skip=frozenset([self._real_home[len(root) :]]) if store_inside else frozenset(),
        )

    def _workdir(self, project: Project, cwd: str | None) -> str:
        """The real folder a command runs in; a confined engine refuses one outside the project, or in the store.

        Its real path, not the path given: a link inside the project may lead anywhere.
        """
        workdir = os.path.realpath(cwd or project.root)
        if self.confined:
            store_home = self._real_home
            if workdir == store_home or workdir.startswith(store_home + os.sep):
                raise UnsafePathError(f"{cwd} is inside turnback's store, which the agent's tools never touch")
            root = project.root.rstrip("/")
            if workdir != root and not workdir.startswith(root + "/"):
                raise UnsafePathError(f"{cwd} leads outside the allowed folder {project.root}; commands run inside it")
        return workdir

    def _outside_rules(self, project: Project) -> commands.OutsideRules:
        from turnback.capture import commands

        config = self.config_for(project)
        return commands.OutsideRules(config.mode, config.home_max_files, config.home_max_mib)

    def _command_result(self, call_id: CallId, exit_code: int | None, *, timed_out: bool = False) -> CommandResult:
        from turnback.render.summary import command_line

        call = self.store.call(call_id)
        line = command_line(call.changes, self.load, notes=self.overlap_notes(call))
        return CommandResult(call, exit_code, timed_out, line)

    def overlap_notes(self, call: Call) -> Callable[[Change], str | None]:
        """Whose each change of *call* may be, when a job or a call running meanwhile may have made it.

        Reverting the command, or undoing its turn without that call, leaves such a change for
        ``--anyway``/``--force``. Asked per change shown (a command's line names only a few of its changes).
        """
        from turnback.ops.plan import change_overlap_note

        if call.kind not in ("command", "job") or not call.changes:
            return lambda _change: None
        project = self.project_of(self.store.session(call.session_id))
        return lambda change: change_overlap_note(self.store, project, change, call.kind)

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
        """Run a shell command as a call: scan, run (output passed through), scan; the difference is its change.

        A command still running after *timeout* seconds is left running: a
        detached watcher records its changes when it ends, and the session is
        busy until then (the result has ``timed_out`` and no exit status).
        *unasked*: the harness ran it without asking, because :meth:`covers`
        said turnback can undo it. *process_group*: the command leads a process group of its own, so a caller
        that stops it (an MCP client's cancel) stops what it started too; *started* is told its pid.
        """
        import subprocess

        from turnback.capture import commands

        if not argv:
            raise UsageError("give the command to run")
        target = self._target(session_id)
        workdir = self._workdir(target.project, cwd)
        if target.incognito:
            with self.store.transaction():
                call_id = self.store.create_call(
                    target.turn, "exec", json.dumps({"command": list(argv)}), kind="command"
                )
            code = subprocess.run(
                list(argv), cwd=workdir, stdout=stdout, stderr=stderr, check=False, env=_agent_command_environment()
            ).returncode
            with self.store.transaction():
                self.store.finish_call(call_id, "done", exit_code=code)
            return self._command_result(call_id, code)
        call_id, before = commands.start_call(
            target,
            argv,
            workdir,
            self._scan_rules(target.project),
            self._outside_rules(target.project),
            kind="command",
            unasked=unasked,
        )
        with self.store.transaction():
            self.store.set_call_processes(call_id, watcher_pid=os.getpid(), watcher_start=process_start(os.getpid()))
        try:
            group = 0 if process_group else None
            proc = subprocess.Popen(
                list(argv),
                cwd=workdir,
                stdout=stdout,
                stderr=stderr,
                process_group=group,
                env=_agent_command_environment(),
            )
        except OSError as exc:
            with self.store.transaction():
                self.store.finish_call(call_id, "failed", f"{argv[0]}: {exc.strerror}")
            raise CommandNotStarted(f"{argv[0]}: {exc.strerror}", exc.errno) from exc
        with self.store.transaction():
            self.store.set_call_processes(call_id, pid=proc.pid, pid_start=process_start(proc.pid))
        if started is not None:
            started(proc.pid)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            watcher = commands.spawn_helper(self.store, ["_watch", call_id], cwd=target.project.root)
            with self.store.transaction():
                self.store.set_call_processes(
                    call_id, watcher_pid=watcher.pid, watcher_start=process_start(watcher.pid)
                )
            return self._command_result(call_id, None, timed_out=True)
        except KeyboardInterrupt:
            code = proc.wait()  # the command got the same interrupt; record what it did before it ended
        commands.finish_call(
            self.store,
            target.project,
            self.store.call(call_id),
            before,
            self._scan_rules(target.project),
            self._outside_rules(target.project),
            exit_code=code,
        )
        return self._command_result(call_id, code)

    def start_job(
        self,
        session_id: SessionId,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        output: str | None = None,
        unasked: bool = False,
    ) -> Call:
        """Start a background job: a detached runner runs *argv* and records its changes when it ends.

        Its output goes to the file *output* (appended), else nowhere. The
        job's changes join the current turn; undoing that turn then needs
        ``--force``, and an undo is refused while the job runs.
        """
        from turnback.capture import commands

        if not argv:
            raise UsageError("give the command to run")
        target = self._target(session_id)
        if target.incognito:
            raise RefusedError("background jobs need copies, and this session is incognito; run the command with exec")
        workdir = self._workdir(target.project, cwd)
        call_id, _ = commands.start_call(
            target,
            argv,
            workdir,
            self._scan_rules(target.project),
            self._outside_rules(target.project),
            kind="job",
            unasked=unasked,
        )
        options = ["--cwd", workdir, *(["--output", os.path.abspath(output)] if output else [])]
        args = ["_job", *options, call_id, "--", *argv]
        runner = commands.spawn_helper(self.store, args, cwd=workdir)
        with self.store.transaction():
            self.store.set_call_processes(call_id, watcher_pid=runner.pid, watcher_start=process_start(runner.pid))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            call = self.store.call(call_id)
            if call.pid is not None or call.status != "running":
                break
            if runner.poll() is not None:
                with self.store.transaction():
                    self.store.finish_call(call_id, "failed", "the job runner stopped before starting the command")
                break
            time.sleep(0.02)
        return self.store.call(call_id)

    def run_job(self, call_id: CallId, argv: Sequence[str], *, cwd: str, output: str | None) -> None:
        """The job runner's part (in its own detached process): run the command, wait, record its changes."""
        import subprocess

        from turnback.capture import commands

        call = self.store.call(call_id)
        project = self.project_of(self.store.session(call.session_id))
        before = commands.load_call_before(self.store, call_id)
        sink = open(output, "ab") if output else subprocess.DEVNULL  # noqa: SIM115 - closed below
        try:
            try:
                # This runner was given the store's key to open it; the job's own command gets none of that.
                proc = subprocess.Popen(
                    list(argv),
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=sink,
                    process_group=0,
                    env=_agent_command_environment(),
                )
            except OSError as exc:
                with self.store.transaction():
                    self.store.finish_call(call_id, "failed", f"{argv[0]}: {exc.strerror}")
                return
            with self.store.transaction():
                self.store.set_call_processes(call_id, pid=proc.pid, pid_start=process_start(proc.pid))
            code = proc.wait()
        finally:
            if not isinstance(sink, int):
                sink.close()
        commands.finish_call(
            self.store,
            project,
            self.store.call(call_id),
            before,
            self._scan_rules(project),
            self._outside_rules(project),
            exit_code=code,
        )
        self.enforce_caps(project)

    def watch_command(self, call_id: CallId) -> None:
        """The watcher's part (in its own detached process): wait for a command past its timeout, record its changes."""
        from turnback.capture import commands

        call = self.store.call(call_id)
        pid, pid_start, _, _ = self.store.call_processes(call_id)
        if pid is not None:
            commands.wait_for_process(pid, pid_start)
        project = self.project_of(self.store.session(call.session_id))
        before = commands.load_call_before(self.store, call_id)
        commands.finish_call(
            self.store,
            project,
            self.store.call(call_id),
            before,
            self._scan_rules(project),
            self._outside_rules(project),
            exit_code=None,
        )
        self.enforce_caps(project)

    def covers(self, session_id: SessionId, argv: Sequence[str], *, cwd: str | None = None) -> Coverage:
        """Whether an undo can take back everything *argv* may destroy, so a harness may run it without asking.

        Yes only when every path the command can touch is in what the snapshots hold (see
        ``capture/reach.py``): no for a command turnback cannot see through (an interpreter, ``eval``,
        ``xargs``, ``find -exec``, a shell expansion, a program it does not know), ``shred`` and
        ``git clean -x``; no for ``/``, a device, the store, the home folder itself; no when a path it
        touches (or one below it) is left out of the snapshots (too large, excluded, unreadable); no for
        an outside path that is not copied before the command (the mode, the copy limits, or a path the
        command line does not name: a link's target, a pattern's folder).
        """
        from turnback.capture import commands, reach

        if not argv:
            raise UsageError("give the command to check")
        session = self.store.session(session_id)
        project = self.project_of(session)
        workdir = self._workdir(project, cwd)
        touched = reach.command_reach(argv, workdir)
        reasons = list(touched.reasons)
        # Scan now (cheap: the stat cache reads only what changed), so the answer is about the tree as it is.
        snapshot = commands.scan_project(self.store, project, self._scan_rules(project)).snapshot
        outside = self._outside_rules(project)
        copied = set(commands.named_outside_paths(argv, workdir, project.root, self._real_home))
        for path in touched.paths:
            untouchable = reach.untouchable(path, self._real_home)
            if untouchable is not None:
                reasons.append(untouchable)
            elif commands.is_inside(path, project.root):
                rel = os.path.relpath(path, project.root)
                left_out = [
                    f"{entry_path} is not covered: {entry.reason}"
                    for entry_path, entry in snapshot.items()
                    if entry.kind == "uncovered"
                    and (entry_path == rel or entry_path.startswith(rel + "/") or rel == ".")
                ]
                reasons += sorted(left_out)  # in path order, not the order the folder happened to list them
            elif path not in copied:
                reasons.append(f"{path} is outside the project, and turnback would not copy it before the command")
            else:
                refusal = commands.outside_copy_refusal(path, outside)
                if refusal is not None:
                    reasons.append(f"{path}: {refusal}")
        return Coverage(not reasons, tuple(dict.fromkeys(reasons)))

    def jobs(self, session_id: SessionId | None = None, *, project_id: ProjectId | None = None) -> list[Call]:
        """Background jobs and commands past their timeout, of a session or a project, newest last."""
        return self.store.command_calls(session_id=session_id, project_id=project_id)

    def stop_job(self, call_ref: str) -> Call:
        """Ask a running job (or a command past its timeout) to end; its runner records its changes."""
        from turnback.capture import commands

        call = self.call(call_ref)
        if call.kind not in ("job", "command") or call.status != "running" or call.pid is None:
            raise NothingToDoError(f"{short_id(call.id)} is not a running job")
        _, pid_start, _, _ = self.store.call_processes(call.id)
        if process_alive(call.pid, pid_start):
            commands.stop_process_group(call.pid)
        return call

    def scan(self, project: Project) -> int:
        """Scan the project now, as a command's scan does: what it holds becomes the baseline of the next call.

        A first scan is the slow one (every file is read, unless git's index vouches for it); a harness
        may run it when a session starts. Returns how many paths the project holds.
        """
        from turnback.capture import commands

        return len(commands.scan_project(self.store, project, self._scan_rules(project)).snapshot)

    def adopt_git_objects(self, project_id: ProjectId) -> int:
        """Copy into the store the git objects the project's first snapshot stands on (see ``gitindex``)."""
        from turnback.capture import commands

        adopted = commands.adopt_git_objects(self.store, self.project(project_id))
        if adopted:
            self.store.truncate_log()  # up to a whole tree went through the WAL: its file need not stay that size
        return adopted

    # -- the watcher ------------------------------------------------------------------------

    def watched_project(self, path: str) -> Project:
        """The registered project holding *path*."""
        real = os.path.realpath(path)
        project = self.store.project_containing(real)
        if project is None:
            raise UsageError(f"{real} is in no turnback project; run turnback init there first")
        return project

    def watch_start(self, project: Project) -> int:
        """Start the project's watcher as a detached process; returns its pid once it answers.

        It keeps the paths changed since each scan, so a scan visits only those.
        """
        import subprocess

        from turnback.capture import commands, watch
        from turnback.capture.inotify import Inotify

        running = watch.watcher_status(self.home, project.id)
        if running is not None:
            raise RefusedError(f"a watcher already runs for {project.root} (pid {running.pid})")
        Inotify().close()  # refuse here, not in a detached process, where inotify is missing
        os.makedirs(watch.watch_dir(self.home), mode=0o700, exist_ok=True)
        log_path = os.path.join(watch.watch_dir(self.home), f"{project.id}.log")
        with open(log_path, "ab") as log:
            # From "/": a watcher working in the project would keep a deleted project folder alive.
            proc = commands.spawn_helper(self.store, ["_watch-tree", project.id], cwd="/", output=log)
        deadline = time.monotonic() + WATCH_START_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                with open(log_path, "rb") as log:
                    last = (log.read().decode("utf-8", "replace").strip().splitlines() or ["no reason given"])[-1]
                raise RefusedError(f"the watcher for {project.root} did not start: {last}")
            status = watch.watcher_status(self.home, project.id)
            if status is not None and status.pid == proc.pid:
                return proc.pid
            time.sleep(0.02)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.terminate()
            proc.wait(1)
        raise RefusedError(f"the watcher for {project.root} did not answer within {WATCH_START_S:.0f} s; stopped it")

    def run_watcher(self, project_id: ProjectId) -> None:
        """Be the project's watcher until stopped (the detached process ``watch_start`` begins)."""
        from turnback.capture import watch

        project = self.project(project_id)
        rules = self._scan_rules(project)
        watch.run_watcher(self.home, project.id, project.root, rules.skip)

    def watch_status(self, project: Project) -> WatcherStatus | None:
        """The project's running watcher, if there is one."""
        from turnback.capture import watch

        return watch.watcher_status(self.home, project.id)

    def watch_stop(self, project: Project) -> int | None:
        """Stop the project's watcher; its pid, or ``None`` when none ran."""
        from turnback.capture import watch

        pid = watch.stop_watcher(self.home, project.id)
        if pid is not None:
            deadline = time.monotonic() + WATCH_START_S
            while process_alive(pid, None) and time.monotonic() < deadline:
                time.sleep(0.02)
        return pid

    # -- calls -----------------------------------------------------------------------------

    def call(self, ref: str) -> Call:
        """The call whose id starts with *ref*, with its changes."""
        return self.store.call(CallId(self.store.resolve_id("calls", ref, "call")))

    def missing_input_reason(self, call: Call) -> str:
        """Why a call has no recorded input."""
        if self.store.session(call.session_id).incognito:
            return "not kept: the session is incognito"
        if any(change.evicted for change in call.changes):
            return "dropped with the call's copies by the store.max_mib cap"
        return "no input recorded"

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
            project = self.project_of(self.store.session(call.session_id))
            for path in named:
                try:
                    where = self.locate(project, path, None)
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
            return inputs.UNREADABLE
        return inputs.without_contents(call.input)

    def turn_of(self, call: Call) -> Turn:
        return self.store.turn(call.turn_id)

    # -- taking changes back ---------------------------------------------------------------

    def _record_orphans(self, project: Project) -> None:
        """Record commands whose end turnback never recorded (it was killed): scan now against the snapshot
        taken before each ran, so their changes can still be undone."""
        from turnback.capture import commands

        for call in orphaned_commands(self.store, project.id):
            try:
                before = commands.load_call_before(self.store, call.id)
            except TurnbackError:
                with self.store.transaction():
                    self.store.finish_call(call.id, "failed", "turnback stopped before the command ended")
                continue
            commands.finish_call(
                self.store,
                project,
                call,
                before,
                self._scan_rules(project),
                self._outside_rules(project),
                exit_code=None,
                error="turnback stopped before it recorded the end; recorded when it was next used",
            )

    def _interrupted(self, session_id: SessionId) -> Plan | None:
        self._record_orphans(self.project_of(self.store.session(session_id)))
        applying = self.store.ops_in_status(session_id, "applying")
        return self.store.load_plan(applying[0]) if applying else None

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
        from turnback.render.summary import turn_title

        session = self.store.session(session_id)
        self.settle_turns(session_id)
        refuse_if_busy(self.store, session_id)
        interrupted = self._interrupted(session_id)
        if interrupted is not None:
            return interrupted
        number, from_number = self._turn_number(session_id, turn), self._turn_number(session_id, from_turn)
        turns = self.active_line(session_id)
        changed = self.store.turns_with_changes(session_id)
        if session.incognito and not changed:
            raise NothingToDoError("nothing to undo: this session is incognito, so it keeps no copies")
        chosen = [
            self.store.turn(t.id, with_calls=True)
            for t in select_undo_turns(turns, changed, number=number, from_number=from_number, force=force)
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
        plan = _with_commands_note(plan, chosen)
        self.store.save_plan(plan)
        return plan

    def plan_revert(self, call_ref: str, *, anyway: bool = False) -> Plan:
        """Plan reverting one call (stored, not applied). An interrupted operation of its session comes back first."""
        from turnback.ops.plan import plan_revert
        from turnback.render.summary import call_title

        call = self.call(call_ref)
        session = self.store.session(call.session_id)
        self.settle_turns(session.id)
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

    # -- the history tree ------------------------------------------------------------------

    def active_line(self, session_id: SessionId) -> list[Turn]:
        """The turns from the session's first to its head, oldest first (without calls)."""
        session = self.store.session(session_id)
        by_id = {turn.id: turn for turn in self.store.turns(session_id)}
        line: list[Turn] = []
        current = session.head
        while current is not None and current in by_id:
            line.append(by_id[current])
            current = by_id[current].parent
        return list(reversed(line))

    def _turn_ref(self, session_id: SessionId, ref: str) -> Turn | None:
        """The turn *ref* names (a number, or an id prefix of any session, so a wrong one is named); 0: the start."""
        if ref.strip() in ("0", "start"):
            return None
        if ref.isdigit() and len(ref) < 12:
            return self.store.turn_by_number(session_id, int(ref))
        turn = self.store.turn(TurnId(self.store.resolve_id("turns", ref, "turn")))
        if turn.session_id != session_id:
            raise RefusedError(
                f"turn {short_id(turn.id)} belongs to another session, not {short_id(session_id)}; nothing was changed"
            )
        return turn

    def _turn_number(self, session_id: SessionId, ref: int | str | None) -> int | None:
        """The number of the turn *ref* names (a number, or an id or unique prefix of one)."""
        if ref is None or isinstance(ref, int):
            return ref
        if ref.strip().isdigit() and len(ref.strip()) < 12:
            return int(ref)  # a number the session may not have: the undo says so in its words
        turn = self._turn_ref(session_id, ref)
        return 0 if turn is None else turn.number

    def plan_rollback(
        self, session_id: SessionId, target: str, *, expect_head: str | None = None, confirming: bool = False
    ) -> Plan:
        """Plan rolling back to turn *target* (number or id; ``0``: the session's start), stored, not applied.

        *expect_head* is the head the caller saw (number or id): a stale one is refused, nothing changed.
        *confirming* without *expect_head*: the head the session's last rollback preview saw is expected,
        so a turn that arrived after the preview is never rolled back unseen.
        """
        from turnback.ops.plan import plan_rollback
        from turnback.render.summary import turn_title

        session = self.store.session(session_id)
        self.settle_turns(session_id)
        refuse_if_busy(self.store, session_id)
        interrupted = self._interrupted(session_id)
        if interrupted is not None:
            return interrupted
        if expect_head is None and confirming:
            previewed = self._last_rollback_preview(session_id)
            if previewed is not None and previewed.head_from != session.head:
                shown = self.store.turn(previewed.head_from).number if previewed.head_from else 0
                now = self.store.turn(session.head).number if session.head else 0
                raise RefusedError(
                    f"the head moved since the preview: it showed turn {shown}, the head is now turn {now}. "
                    f"Nothing was changed: look again (turnback rollback {target})"
                )
        if expect_head is not None:
            seen = self._turn_ref(session_id, expect_head)
            if (seen.id if seen else None) != session.head:
                now = self.store.turn(session.head).number if session.head else 0
                raise RefusedError(
                    f"stale head: the session's head is turn {now}, not the one given ({expect_head}); "
                    "another turn or rollback happened since. Nothing was changed: look again"
                )
        node = self._turn_ref(session_id, target)
        line = self.active_line(session_id)
        if node is not None and node.id not in {turn.id for turn in line}:
            raise RefusedError(
                f"turn {node.number} is on an abandoned branch, not on the active line; roll back to a turn of the line"
            )
        start = 0 if node is None else [turn.id for turn in line].index(node.id) + 1
        rewound = [self.store.turn(turn.id, with_calls=True) for turn in reversed(line[start:])]
        if not rewound:
            raise NothingToDoError(f"nothing to roll back: turn {node.number if node else 0} is the head")
        project = self.project_of(session)
        plan = plan_rollback(
            self.store,
            Tree(project.root),
            session,
            project,
            node,
            rewound,
            title_for=lambda t: turn_title(t, self.load),
            op_id=OpId(self.store.new_id()),
        )
        plan = _with_commands_note(plan, rewound)
        self.store.save_plan(plan)
        return plan

    def _last_rollback_preview(self, session_id: SessionId) -> Plan | None:
        """The session's newest rollback plan shown since its last applied operation (None: none kept)."""
        applied = self.store.ops_in_status(session_id, "done")
        for op_id in reversed(self.store.ops_in_status(session_id, "planned")):
            if applied and op_id < applied[-1]:
                break  # shown before an operation that changed the session: that preview is spent
            plan = self.store.load_plan(op_id)
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
            raise UsageError(f"resend mode {mode!r}: use revert, anyway or keep")
        session = self.store.session(session_id)
        self.settle_turns(session_id)
        refuse_if_busy(self.store, session_id)
        interrupted = self._interrupted(session_id)
        if interrupted is not None:
            return interrupted
        edited = self._turn_ref(session_id, target)
        if edited is None:
            raise UsageError("give the number of the turn whose message is edited (1 or more)")
        line = self.active_line(session_id)
        ids = [turn.id for turn in line]
        if edited.id not in ids:
            raise RefusedError(f"turn {edited.number} is on an abandoned branch; edit a message of the active line")
        dropped = [self.store.turn(turn.id, with_calls=True) for turn in reversed(line[ids.index(edited.id) :])]
        project = self.project_of(session)
        plan = plan_resend(
            self.store,
            Tree(project.root),
            session,
            project,
            self.store.turn(edited.id),
            dropped,
            mode=mode,
            op_id=OpId(self.store.new_id()),
        )
        self.store.save_plan(plan)
        return plan

    def resend_files(self, plan: Plan) -> list[ResendFile]:
        """For a resend: each file its calls changed, once: how many calls, and the lines a revert adds and removes."""
        from turnback.render.diff import diff_bytes

        project = self.store.project(plan.project_id)
        tree = Tree(project.root)
        counts: dict[str, int] = {}
        first: dict[str, FileState] = {}
        outside: set[str] = set()
        for turn_id in reversed(plan.turn_ids):
            for call in self.store.calls_of_turn(TurnId(turn_id)):
                for path in dict.fromkeys(c.path for c in call.changes if not c.reverted):
                    counts[path] = counts.get(path, 0) + 1
                for change in call.changes:
                    if not change.reverted:
                        first.setdefault(change.path, change.before)
                        if change.outside:
                            outside.add(change.path)
        files = []
        for name, calls in counts.items():
            before = first[name]
            if before.kind == "dir" or name in outside:
                continue
            try:
                now = tree.read_bytes(RelPath(name))
            except (OSError, TurnbackError):
                now = None
            earlier = self.load(before.blob) if before.kind == "file" and before.blob else None
            diff = diff_bytes(now, earlier)
            files.append(ResendFile(name, calls, diff.added, diff.removed))
        return files

    def plan_redo(self, session_id: SessionId) -> Plan:
        """Plan taking back the session's newest operation (undo, revert, rollback, or a redo), stored, not applied."""
        from turnback.ops.plan import plan_redo

        session = self.store.session(session_id)
        self.settle_turns(session_id)
        refuse_if_busy(self.store, session_id)
        interrupted = self._interrupted(session_id)
        if interrupted is not None:
            return interrupted
        op_id = self.store.newest_op_to_take_back(session_id)
        if op_id is None:
            raise NothingToDoError("nothing to redo: no operation of this session is left to take back")
        op = self.store.load_plan(op_id)
        if op.kind == "resend":
            raise RefusedError(
                f"the newest operation is an edit and resend ({short_id(op.id)}), which deleted its calls and "
                "cannot be taken back; what it displaced is in its trash"
            )
        if op.moves_head and session.head != op.head_to:
            raise RefusedError(
                f"the session's head moved since the {op.kind} {short_id(op.id)} (turns were added after it), "
                "so it cannot be taken back: that would abandon them"
            )
        project = self.project_of(session)
        plan = plan_redo(self.store, Tree(project.root), session, project, op, op_id=OpId(self.store.new_id()))
        self.store.save_plan(plan)
        return plan

    def operations(self, session_id: SessionId) -> list[Plan]:
        """The session's applied operations, oldest first."""
        return [self.store.load_plan(op_id) for op_id, *_ in self.store.ops_of_session(session_id)]

    def taken_back_by(self, session_id: SessionId) -> dict[str, str]:
        """Which operation took back which: operation id -> the redo's id."""
        return {op_id: by for op_id, _, _, _, by in self.store.ops_of_session(session_id) if by}

    # -- marks, notices, reads, the files view ---------------------------------------------

    def busy_start(self, session_id: SessionId, reason: str, *, holder_pid: int | None = None) -> str:
        """Mark the session busy (compaction, an approval waiting): undo, revert, rollback and resend refuse."""
        if not reason.strip():
            raise UsageError("say why the session is busy")
        self.store.session(session_id)
        pid = holder_pid if holder_pid is not None else os.getpid()
        return self.store.add_busy_mark(session_id, reason.strip(), pid, process_start(pid))

    def busy_end(self, session_id: SessionId, reason: str | None = None) -> int:
        """End the session's busy marks (those with *reason*, or all); how many ended."""
        ended = 0
        with self.store.transaction():
            for mark_id, mark_reason, _, _ in self.store.busy_marks(session_id):
                if reason is None or mark_reason == reason.strip():
                    self.store.remove_busy_mark(mark_id)
                    ended += 1
        return ended

    def notices(self, session_id: SessionId) -> list[Notice]:
        """Pending notices for the assistant (``Reverted the change to PATH``), each delivered once."""
        return self.store.take_notices(session_id)

    def read(self, session_id: SessionId, path: str, *, cwd: str | None = None) -> bytes:
        """Read a file for the assistant; a file reverted since it last read it may be changed again."""
        project = self.project_of(self.store.session(session_id))
        where = self.locate(project, path, cwd)
        try:
            data = where.tree.read_bytes(where.rel)
        except FileNotFoundError:
            raise UsageError(f"{where.recorded} does not exist") from None
        with self.store.transaction():
            self.store.mark_read(session_id, where.recorded)
        return data

    def browse(self, session_id: SessionId, path: str, *, cwd: str | None = None) -> tuple[Tree, RelPath | None]:
        """Where a read-only tool looks: the project's tree and the path in it (``None``: the root itself)."""
        project = self.project_of(self.store.session(session_id))
        absolute = absolute_user_path(cwd or project.root, path)
        root = project.root.rstrip("/")
        if absolute == root:
            return Tree(project.root), None
        if not absolute.startswith(root + "/"):
            raise UnsafePathError(f"{path} is outside the allowed folder {project.root}")
        rel = make_rel_path(absolute[len(root) + 1 :])
        store_home = self._real_home
        if absolute == store_home or absolute.startswith(store_home + os.sep):
            raise UnsafePathError(f"{path} is inside turnback's store")
        return Tree(project.root), rel

    @contextlib.contextmanager
    def tool_turn(self, session_id: SessionId, *, gap_s: float, holder_pid: int | None = None) -> Iterator[Turn]:
        """A turn that runs only while one tool call runs (an MCP server's): the session's running turn if
        someone began one, else the last one again if it ended less than *gap_s* ago and is not undone, else
        a new one. It is ended when the call returns, so an idle server never blocks an undo."""
        pid = holder_pid if holder_pid is not None else os.getpid()
        running = live_running_turns(self.store, session_id)
        if running:
            turn = running[-1]
        else:
            turns = self.store.turns(session_id)
            last = turns[-1] if turns else None
            fresh = (
                last is not None
                and last.ended_at is not None
                and last.undone == "no"
                and not last.resent
                and (self.store.now() - last.ended_at) / 1e9 < gap_s
            )
            if last is not None and fresh and self._reopen_tool_turn(last.id, pid):
                turn = self.store.turn(last.id)
            else:
                turn = self.begin_turn(session_id, None, holder_pid=pid)
        try:
            yield turn
        finally:
            # Not synced on its own (each sync costs a write call milliseconds): losing this mark to a power
            # cut leaves the turn "running" for a holder that is gone, which counts as not running.
            with self.store.transaction(durable=False):
                self.store.end_turn(turn.id, "ended")

    def _reopen_tool_turn(self, turn_id: TurnId, pid: int) -> bool:
        """Reopen a tool turn without a sync of its own: the call's record, committed durably next, makes it
        durable too (a WAL sync covers the commits before it); lost before that, no call was made in it."""
        with self.store.transaction(durable=False):
            return self.store.reopen_turn(turn_id, holder_pid=pid, holder_start=process_start(pid))

    def files(self, session_id: SessionId) -> list[tuple[str, str]]:
        """Each file the active line touched, and its state: as of, created in, deleted in turn N, or reverted."""
        latest: dict[str, tuple[int, str]] = {}
        touched: dict[str, None] = {}
        for turn in self.active_line(session_id):
            for call in self.store.calls_of_turn(turn.id):
                for change in call.changes:
                    if "dir" in (change.before.kind, change.after.kind if change.after else ""):
                        continue
                    touched.setdefault(change.path)
                    if not change.reverted:
                        word = {"new": "created in", "deleted": "deleted in"}.get(change.kind, "as of")
                        latest[change.path] = (turn.number, word)
        return [
            (path, f"{latest[path][1]} turn {latest[path][0]}" if path in latest else "reverted") for path in touched
        ]

    # -- storage ---------------------------------------------------------------------------

    def enforce_caps(self, project: Project | None = None) -> maintenance.Reclaimed:
        """Drop the oldest copies over ``store.max_mib`` (and the stat caches' over ``snapshot.max_mib``)."""
        from turnback.ops import maintenance

        config = self.config_for(project) if project else self.config
        return maintenance.enforce_caps(
            self.store,
            max_bytes=self.config.store_max_mib << 20,
            snapshot_max_bytes=config.snapshot_max_mib << 20,
            snapshot_mib=config.snapshot_max_mib,
        )

    def kept_bytes(self) -> int:
        """The file text kept for reverting (what ``store.max_mib`` bounds)."""
        from turnback.ops import maintenance

        return maintenance.kept_bytes(self.store)

    def gc(self, *, vacuum: bool | None = None) -> maintenance.Reclaimed:
        """Reclaim the copies nothing needs any more, and the disk space (VACUUM when worth it)."""
        from turnback.ops import maintenance

        return maintenance.gc(self.store, vacuum=vacuum)

    def verify(self) -> maintenance.Damage:
        """Check every copy decrypts and matches its id, and SQLite's integrity; change nothing."""
        from turnback.ops import maintenance

        return maintenance.verify(self.store)

    def delete_session(self, session_id: SessionId) -> None:
        """Delete a session with its turns, calls, operations and copies (its trash folders stay)."""
        from turnback.ops import maintenance

        refuse_if_busy(self.store, session_id)
        maintenance.delete_session(self.store, session_id)

    def config_value(self, key: str, *, project_root: str | None = None) -> object:
        from turnback.config import config_value

        root = os.path.realpath(project_root) if project_root else None
        return config_value(self.home, key, root)

    def set_config(self, key: str, value: str, *, project_root: str | None = None) -> object:
        """Set a key in the store's config.toml, store-wide or for one project (never inside the project)."""
        from turnback.config import load_config, set_config_value

        root = None
        if project_root is not None:
            root = self.init_project(project_root)[0].root
        written = set_config_value(self.home, key, value, root)
        self._config = load_config(self.home)
        self._project_configs.clear()
        return written

    def status(self, session_id: SessionId) -> SessionStatus:
        """What is going on in a session: its head, what runs, what marks it busy, an interrupted operation."""
        session = self.store.session(session_id)
        project = self.project_of(session)
        return SessionStatus(
            session=session,
            head=self.store.turn(session.head) if session.head else None,
            running=tuple(live_running_turns(self.store, session_id)),
            busy=tuple(reason for _, reason, _, _ in self.store.busy_marks(session_id)),
            commands=tuple(live_commands(self.store, project.id)),
            interrupted=self._interrupted(session_id),
            kept_bytes=self.kept_bytes(),
        )

    def plan(self, op_ref: str) -> Plan:
        """A stored plan (or operation) by id prefix."""
        return self.store.load_plan(OpId(self.store.resolve_id("ops", op_ref, "operation")))

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

        project = self.store.project(plan.project_id)
        result = apply_plan(self.store, Tree(project.root), plan)
        reverted = [
            row.path
            for row in result.plan.rows
            if row.status == "done" and row.action in ("restore", "trash") and row.ref is None
        ]
        if reverted and result.plan.kind in ("revert", "resend"):
            with self.store.transaction():
                self.store.add_notices(plan.session_id, [(path, f"Reverted the change to {path}") for path in reverted])
        notes = [note for note in (service_note(path) for path in reverted) if note]
        return result._replace(notes=result.notes + tuple(notes))


def _with_commands_note(plan: Plan, turns: Sequence[Turn]) -> Plan:
    """*plan* saying, once, that what the turns' commands did outside the recorded files is not undone."""
    from turnback.render.summary import commands_not_undone

    note = commands_not_undone([call for turn in turns for call in turn.calls])
    return plan._replace(notes=(*plan.notes, note)) if note else plan


__all__ = [
    "CallHandle",
    "CallHidden",
    "CommandNotStarted",
    "CommandResult",
    "Coverage",
    "Engine",
    "ResendFile",
    "SessionPick",
    "SessionStatus",
    "TurnDiff",
    "TurnHandle",
]

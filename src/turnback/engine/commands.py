"""Shell commands and background jobs as calls: a scan before, the command, a scan after; the difference is
the call's change. Commands a harness runs itself, commands turnback runs, jobs and the detached processes
that record a command's end (a watcher past a timeout, a job's runner), and commands left unrecorded."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, NoReturn

from turnback.capture.calls import CallTarget
from turnback.catalog import Message
from turnback.errors import NothingToDoError, RefusedError, TurnbackError, UsageError, as_message
from turnback.home import agent_environment
from turnback.model import ABSENT, Call, CallId, CallKind, Change, FileState, Project, ProjectId, SessionId, short_id
from turnback.ops.busy import orphaned_commands
from turnback.paths import RelPath
from turnback.procs import hide_own_environment, process_alive, process_start

from .values import CommandNotStarted, CommandResult, Coverage

if TYPE_CHECKING:
    from turnback.capture import commands
    from turnback.capture.scan import ScanRules

    from .facade import Engine


def _agent_command_environment() -> dict[str, str]:
    """The environment for an agent's command about to start, with this process's own (which may hold the
    store's key) hidden from it: the command runs as the same user and could read ``/proc/PPID/environ``."""
    hide_own_environment()
    return agent_environment()


class Commands:
    """The commands facet of an :class:`~turnback.engine.Engine`."""

    def __init__(self, engine: Engine):
        self._engine = engine
        self._store = engine.store

    # -- rules -----------------------------------------------------------------------------

    def scan_rules(self, project: Project) -> ScanRules:
        from turnback.capture.scan import ScanRules

        config = self._engine.config_for(project)
        store = self._engine._paths.store_in(project)
        return ScanRules(
            max_file_bytes=config.max_file_bytes,
            exclude=config.exclude,
            max_file_mib=config.max_file_mib,
            skip=frozenset([store]) if store is not None else frozenset(),
        )

    def _outside_rules(self, project: Project) -> commands.OutsideRules:
        from turnback.capture import commands

        config = self._engine.config_for(project)
        return commands.OutsideRules(config.mode, config.home_max_files, config.home_max_mib)

    # -- one call's start and end ----------------------------------------------------------

    def _start(
        self,
        target: CallTarget,
        argv: Sequence[str],
        workdir: str,
        *,
        kind: CallKind,
        unasked: bool,
        external_id: tuple[str, str] | None = None,
    ) -> tuple[CallId, commands.CallBefore]:
        """Scan the baseline and record the running call (see ``capture.commands.start_call``)."""
        from turnback.capture import commands

        rules, outside = self.scan_rules(target.project), self._outside_rules(target.project)
        call_id, before = commands.start_call(
            target, argv, workdir, rules, outside, kind=kind, unasked=unasked, external_id=external_id
        )
        self._engine._watcher.start_if_big(target.project, len(before.project))
        return call_id, before

    def _record_end(
        self,
        project: Project,
        call_id: CallId,
        before: commands.CallBefore,
        *,
        exit_code: int | None,
        error: Message | None = None,
        started_ns: int | None = None,
    ) -> None:
        """Scan after the command, and record the difference from its snapshot as the call's changes."""
        from turnback.capture import commands

        rules, outside = self.scan_rules(project), self._outside_rules(project)
        call = self._store.call(call_id)
        commands.finish_call(
            self._store, project, call, before, rules, outside, exit_code=exit_code, error=error, started_ns=started_ns
        )

    def _failed(self, call_id: CallId, error: Message | None) -> None:
        with self._store.transaction():
            self._store.finish_call(call_id, "failed", error)

    def _set_watcher(self, call_id: CallId, pid: int) -> None:
        with self._store.transaction():
            self._store.set_call_processes(call_id, watcher_pid=pid, watcher_start=process_start(pid))

    def _set_process(self, call_id: CallId, pid: int) -> None:
        with self._store.transaction():
            self._store.set_call_processes(call_id, pid=pid, pid_start=process_start(pid))

    # -- commands a harness runs itself ----------------------------------------------------

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
        target = self._engine._tools.target(session_id)
        workdir = self._engine._paths.workdir(target.project, cwd)
        kind: CallKind = "job" if background else "command"
        call_id, _ = self._start(
            target, ["sh", "-c", command], workdir, kind=kind, unasked=False, external_id=external_id
        )
        return call_id

    def finish_command(
        self,
        call_id: CallId,
        *,
        exit_code: int | None = None,
        error: Message | str | None = None,
        started_at: float | None = None,
        ran: bool = True,
    ) -> Call:
        """Scan after a command the harness ran, and record what changed since :meth:`begin_command`.

        *started_at* (seconds since the epoch): when the command really started, if the harness tells it; a
        change whose file's ctime is earlier happened before the command ran (while a permission prompt
        waited) and is not the command's. *ran* False: the command never ran (denied), so nothing is its.
        *error*: why it failed, was denied or was cut short (a harness's own text is kept as it is).
        """
        from turnback.capture import commands

        error = as_message(error) if error is not None else None
        call = self._store.call(call_id)
        if call.status != "running":
            return call
        if not ran:
            self._failed(call_id, error)
            return self._store.call(call_id)
        project = self._engine._sessions.project_of_session(call.session_id)
        before = commands.load_call_before(self._store, call_id)
        started_ns = int(started_at * 1e9) if started_at is not None else None
        self._record_end(project, call_id, before, exit_code=exit_code, error=error, started_ns=started_ns)
        return self._store.call(call_id)

    def record_edit_since_scan(
        self, session_id: SessionId, tool: str, raw_input: object, path: str, *, cwd: str | None = None
    ) -> Call:
        """A file the harness already edited, with no event before the edit (Cursor's afterFileEdit): its
        earlier state is what the project's last scan saw. A path outside the project, or one no scan saw
        before (no scan yet), is recorded as not covered: there is no earlier copy to go back to."""
        from turnback.capture import commands

        target = self._engine._tools.target(session_id)
        where = self._engine._paths.locate(target.project, path, cwd)
        shown = raw_input if isinstance(raw_input, str) else json.dumps(raw_input)
        no_copy = Message("agent_edit_without_earlier_scan", path=where.recorded)
        if where.outside:
            with self._store.transaction():
                call_id = self._store.create_call(target.turn, tool, shown)
                after = FileState("file") if os.path.lexists(where.recorded) else ABSENT
                self._store.add_change(
                    call_id,
                    0,
                    target.project.id,
                    RelPath(where.recorded),
                    FileState("file"),
                    after,
                    outside=True,
                    not_covered=no_copy,
                )
                self._store.finish_call(call_id, "done", None)
            return self._store.call(call_id)
        rules, outside = self.scan_rules(target.project), self._outside_rules(target.project)
        call_id = commands.record_since_last_scan(target, tool, shown, where.rel, rules, outside, no_scan=no_copy)
        return self._store.call(call_id)

    def unfinished_commands(self, session_id: SessionId) -> list[Call]:
        """Commands a harness began (:meth:`begin_command`) in the running turn and never finished."""
        turn = self._engine._sessions.running_turn(session_id)
        return [
            call
            for call in self._store.calls_of_turn(turn.id)
            if call.kind in ("command", "job") and call.status == "running" and call.pid is None
        ]

    def unfinished_file_calls(self, session_id: SessionId) -> list[Call]:
        """File calls a harness began (:meth:`Engine.begin_call`) in the running turn and never ended."""
        turn = self._engine._sessions.running_turn(session_id)
        return [call for call in self._store.calls_of_turn(turn.id) if call.kind == "tool" and call.status == "running"]

    def record_orphans(self, project: Project) -> None:
        """Record commands whose end turnback never recorded (it was killed): scan now against the snapshot
        taken before each ran, so their changes can still be undone."""
        from turnback.capture import commands

        for call in orphaned_commands(self._store, project.id):
            try:
                before = commands.load_call_before(self._store, call.id)
            except TurnbackError:
                self._failed(call.id, Message("stopped_before_command_ended"))
                continue
            self._record_end(project, call.id, before, exit_code=None, error=Message("stopped_before_end_recorded"))

    # -- commands turnback runs ------------------------------------------------------------

    def _command_result(self, call_id: CallId, exit_code: int | None, *, timed_out: bool = False) -> CommandResult:
        from turnback.render.summary import command_line

        call = self._store.call(call_id)
        line = command_line(call.changes, self._engine.load, notes=self.overlap_notes(call))
        return CommandResult(call, exit_code, timed_out, line)

    def overlap_notes(self, call: Call) -> Callable[[Change], Message | None]:
        """Whose each change of *call* may be, when a job or a call running meanwhile may have made it.

        Reverting the command, or undoing its turn without that call, leaves such a change for
        ``--anyway``/``--force``. Asked per change shown (a command's line names only a few of its changes).
        """
        from turnback.ops.plan import change_overlap_note

        if call.kind not in ("command", "job") or not call.changes:
            return lambda _change: None
        project = self._engine._sessions.project_of_session(call.session_id)
        return lambda change: change_overlap_note(self._store, project, change, call.kind)

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

        target, workdir = self._command_target(session_id, argv, cwd)
        if target.incognito:
            with self._store.transaction():
                call_id = self._store.create_call(
                    target.turn, "exec", json.dumps({"command": list(argv)}), kind="command"
                )
            code = subprocess.run(
                list(argv), cwd=workdir, stdout=stdout, stderr=stderr, check=False, env=_agent_command_environment()
            ).returncode
            with self._store.transaction():
                self._store.finish_call(call_id, "done", exit_code=code)
            return self._command_result(call_id, code)
        call_id, before = self._start(target, argv, workdir, kind="command", unasked=unasked)
        self._set_watcher(call_id, os.getpid())
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
            self.fail_exec(call_id, argv[0], exc.errno, exc.strerror)
        self._set_process(call_id, proc.pid)
        if started is not None:
            started(proc.pid)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            watcher = commands.spawn_helper(self._store, ["_watch", call_id], cwd=target.project.root)
            self._set_watcher(call_id, watcher.pid)
            return self._command_result(call_id, None, timed_out=True)
        except KeyboardInterrupt:
            code = proc.wait()  # the command got the same interrupt; record what it did before it ended
        self._record_end(target.project, call_id, before, exit_code=code)
        return self._command_result(call_id, code)

    def _command_target(self, session_id: SessionId, argv: Sequence[str], cwd: str | None) -> tuple[CallTarget, str]:
        """Where a command of the session is recorded, and the real folder it runs in."""
        if not argv:
            raise UsageError(Message("give_command_to_run"))
        target = self._engine._tools.target(session_id)
        return target, self._engine._paths.workdir(target.project, cwd)

    # -- commands another process of turnback's runs: ``turnback exec`` served by the hook relay ----------

    def begin_exec(
        self,
        session_id: SessionId,
        argv: Sequence[str],
        *,
        runner_pid: int,
        cwd: str | None = None,
        unasked: bool = False,
    ) -> tuple[CallId, str] | None:
        """:meth:`run_command` up to the command's start, for a command the process *runner_pid* runs itself and
        waits for: scan, record the running call (as ``run_command`` records it, that process its watcher); the
        call and the real folder to run it in. Then :meth:`exec_started`, and :meth:`finish_exec` or
        :meth:`fail_exec`. None for an incognito session (no scan: :meth:`run_command` runs it)."""
        target, workdir = self._command_target(session_id, argv, cwd)
        if target.incognito:
            return None
        call_id, _ = self._start(target, argv, workdir, kind="command", unasked=unasked)
        self._set_watcher(call_id, runner_pid)
        return call_id, workdir

    def exec_started(self, call_id: CallId, pid: int) -> None:
        """The command of :meth:`begin_exec` runs as process *pid*."""
        self._set_process(call_id, pid)

    def finish_exec(self, call_id: CallId, exit_code: int, *, started_at: float | None) -> CommandResult:
        """The command of :meth:`begin_exec` ended with *exit_code* (negative: the signal that ended it): scan
        and record what changed since *started_at* (when it really started), as :meth:`run_command` does."""
        self.finish_command(call_id, exit_code=exit_code, started_at=started_at)
        return self._command_result(call_id, exit_code)

    def fail_exec(self, call_id: CallId, program: str, error_number: int | None, why: str | None) -> NoReturn:
        """The command of *call_id* could not be started (``OSError`` *error_number*, *why*): recorded as failed."""
        not_started = Message("path_system_error", path=program, error=why or "")
        self._failed(call_id, not_started)
        raise CommandNotStarted(not_started, error_number)

    def watch_command(self, call_id: CallId) -> None:
        """The watcher's part (in its own detached process): wait for a command past its timeout, record its changes."""
        from turnback.capture import commands

        call = self._store.call(call_id)
        pid, pid_start, _, _ = self._store.call_processes(call_id)
        if pid is not None:
            commands.wait_for_process(pid, pid_start)
        project = self._engine._sessions.project_of_session(call.session_id)
        self._record_end(project, call_id, commands.load_call_before(self._store, call_id), exit_code=None)
        self._engine.enforce_caps(project)

    # -- background jobs -------------------------------------------------------------------

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
            raise UsageError(Message("give_command_to_run"))
        target = self._engine._tools.target(session_id)
        if target.incognito:
            raise RefusedError(Message("job_incognito_refused"))
        workdir = self._engine._paths.workdir(target.project, cwd)
        call_id, _ = self._start(target, argv, workdir, kind="job", unasked=unasked)
        options = ["--cwd", workdir, *(["--output", os.path.abspath(output)] if output else [])]
        runner = commands.spawn_helper(self._store, ["_job", *options, call_id, "--", *argv], cwd=workdir)
        self._set_watcher(call_id, runner.pid)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            call = self._store.call(call_id)
            if call.pid is not None or call.status != "running":
                break
            if runner.poll() is not None:
                self._failed(call_id, Message("job_runner_stopped"))
                break
            time.sleep(0.02)
        return self._store.call(call_id)

    def run_job(self, call_id: CallId, argv: Sequence[str], *, cwd: str, output: str | None) -> None:
        """The job runner's part (in its own detached process): run the command, wait, record its changes."""
        import subprocess

        from turnback.capture import commands

        call = self._store.call(call_id)
        project = self._engine._sessions.project_of_session(call.session_id)
        before = commands.load_call_before(self._store, call_id)
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
                self._failed(call_id, Message("path_system_error", path=argv[0], error=exc.strerror or ""))
                return
            self._set_process(call_id, proc.pid)
            code = proc.wait()
        finally:
            if not isinstance(sink, int):
                sink.close()
        self._record_end(project, call_id, before, exit_code=code)
        self._engine.enforce_caps(project)

    def jobs(self, session_id: SessionId | None = None, *, project_id: ProjectId | None = None) -> list[Call]:
        """Background jobs and commands past their timeout, of a session or a project, newest last."""
        return self._store.command_calls(session_id=session_id, project_id=project_id)

    def stop_job(self, call_ref: str) -> Call:
        """Ask a running job (or a command past its timeout) to end; its runner records its changes."""
        from turnback.capture import commands

        call = self._engine._history.call(call_ref)
        if call.kind not in ("job", "command") or call.status != "running" or call.pid is None:
            raise NothingToDoError(Message("not_a_running_job", call=short_id(call.id)))
        _, pid_start, _, _ = self._store.call_processes(call.id)
        if process_alive(call.pid, pid_start):
            commands.stop_process_group(call.pid)
        return call

    # -- what a command can reach, and the snapshots ---------------------------------------

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
            raise UsageError(Message("give_command_to_check"))
        project = self._engine._sessions.project_of_session(session_id)
        workdir = self._engine._paths.workdir(project, cwd)
        store_home = self._engine._paths.store_home
        touched = reach.command_reach(argv, workdir)
        reasons = list(touched.reasons)
        # Scan now (cheap: the stat cache reads only what changed), so the answer is about the tree as it is.
        snapshot = commands.scan_project(self._store, project, self.scan_rules(project)).snapshot
        outside = self._outside_rules(project)
        copied = set(commands.named_outside_paths(argv, workdir, project.root, store_home))
        for path in touched.paths:
            untouchable = reach.untouchable(path, store_home)
            if untouchable is not None:
                reasons.append(untouchable)
            elif commands.is_inside(path, project.root):
                rel = os.path.relpath(path, project.root)
                left_out = sorted(  # in path order, not the order the folder happened to list them
                    (entry_path, entry)
                    for entry_path, entry in snapshot.items()
                    if entry.kind == "uncovered"
                    and (entry_path == rel or entry_path.startswith(rel + "/") or rel == ".")
                )
                reasons += [
                    Message("covers_left_out", path=left, why=entry.reason_message() or "") for left, entry in left_out
                ]
            elif path not in copied:
                reasons.append(Message("covers_outside_not_copied", path=path))
            else:
                refusal = commands.outside_copy_refusal(path, outside)
                if refusal is not None:
                    reasons.append(Message("covers_outside_refused", path=path, why=refusal))
        return Coverage(not reasons, tuple(dict.fromkeys(reasons)))

    def scan(self, project: Project) -> int:
        """Scan the project now, as a command's scan does: what it holds becomes the baseline of the next call.

        A first scan is the slow one (every file is read, unless git's index vouches for it); a harness
        may run it when a session starts. Returns how many paths the project holds.
        """
        from turnback.capture import commands

        return len(commands.scan_project(self._store, project, self.scan_rules(project)).snapshot)

    def take_first_snapshot(self, project_id: ProjectId) -> int:
        """Scan the project here for a process that cannot split its first snapshot over workers (``turnback
        _first_snapshot``, see ``capture.commands.first_snapshot_elsewhere``); how many paths it holds."""
        from turnback.capture import commands

        project = self._store.project(project_id)
        return len(commands.scan_project(self._store, project, self.scan_rules(project), elsewhere=False).snapshot)

    def adopt_git_objects(self, project_id: ProjectId) -> int:
        """Copy into the store the git objects the project's first snapshot stands on (see ``gitindex``)."""
        from turnback.capture import commands

        adopted = commands.adopt_git_objects(self._store, self._store.project(project_id))
        if adopted:
            self._store.truncate_log()  # up to a whole tree went through the WAL: its file need not stay that size
        return adopted


__all__ = ["Commands"]

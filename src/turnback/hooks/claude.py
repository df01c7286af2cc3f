"""Claude Code hooks: one event as JSON on stdin, mapped onto turnback.

- SessionStart, or the first event of a ``session_id``: a turnback session for
  the project (``CLAUDE_PROJECT_DIR``, else ``cwd``), registered on first use.
  SessionStart also puts a line in ``$CLAUDE_ENV_FILE`` by which each Bash
  command's shell marks when it really started (:mod:`.commandstart`).
- UserPromptSubmit: begin a turn (message = the prompt); pending revert
  notices go back to the model as ``additionalContext``.
- PreToolUse for Write, Edit, MultiEdit, NotebookEdit: keep the file's
  earlier state; PostToolUse (or PostToolUseFailure): record what it holds. A
  call with no PostToolUse stays "may be cut short", still revertible. When
  turnback cannot keep a copy of the file (over ``store.max_mib``,
  unreadable), the user is asked (``permissionDecision: "ask"`` with the
  reason) and the call is recorded as not covered.
- PreToolUse for Bash (and PowerShell): scan the project; PostToolUse: scan
  again and record the difference, less what changed before the command
  really started (a permission prompt comes between PreToolUse and the run):
  ctime against the command's own mark, else against the hook's start minus
  ``duration_ms``.
  ``run_in_background``: a job, open past Stop while ``background_tasks``
  lists it, recorded at its ``<task-notification>`` prompt (not a user turn).
- PostToolBatch: a call in it with no PostToolUse was denied: it ends with
  no change.
- PreCompact: the session is busy (compaction) until the next prompt.
- Stop, StopFailure (an API error): record unfinished commands, end the
  turn, and show the user (only the user: ``systemMessage``) the summary
  line when the turn changed files.
- SessionEnd: end a turn left running. An interrupt or a kill sends nothing:
  the next undo ends that turn (``Engine.settle_turns``).

It never blocks the agent because of its own trouble: any error exits 0 with
one warning line on stderr, and the traceback goes to ``turnback.log`` in the
store. Unknown events and tools do nothing.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any, NamedTuple

from turnback.catalog import Message, language, say, word
from turnback.hooks import commandstart
from turnback.hooks.relay import FILE_TOOLS, HANDLED_EVENTS, SHELL_TOOLS, failure_line, parse, wanted

HARNESS = "claude-code"
SHELLS = ("sh", "bash", "dash", "zsh", "fish", "ksh", "timeout", "env")
COMPACTION = Message("busy_compaction")
# How long Claude Code may take from a command's end to starting its PostToolUse hook (a few ms when idle; a
# loaded machine takes longer). A change inside it is kept as the command's: dropping one of the agent's
# changes would leave it out of every undo, while a user rarely answers a prompt within a second of an edit.
START_SLACK_S = 1.0
# The hook's start is known to a clock tick (10 ms), rounded down: a mark up to this much after it is still
# one made before the command ended.
MARK_SLACK_S = 0.05

Event = dict[str, Any]
Output = dict[str, Any] | None


def _claude_pid(start: int) -> int:
    """The Claude Code process: from *start* (the hook's parent), the nearest ancestor that is not a shell."""
    from turnback.procs import parent_and_name

    pid = start
    for _ in range(8):
        found = parent_and_name(pid)
        if found is None or found[1] not in SHELLS:
            return pid
        pid = found[0]
    return pid


class Caller(NamedTuple):
    """What the hook process knew besides its event: its parent, working folder and ``CLAUDE_PROJECT_DIR``."""

    parent_pid: int
    cwd: str
    project_dir: str | None
    started_at: float | None = None  # when Claude Code started the hook process (seconds since the epoch)
    env_file: str | None = None  # CLAUDE_ENV_FILE: what Claude Code runs ahead of each Bash command (SessionStart)

    @classmethod
    def this_process(cls) -> Caller:
        from turnback.hooks.relay import process_started_at

        return cls(
            os.getppid(),
            os.getcwd(),
            os.environ.get("CLAUDE_PROJECT_DIR") or None,
            process_started_at(),
            os.environ.get("CLAUDE_ENV_FILE") or None,
        )


class _Hook:
    def __init__(self, engine: Any, event: Event, caller: Caller, home: str):
        self.engine = engine
        self.event = event
        self.caller = caller
        self.home = home
        self.cwd = str(event.get("cwd") or caller.cwd)

    def claude_pid(self) -> int:
        return _claude_pid(self.caller.parent_pid)

    def session(self) -> Any:
        project = self.caller.project_dir or self.cwd
        external = str(self.event.get("session_id") or "")
        if not external:
            raise ValueError("the event has no session_id")
        return self.engine.session_for(HARNESS, external, project, title="Claude Code")

    def running_turn(self, session: Any) -> Any:
        """The running turn; one begun now if the prompt's event was missed (a hook installed mid-session)."""
        from turnback.errors import BusyError, RefusedError

        try:
            return self.engine.running_turn(session.id)
        except RefusedError:
            pass
        try:
            return self.engine.begin_turn(session.id, None, holder_pid=self.claude_pid())
        except BusyError:  # another hook of the same moment began it first: join that turn
            return self.engine.running_turn(session.id)

    # -- events ------------------------------------------------------------------------

    def marks(self, session: Any) -> str:
        return commandstart.folder(self.home, session.id)

    def session_start(self) -> Output:
        session = self.session()
        if self.event.get("source") == "compact":
            self.engine.busy_end(session.id, COMPACTION)
        if self.caller.env_file and os.name == "posix":  # PowerShell reads the file as assignments only
            commandstart.arm(self.caller.env_file, self.marks(session))
        return None

    def prompt(self) -> Output:
        session = self.session()
        self.engine.busy_end(session.id, COMPACTION)
        notified = _task_notification(str(self.event.get("prompt") or ""))
        if notified is not None:
            # Claude Code telling itself a background task ended: not the user's message. The job's call ends
            # now; the model's answer to it joins a turn begun when it calls a tool (running_turn).
            use_id, status = notified
            job = self.engine.external_call(session.id, HARNESS, use_id)
            if job is not None and job.status == "running":
                failed = None if status == "completed" else Message("background_command_ended", status=status)
                self.engine.finish_command(job.id, error=failed)
            self._end_running(session)
            return None
        self._end_running(session)
        self.engine.begin_turn(session.id, str(self.event.get("prompt") or ""), holder_pid=self.claude_pid())
        notices = self.engine.take_notices(session.id)
        if not notices:
            return None
        lines = [word(notice.message) for notice in notices]
        lines.append(say("reverted_read_again"))
        return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "\n".join(lines)}}

    def pre_tool(self) -> Output:
        tool = str(self.event.get("tool_name") or "")
        tool_input = self.event.get("tool_input") or {}
        if not isinstance(tool_input, dict):
            return None
        use_id = str(self.event.get("tool_use_id") or "")
        if tool in FILE_TOOLS:
            path = tool_input.get(FILE_TOOLS[tool])
            if not isinstance(path, str) or not path:
                return None
            from turnback.errors import UncoveredError

            session = self.session()
            self.running_turn(session)
            begin = {"cwd": self.cwd, "external_id": (HARNESS, use_id) if use_id else None, "before": [path]}
            try:
                self.engine.begin_call(session.id, tool, tool_input, **begin)
            except UncoveredError as refused:
                # The user decides: recorded as not covered, so if it goes ahead every view says it cannot be undone.
                self.engine.begin_call(session.id, tool, tool_input, uncovered=True, **begin)
                return {
                    "hookSpecificOutput": {
                        "hookEventName": "PreToolUse",
                        "permissionDecision": "ask",
                        "permissionDecisionReason": say("hook_ask_uncovered", why=refused.why),
                    }
                }
        elif tool in SHELL_TOOLS:
            command = tool_input.get("command")
            if not isinstance(command, str) or not command:
                return None
            session = self.session()
            self.running_turn(session)
            self.engine.begin_command(
                session.id,
                command,
                cwd=self.cwd,
                external_id=(HARNESS, use_id) if use_id else None,
                background=bool(tool_input.get("run_in_background")),
            )
        return None

    def post_tool(self, *, failed: bool = False) -> Output:
        tool = str(self.event.get("tool_name") or "")
        use_id = str(self.event.get("tool_use_id") or "")
        if (tool not in FILE_TOOLS and tool not in SHELL_TOOLS) or not use_id:
            return None
        session = self.session()
        call = self.engine.external_call(session.id, HARNESS, use_id)
        if call is None or call.status != "running":
            return None  # no PreToolUse was seen for it: nothing to pair with
        said = self.event.get("error")
        error = (Message("plain", text=str(said)) if said else Message("tool_failed")) if failed else None
        response = self.event.get("tool_response")
        response = response if isinstance(response, dict) else {}
        if call.kind == "job" and response.get("backgroundTaskId") and not failed:
            return None  # it runs on after this event: it ends with its <task-notification>
        if tool in FILE_TOOLS:
            tool_input = self.event.get("tool_input") or {}
            path = tool_input.get(FILE_TOOLS[tool]) if isinstance(tool_input, dict) else None
            handle = self.engine.resume_call(call.id, cwd=self.cwd)
            handle.end(failed=error, after=[path] if isinstance(path, str) and path else [])
        elif call.kind in ("command", "job"):
            if response.get("interrupted") and error is None:
                error = Message("call_interrupted")
            self.engine.finish_command(call.id, error=error, started_at=self._command_started_at(session, call))
        return None

    def _command_started_at(self, session: Any, call: Any) -> float | None:
        """When the command really started: its shell's mark (exact), else an estimate. This event's hook
        began as the command ended, ``duration_ms`` earlier it started (Claude Code counts no permission
        prompt in it); earlier by ``START_SLACK_S``, so what the command did at once is never taken for the
        user's."""
        began = self.caller.started_at
        marked = self._marked_start(session, call, None if began is None else began + MARK_SLACK_S)
        if marked is not None:
            return marked
        duration = self.event.get("duration_ms")
        if began is None or not isinstance(duration, int | float) or duration < 0:
            return None
        return began - duration / 1000 - START_SLACK_S

    def _marked_start(self, session: Any, call: Any, before: float | None = None) -> float | None:
        """The earliest mark a command's shell made after *call*'s PreToolUse (and before *before*)."""
        import time

        return commandstart.started_at(self.marks(session), call.started_at / 1e9, before or time.time())

    def post_tool_batch(self) -> Output:
        """The calls of the batch with no PostToolUse: denied (``tool_response`` is the denial's message) or
        failed to start; none of them ran, so none changed anything."""
        calls = self.event.get("tool_calls")
        if not isinstance(calls, list):
            return None
        session = self.session()
        for item in calls:
            if not isinstance(item, dict) or not item.get("tool_use_id"):
                continue
            call = self.engine.external_call(session.id, HARNESS, str(item["tool_use_id"]))
            if call is None or call.status != "running" or call.kind == "job":
                continue
            said = item.get("tool_response")
            why = Message("call_denied_because", why=said) if isinstance(said, str) and said else Message("call_denied")
            if call.kind == "command":
                self.engine.finish_command(call.id, error=why, ran=False)
            else:
                tool_input = item.get("tool_input")
                path = (
                    tool_input.get(FILE_TOOLS.get(str(item.get("tool_name")), ""))
                    if isinstance(tool_input, dict)
                    else None
                )
                handle = self.engine.resume_call(call.id, cwd=self.cwd)
                handle.end(failed=why, after=[path] if isinstance(path, str) and path else [])
        return None

    def pre_compact(self) -> Output:
        session = self.session()
        self.engine.busy_start(session.id, COMPACTION, holder_pid=self.claude_pid())
        return None

    def stop(self) -> Output:
        session = self.session()
        tasks = self.event.get("background_tasks")
        running = [
            str(task.get("command") or "")
            for task in (tasks if isinstance(tasks, list) else [])
            if isinstance(task, dict) and task.get("status") == "running"
        ]
        summary = self._end_running(session, keep=running)
        if summary is None or not (summary.line or summary.notes):
            return None
        return {"systemMessage": "\n".join([word(line) for line in (summary.line, *summary.notes) if line])}

    def session_end(self) -> Output:
        session = self.session()
        self.engine.busy_end(session.id, COMPACTION)
        self._end_running(session)
        commandstart.clear(self.marks(session), remove=True)
        return None

    def _end_running(self, session: Any, keep: Sequence[str] = ()) -> Any:
        """Record the turn's unfinished commands and end it; its summary, or None when no turn runs.

        *keep*: the commands of background jobs Claude Code says still run; they stay open, to be recorded
        when their ``<task-notification>`` comes.
        """
        from turnback.errors import RefusedError

        self.engine.mark_interrupted(session.id)
        try:
            pending = self.engine.unfinished_commands(session.id)
        except RefusedError:
            return None
        from turnback.errors import StoreError
        from turnback.ops.busy import harness_command

        for call in pending:
            if call.kind == "job" and harness_command(call) in keep:
                continue
            note = None if call.kind == "job" else Message("no_post_tool_use")
            try:
                self.engine.finish_command(call.id, error=note, started_at=self._marked_start(session, call))
            except StoreError:  # a full disk: the turn still ends (the command stays "may be cut short")
                continue
        commandstart.clear(self.marks(session))  # none of the session's commands runs now
        return self.engine.end_turn(session.id)[1]


def _task_notification(prompt: str) -> tuple[str, str] | None:
    """(tool use id, status) of a ``<task-notification>`` prompt: Claude Code's word that a background task
    ended, sent as a UserPromptSubmit; None for a prompt of the user's."""
    import re

    if not prompt.lstrip().startswith("<task-notification>"):
        return None
    use_id = re.search(r"<tool-use-id>([^<]*)</tool-use-id>", prompt)
    status = re.search(r"<status>([^<]*)</status>", prompt)
    return (use_id.group(1).strip() if use_id else "", status.group(1).strip() if status else "")


_HANDLERS: dict[str, Callable[[_Hook], Output]] = {
    "SessionStart": _Hook.session_start,
    "UserPromptSubmit": _Hook.prompt,
    "PreToolUse": _Hook.pre_tool,
    "PostToolUse": _Hook.post_tool,
    "PostToolUseFailure": lambda hook: hook.post_tool(failed=True),
    "PostToolBatch": _Hook.post_tool_batch,
    "PreCompact": _Hook.pre_compact,
    "Stop": _Hook.stop,
    "StopFailure": _Hook.stop,
    "SessionEnd": _Hook.session_end,
}
assert tuple(_HANDLERS) == HANDLED_EVENTS, "the relay filters events by HANDLED_EVENTS"


def handle(event: Event, caller: Caller, home: str) -> tuple[str, str]:
    """Handle one event that :func:`wanted`: what goes to stdout and to stderr. Never raises.

    The store is opened for the event and closed after it, so settings and keys are read as they are now
    (the hook relay's long-lived process calls this too).
    """
    worded_in = language.set(_event_language(home))
    try:
        import turnback

        handler = _HANDLERS[str(event.get("hook_event_name"))]
        with turnback.open(home) as engine:
            output = handler(_Hook(engine, event, caller, home))
        return (json.dumps(output) + "\n" if output else ""), ""
    except Exception as exc:  # never block the agent: say it once, log the rest
        from turnback.boundary import log_unexpected

        log_unexpected(home, f"hook {HARNESS}")
        return "", failure_line(exc)
    finally:
        language.reset(worded_in)


def _event_language(home: str) -> str:
    """The language this event's output is worded in (the relay reads it per event: config.toml may change).

    A ``TURNBACK_LANG`` or ``lang`` naming no language words it in English rather than failing the event:
    a hook that failed would record nothing of the agent's change.
    """
    from turnback.errors import TurnbackError
    from turnback.language import pick_language

    try:
        return pick_language(None, home)
    except TurnbackError:
        return "en"


def run(stdin: IO[bytes] | None = None, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Handle one Claude Code hook event in this process (``turnback --store DIR hook``; the plain command goes
    through :mod:`turnback.hooks.relay`). Always exits 0: turnback's trouble never blocks the agent."""
    from turnback.home import default_home

    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        event, why = parse(stdin.read())
        if event is None or not wanted(event):
            stderr.write(why)
            return 0
        out, err = handle(event, Caller.this_process(), default_home())
    except Exception as exc:  # never block the agent: a folder gone, stdin unreadable
        out, err = "", failure_line(exc)
    stdout.write(out)
    stderr.write(err)
    return 0


__all__ = ["HARNESS", "Caller", "handle", "run"]

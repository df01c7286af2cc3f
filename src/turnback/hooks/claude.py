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
  reason) and the call is recorded as not covered. A path turnback's own
  file tools refuse (its store, a ``.git`` folder, a link into the
  project) is denied (``permissionDecision: "deny"``, saying why).
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

from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from turnback.catalog import Message
from turnback.hooks.events import Caller, Event, Output, Recorder
from turnback.hooks.events import handle as handle_with
from turnback.hooks.events import run as run_with
from turnback.hooks.relay import FILE_TOOLS, HANDLED_EVENTS, SHELL_TOOLS

if TYPE_CHECKING:
    from turnback.engine import KeptStore

HARNESS = "claude-code"


class _Hook:
    """Claude Code's payload, mapped onto the event model (:class:`turnback.hooks.events.Recorder`)."""

    def __init__(self, engine: Any, event: Event, caller: Caller, home: str):
        self.event = event
        cwd = str(event.get("cwd") or caller.cwd)
        external = str(event.get("session_id") or "")
        self.recorder = Recorder(engine, caller, home, harness=HARNESS, title="Claude Code", external=external, cwd=cwd)

    def session_start(self) -> Output:
        self.recorder.session_start(after_compaction=self.event.get("source") == "compact")
        return None

    def prompt(self) -> Output:
        prompt = str(self.event.get("prompt") or "")
        notified = _task_notification(prompt)
        if notified is not None:  # Claude Code telling itself a background task ended: not the user's message
            self.recorder.job_ended(*notified)
            return None
        lines = self.recorder.prompt(prompt)
        if not lines:
            return None
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
            verdict = self.recorder.file_before(tool, tool_input, use_id, [path])
            if verdict is None:
                return None
            return {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": verdict.decision,
                    "permissionDecisionReason": verdict.reason,
                }
            }
        if tool in SHELL_TOOLS:
            command = tool_input.get("command")
            if isinstance(command, str) and command:
                self.recorder.command_before(command, use_id, background=bool(tool_input.get("run_in_background")))
        return None

    def post_tool(self, *, failed: bool = False) -> Output:
        tool = str(self.event.get("tool_name") or "")
        if tool not in FILE_TOOLS and tool not in SHELL_TOOLS:
            return None
        session = self.recorder.session()
        call = self.recorder.call(session, str(self.event.get("tool_use_id") or ""))
        if call is None:
            return None  # no PreToolUse was seen for it: nothing to pair with
        said = self.event.get("error")
        error = (Message("plain", text=str(said)) if said else Message("tool_failed")) if failed else None
        response = self.event.get("tool_response")
        response = response if isinstance(response, dict) else {}
        if call.kind == "job" and response.get("backgroundTaskId") and not failed:
            return None  # it runs on after this event: it ends with its <task-notification>
        if tool in FILE_TOOLS:
            self.recorder.file_after(call, _paths(self.event.get("tool_input"), tool), error=error)
        elif call.kind in ("command", "job"):
            if response.get("interrupted") and error is None:
                error = Message("call_interrupted")
            self.recorder.command_after(session, call, error=error, duration_ms=self.event.get("duration_ms"))
        return None

    def post_tool_batch(self) -> Output:
        """The calls of the batch with no PostToolUse: denied (``tool_response`` is the denial's message) or
        failed to start; none of them ran, so none changed anything."""
        calls = self.event.get("tool_calls")
        if not isinstance(calls, list):
            return None
        session = self.recorder.session()
        for item in calls:
            if not isinstance(item, dict) or not item.get("tool_use_id"):
                continue
            call = self.recorder.call(session, str(item["tool_use_id"]))
            if call is None or call.kind == "job":
                continue
            said = item.get("tool_response")
            why = Message("call_denied_because", why=said) if isinstance(said, str) and said else Message("call_denied")
            if call.kind == "command":
                self.recorder.command_after(session, call, error=why, ran=False)
            else:
                self.recorder.file_after(call, _paths(item.get("tool_input"), str(item.get("tool_name"))), error=why)
        return None

    def pre_compact(self) -> Output:
        self.recorder.compaction_start()
        return None

    def stop(self) -> Output:
        tasks = self.event.get("background_tasks")
        running = [
            str(task.get("command") or "")
            for task in (tasks if isinstance(tasks, list) else [])
            if isinstance(task, dict) and task.get("status") == "running"
        ]
        summary = self.recorder.stop(keep=running)
        return {"systemMessage": summary} if summary else None

    def session_end(self) -> Output:
        self.recorder.session_end()
        return None


def _paths(tool_input: object, tool: str) -> list[str]:
    """The file a file tool's input names, as a list (empty when it names none)."""
    path = tool_input.get(FILE_TOOLS.get(tool, "")) if isinstance(tool_input, dict) else None
    return [path] if isinstance(path, str) and path else []


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


def handle(event: Event, caller: Caller, home: str, kept: KeptStore | None = None) -> tuple[str, str]:
    """Handle one event that :func:`wanted`: what goes to stdout and to stderr. Never raises.
    *kept*: the relay's store, kept open across events."""
    return handle_with(event, caller, home, HARNESS, _respond, kept)


def _respond(engine: Any, event: Event, caller: Caller, home: str) -> Output:
    return _HANDLERS[str(event.get("hook_event_name"))](_Hook(engine, event, caller, home))


def run(stdin: IO[bytes] | None = None, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Handle one Claude Code hook event in this process (``turnback --store DIR hook HARNESS``). Exits 0."""
    return run_with(HARNESS, handle, stdin, stdout, stderr)


__all__ = ["HARNESS", "Caller", "handle", "run"]

"""Gemini CLI hooks: one event as JSON on stdin, mapped onto the event model (:mod:`turnback.hooks.events`).

What Gemini CLI 0.61 sends (tests/realclients/payloads/gemini_*.json):

- SessionStart{source}; BeforeAgent{prompt}: a turn begins.
- BeforeTool / AfterTool{tool_name, tool_input}; ``tool_response`` is
  {llmContent, returnDisplay, error?}. There is no call id: a call is paired
  with its AfterTool by its tool and input, in order (the first still running
  of that tool and input). Tools: ``write_file`` and ``replace`` {file_path}
  (kept before, recorded after; a ``replace`` that found nothing gets an
  AfterTool with ``error``: it ends failed, with no change; when turnback
  cannot keep a copy of the file, the answer is ``decision: "ask"`` with the
  reason, and Gemini CLI asks the user; a headless run, which cannot ask,
  is told ``deny`` with the reason instead (:func:`asks_user`); a path
  turnback's own file tools refuse (its store, a ``.git`` folder) is always
  denied) and
  ``run_shell_command`` {command} (scanned before and after; its exit code is
  only inside ``llmContent``, so it is not read).
- AfterAgent: the turn ends; the summary goes to the user (``systemMessage``).
  SessionEnd ends a turn left running.
- BeforeModel, BeforeToolSelection, AfterModel, PreCompress (before every model
  call) and the rest: nothing, before the store is opened (:func:`wanted`).

Gemini CLI gives every hook its own environment, ``GEMINI_API_KEY`` included:
turnback reads none of it but what any hook reads, and never records or logs it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from turnback.catalog import Message
from turnback.hooks.events import Caller, Event, Output, Recorder, call_key
from turnback.hooks.events import handle as handle_with
from turnback.hooks.events import run as run_with
from turnback.hooks.relay import GEMINI_EVENTS

if TYPE_CHECKING:
    from turnback.engine import KeptStore

HARNESS = "gemini"
SHELL_TOOL = "run_shell_command"


def asks_user(pid: int) -> bool:
    """Whether the Gemini CLI process *pid* runs interactively, where a hook's "ask" shows the user a prompt.
    A headless run (``-p``/``--prompt``, or no terminal on stdin) waits for an answer no one can give, for
    good (0.61): there the call is refused instead. Where Linux's /proc does not tell, the answer is no."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            args = handle.read().split(b"\0")
        stdin = os.readlink(f"/proc/{pid}/fd/0")
    except OSError:
        return False
    if any(arg in (b"-p", b"--prompt") or arg.startswith(b"--prompt=") for arg in args):
        return False
    return stdin.startswith(("/dev/pts/", "/dev/tty"))


class _Hook:
    """Gemini CLI's payload, mapped onto the event model."""

    def __init__(self, engine: Any, event: Event, caller: Caller, home: str):
        self.engine = engine
        self.event = event
        cwd = str(event.get("cwd") or caller.cwd)
        external = str(event.get("session_id") or "")
        self.recorder = Recorder(engine, caller, home, harness=HARNESS, title="Gemini CLI", external=external, cwd=cwd)

    def tool(self) -> tuple[str, dict[str, Any]] | None:
        tool = str(self.event.get("tool_name") or "")
        tool_input = self.event.get("tool_input")
        return (tool, tool_input) if isinstance(tool_input, dict) else None

    def session_start(self) -> Output:
        self.recorder.session_start(after_compaction=self.event.get("source") == "compact")
        return None

    def before_agent(self) -> Output:
        lines = self.recorder.prompt(str(self.event.get("prompt") or ""))
        if not lines:
            return None
        return {"hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": "\n".join(lines)}}

    def before_tool(self) -> Output:
        found = self.tool()
        if found is None:
            return None
        tool, tool_input = found
        use_id = self.recorder.unpaired_id(self.recorder.session(), call_key(tool, tool_input))
        if tool == SHELL_TOOL:
            command = tool_input.get("command")
            if isinstance(command, str) and command:
                self.recorder.command_before(command, use_id)
            return None
        path = tool_input.get("file_path")
        if not isinstance(path, str) or not path:
            return None
        can_ask = asks_user(self.recorder.agent_pid())
        verdict = self.recorder.file_before(tool, tool_input, use_id, [path], can_ask=can_ask)
        if verdict is None:
            return None
        if verdict.decision == "ask":  # a copy turnback cannot keep: Gemini CLI asks the user, showing why
            return {"decision": "ask", "reason": verdict.reason, "systemMessage": verdict.reason}
        return {"decision": "deny", "reason": verdict.reason}

    def after_tool(self) -> Output:
        found = self.tool()
        if found is None:
            return None
        tool, tool_input = found
        session = self.recorder.session()
        call = self.recorder.first_running(session, call_key(tool, tool_input))
        if call is None:
            return None  # no BeforeTool was seen for it: nothing to pair with
        response = self.event.get("tool_response")
        said = response.get("error") if isinstance(response, dict) else None
        error = None
        if isinstance(said, dict):
            error = Message("plain", text=str(said.get("message") or said.get("type") or "error"))
        if tool == SHELL_TOOL:
            self.recorder.command_after(session, call, error=error)
        else:
            path = tool_input.get("file_path")
            self.recorder.file_after(call, [path] if isinstance(path, str) and path else [], error=error)
        return None

    def after_agent(self) -> Output:
        summary = self.recorder.stop()
        return {"systemMessage": summary} if summary else None

    def session_end(self) -> Output:
        self.recorder.session_end()
        return None


_HANDLERS: dict[str, Callable[[_Hook], Output]] = {
    "SessionStart": _Hook.session_start,
    "BeforeAgent": _Hook.before_agent,
    "BeforeTool": _Hook.before_tool,
    "AfterTool": _Hook.after_tool,
    "AfterAgent": _Hook.after_agent,
    "SessionEnd": _Hook.session_end,
}
assert tuple(_HANDLERS) == GEMINI_EVENTS, "the relay filters events by GEMINI_EVENTS"


def handle(event: Event, caller: Caller, home: str, kept: KeptStore | None = None) -> tuple[str, str]:
    """Handle one event that :func:`wanted`: what goes to stdout and to stderr. Never raises.
    *kept*: the relay's store, kept open across events."""
    return handle_with(event, caller, home, HARNESS, _respond, kept)


def _respond(engine: Any, event: Event, caller: Caller, home: str) -> Output:
    return _HANDLERS[str(event.get("hook_event_name"))](_Hook(engine, event, caller, home))


def run(stdin: IO[bytes] | None = None, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Handle one Gemini CLI hook event in this process (``turnback --store DIR hook HARNESS``). Exits 0."""
    return run_with(HARNESS, handle, stdin, stdout, stderr)


__all__ = ["HARNESS", "asks_user", "handle", "run"]

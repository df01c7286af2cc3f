"""Cursor hooks: one event as JSON on stdin, mapped onto the event model (:mod:`turnback.hooks.events`).

What Cursor's hooks documentation (https://cursor.com/docs/hooks) says it sends, recorded in
tests/realclients/payloads/cursor_*.json (there is no headless Cursor here to record a real session from):

- Every event: ``conversation_id`` (the session), ``generation_id`` (the turn),
  ``workspace_roots`` (the first is the project), ``hook_event_name``.
- sessionStart; beforeSubmitPrompt{prompt}: a turn begins, and the project is
  scanned: that scan is what the turn's first edits go back to. Cursor's
  answer here can only let the prompt through (``{"continue": true}``): it
  has no way to tell the model, so revert notices are not passed on.
- beforeShellExecution{command, cwd} / afterShellExecution{command, output,
  duration}: scanned before and after, as every agent's command. There is no
  call id: a command is paired with its after-event by its text, in order. A
  command with no after-event (denied, or cut short) is closed at the
  session's next event, with what the scan finds then.
- afterFileEdit{file_path, edits}: the edit already happened and no event
  came before it. What the file held before is what the last scan saw (at the
  prompt, or the last command or edit); the edit is recorded against it.
  With no scan before (hooks installed mid-turn) the edit is recorded as not
  covered: it cannot be undone, and ``show`` says why.
- stop{status}: the turn ends (``aborted``: its unfinished calls end as
  interrupted). Its only answer, ``followup_message``, would send the model a
  new prompt, so none is given. sessionEnd ends a turn left running.

Like every adapter it never blocks the agent on turnback's own trouble: exit 0,
one warning line on stderr, the traceback in ``turnback.log``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from turnback.catalog import Message
from turnback.hooks.events import Caller, Event, Output, Recorder, call_key
from turnback.hooks.events import handle as handle_with
from turnback.hooks.events import run as run_with
from turnback.hooks.relay import CURSOR_EVENTS

if TYPE_CHECKING:
    from turnback.engine import KeptStore

HARNESS = "cursor"
SHELL_TOOL = "shell"
EDIT_TOOL = "edit_file"


class _Hook:
    """Cursor's payload, mapped onto the event model."""

    def __init__(self, engine: Any, event: Event, caller: Caller, home: str):
        self.engine = engine
        self.event = event
        roots = event.get("workspace_roots")
        root = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) and roots[0] else None
        self.root = root or caller.project_dir or caller.cwd
        external = str(event.get("conversation_id") or event.get("session_id") or "")
        caller = caller._replace(project_dir=self.root)
        self.recorder = Recorder(
            engine, caller, home, harness=HARNESS, title="Cursor", external=external, cwd=self.root
        )

    def session_start(self) -> Output:
        self.recorder.session_start()
        return None

    def prompt(self) -> Output:
        self.recorder.prompt(str(self.event.get("prompt") or ""))
        session = self.recorder.session()
        self.engine.scan(self.engine.project_of(session))  # what the turn's first edits go back to
        return {"continue": True}

    def before_shell(self) -> Output:
        command = self.event.get("command")
        if not isinstance(command, str) or not command:
            return None
        session = self.recorder.session()
        self.close_unpaired(session)
        cwd = self.event.get("cwd")
        self.recorder.cwd = cwd if isinstance(cwd, str) and cwd else self.root
        self.recorder.command_before(command, self.recorder.unpaired_id(session, call_key(SHELL_TOOL, command)))
        return None

    def after_shell(self) -> Output:
        command = self.event.get("command")
        if not isinstance(command, str) or not command:
            return None
        session = self.recorder.session()
        call = self.recorder.first_running(session, call_key(SHELL_TOOL, command))
        if call is None:
            return None  # no beforeShellExecution was seen for it: nothing to pair with
        self.recorder.command_after(session, call, duration_ms=self.event.get("duration"))
        return None

    def after_edit(self) -> Output:
        path = self.event.get("file_path")
        if not isinstance(path, str) or not path:
            return None
        session = self.recorder.session()
        self.close_unpaired(session)
        self.recorder.running_turn(session)
        tool_input = {"file_path": path, "edits": self.event.get("edits")}
        self.engine.record_edit_since_scan(session.id, EDIT_TOOL, tool_input, path, cwd=self.root)
        return None

    def close_unpaired(self, session: Any) -> None:
        """End the commands Cursor sent no afterShellExecution for (denied, or cut short), now that the session
        has gone on: what the scan finds now is theirs, and their window closes."""
        from turnback.errors import RefusedError

        try:
            pending = self.engine.unfinished_commands(session.id)
        except RefusedError:
            return  # no turn runs
        for call in pending:
            self.recorder.command_after(session, call, error=Message("cursor_no_after_shell"))

    def stop(self) -> Output:
        if self.event.get("status") == "aborted":  # the user stopped the agent: its unfinished calls were cut
            self.recorder.interrupt()
            return None
        self.close_unpaired(self.recorder.session())
        self.recorder.stop()
        return None

    def session_end(self) -> Output:
        self.recorder.session_end()
        return None


_HANDLERS: dict[str, Callable[[_Hook], Output]] = {
    "sessionStart": _Hook.session_start,
    "beforeSubmitPrompt": _Hook.prompt,
    "beforeShellExecution": _Hook.before_shell,
    "afterShellExecution": _Hook.after_shell,
    "afterFileEdit": _Hook.after_edit,
    "stop": _Hook.stop,
    "sessionEnd": _Hook.session_end,
}
assert tuple(_HANDLERS) == CURSOR_EVENTS, "the relay filters events by CURSOR_EVENTS"


def handle(event: Event, caller: Caller, home: str, kept: KeptStore | None = None) -> tuple[str, str]:
    """Handle one event that :func:`wanted`: what goes to stdout and to stderr. Never raises.
    *kept*: the relay's store, kept open across events."""
    return handle_with(event, caller, home, HARNESS, _respond, kept)


def _respond(engine: Any, event: Event, caller: Caller, home: str) -> Output:
    return _HANDLERS[str(event.get("hook_event_name"))](_Hook(engine, event, caller, home))


def run(stdin: IO[bytes] | None = None, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Handle one Cursor hook event in this process (``turnback --store DIR hook HARNESS``). Exits 0."""
    return run_with(HARNESS, handle, stdin, stdout, stderr)


__all__ = ["HARNESS", "handle", "run"]

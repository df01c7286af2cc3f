"""Codex CLI hooks: one event as JSON on stdin, mapped onto the event model (:mod:`turnback.hooks.events`).

What Codex 0.171 sends (tests/realclients/payloads/codex_*.json):

- SessionStart{source}; UserPromptSubmit{prompt, turn_id}: a turn begins.
- PreToolUse / PostToolUse{tool_name, tool_input, tool_use_id}; ``tool_response``
  is a string and carries no exit code, so a command is never recorded as failed
  from it. Tools: ``Bash`` {command} (scanned before and after) and
  ``apply_patch`` {command: the raw patch}: every file the patch adds, updates,
  deletes or moves (both names) is kept before it runs and recorded after.
  When turnback cannot keep a copy of one (over ``store.max_mib``,
  unreadable), the patch is refused (``permissionDecision: "deny"`` with the
  reason and how to let it through): Codex takes no "ask" from a hook. A
  path turnback's own file tools refuse (its store, a ``.git`` folder) is
  denied the same way.
- A patch that fails gets no PostToolUse, and a patch applied through the shell
  (``apply_patch <<EOF`` in a Bash call) gets no PostToolUse at all, yet changes
  files: such a call is closed at the session's next event (the next tool call,
  interrupt or stop) with what its files hold then; a failed patch says so.
- Interrupt (SIGINT): the unfinished calls end as interrupted and the turn ends.
- PreCompact / PostCompact: the session is busy (compaction) in between.
- Stop{last_assistant_message}: the turn ends; the summary goes to the user
  (``systemMessage``). SessionEnd ends a turn left running.
- PermissionRequest (it has no tool_use_id) and every other event: nothing.

Like every adapter it never blocks the agent on turnback's own trouble: exit 0,
one warning line on stderr, the traceback in ``turnback.log``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from turnback.catalog import Message
from turnback.hooks.events import Caller, Event, Output, Recorder
from turnback.hooks.events import handle as handle_with
from turnback.hooks.events import run as run_with
from turnback.hooks.relay import CODEX_EVENTS, CODEX_TOOLS

if TYPE_CHECKING:
    from turnback.engine import KeptStore

HARNESS = "codex"
SHELL_TOOL, PATCH_TOOL = CODEX_TOOLS
# The patch format's file lines (codex-rs/apply-patch): what each names is a file the patch writes.
PATCH_FILE_LINES = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")


def patch_paths(patch: str) -> list[str]:
    """Every file *patch* adds, updates, deletes or moves (from and to), in order, each once."""
    found: list[str] = []
    for line in patch.splitlines():
        for prefix in PATCH_FILE_LINES:
            if line.startswith(prefix):
                path = line[len(prefix) :].strip()
                if path and path not in found:
                    found.append(path)
    return found


def _shell_patch(command: str) -> bool:
    """Whether a Bash command is ``apply_patch``, which Codex applies itself (and sends no PostToolUse for)."""
    return command.lstrip().startswith(PATCH_TOOL)


class _Hook:
    """Codex's payload, mapped onto the event model."""

    def __init__(self, engine: Any, event: Event, caller: Caller, home: str):
        self.engine = engine
        self.event = event
        cwd = str(event.get("cwd") or caller.cwd)
        external = str(event.get("session_id") or "")
        self.recorder = Recorder(engine, caller, home, harness=HARNESS, title="Codex", external=external, cwd=cwd)

    def session_start(self) -> Output:
        self.recorder.session_start(after_compaction=self.event.get("source") == "compact")
        return None

    def prompt(self) -> Output:
        lines = self.recorder.prompt(str(self.event.get("prompt") or ""))
        if not lines:
            return None
        return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "\n".join(lines)}}

    def pre_tool(self) -> Output:
        tool = str(self.event.get("tool_name") or "")
        tool_input = self.event.get("tool_input")
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if not isinstance(tool_input, dict) or not isinstance(command, str) or not command:
            return None
        self.close_unpaired()
        use_id = str(self.event.get("tool_use_id") or "")
        if tool == PATCH_TOOL:
            paths = patch_paths(command)
            verdict = self.recorder.file_before(tool, tool_input, use_id, paths, can_ask=False) if paths else None
            if verdict is not None:  # Codex's hooks cannot ask ("ask" is refused): always a denial
                return {
                    "hookSpecificOutput": {
                        "hookEventName": "PreToolUse",
                        "permissionDecision": verdict.decision,
                        "permissionDecisionReason": verdict.reason,
                    }
                }
        elif tool == SHELL_TOOL:
            self.recorder.command_before(command, use_id)
        return None

    def post_tool(self) -> Output:
        session = self.recorder.session()
        call = self.recorder.call(session, str(self.event.get("tool_use_id") or ""))
        if call is None:
            return None  # no PreToolUse was seen for it: nothing to pair with
        if call.kind == "tool":
            tool_input = self.event.get("tool_input")
            patch = tool_input.get("command") if isinstance(tool_input, dict) else None
            self.recorder.file_after(call, patch_paths(patch) if isinstance(patch, str) else [])
        else:
            self.recorder.command_after(session, call)
        return None

    def close_unpaired(self) -> None:
        """End the calls Codex never sends a PostToolUse for, now that the session has gone on (Codex sends
        its next event right after such a call): a failed patch (it wrote nothing; its files are recorded as
        they are now, so its window closes), and a patch applied through the shell (scanned now: what it
        changed is the call's)."""
        from turnback.errors import RefusedError
        from turnback.ops.busy import harness_command

        session = self.recorder.session()
        try:
            files = self.engine.unfinished_file_calls(session.id)
            commands = self.engine.unfinished_commands(session.id)
        except RefusedError:
            return  # no turn runs
        root = self.engine.project_of(session).root
        for call in files:
            paths = [path if os.path.isabs(path) else os.path.join(root, path) for path in _changed_paths(call)]
            self.recorder.file_after(call, paths, error=Message("codex_patch_failed"))
        for call in commands:
            if call.kind == "command" and _shell_patch(harness_command(call)):
                self.recorder.command_after(session, call)

    def interrupt(self) -> Output:
        self.close_unpaired()
        self.recorder.interrupt()
        return None

    def pre_compact(self) -> Output:
        self.recorder.compaction_start()
        return None

    def post_compact(self) -> Output:
        self.recorder.compaction_end()
        return None

    def stop(self) -> Output:
        self.close_unpaired()
        summary = self.recorder.stop()
        return {"systemMessage": summary} if summary else None

    def session_end(self) -> Output:
        self.close_unpaired()
        self.recorder.session_end()
        return None


def _changed_paths(call: Any) -> list[str]:
    return [str(change.path) for change in call.changes]


_HANDLERS: dict[str, Callable[[_Hook], Output]] = {
    "SessionStart": _Hook.session_start,
    "UserPromptSubmit": _Hook.prompt,
    "PreToolUse": _Hook.pre_tool,
    "PostToolUse": _Hook.post_tool,
    "Interrupt": _Hook.interrupt,
    "PreCompact": _Hook.pre_compact,
    "PostCompact": _Hook.post_compact,
    "Stop": _Hook.stop,
    "SessionEnd": _Hook.session_end,
}


def handle(event: Event, caller: Caller, home: str, kept: KeptStore | None = None) -> tuple[str, str]:
    """Handle one event that :func:`wanted`: what goes to stdout and to stderr. Never raises.
    *kept*: the relay's store, kept open across events."""
    return handle_with(event, caller, home, HARNESS, _respond, kept)


def _respond(engine: Any, event: Event, caller: Caller, home: str) -> Output:
    return _HANDLERS[str(event.get("hook_event_name"))](_Hook(engine, event, caller, home))


def run(stdin: IO[bytes] | None = None, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Handle one Codex hook event in this process (``turnback --store DIR hook HARNESS``). Exits 0."""
    return run_with(HARNESS, handle, stdin, stdout, stderr)


assert tuple(_HANDLERS) == CODEX_EVENTS, "the relay filters events by CODEX_EVENTS"


__all__ = ["HARNESS", "handle", "patch_paths", "run"]

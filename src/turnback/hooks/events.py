"""The one event model every agent adapter maps its hook payloads onto, and the attribution rules over it.

An adapter (:mod:`.claude`, :mod:`.codex`, :mod:`.gemini`, :mod:`.cursor`)
reads its agent's payload and calls one :class:`Recorder` method per event:
session start, prompt, file
tool before/after, shell command before/after, a batch's calls that never
ran, failure, interrupt, compaction start/end, stop, session end. Each rule
lives here once:

- a change made while no call ran is never the agent's: a file call keeps
  its files' earlier state before it runs and records them after; a command
  is scanned before and after, less what changed before it really started;
- a denied, interrupted or failed call closes its window (it ends with what
  the files hold then, or, never having run, with no change);
- a turn left running ends at the next prompt, stop or session end, its
  unfinished commands recorded first.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from turnback.catalog import Message, language, say, word
from turnback.hooks import commandstart
from turnback.hooks.relay import failure_line, parse, wanted

if TYPE_CHECKING:
    from turnback.engine import KeptStore

SHELLS = ("sh", "bash", "dash", "zsh", "fish", "ksh", "timeout", "env")
COMPACTION = Message("busy_compaction")
# How long an agent may take from a command's end to starting its after-hook (a few ms when idle; a loaded
# machine takes longer). A change inside it is kept as the command's: dropping one of the agent's changes
# would leave it out of every undo, while a user rarely answers a prompt within a second of an edit.
START_SLACK_S = 1.0
# The hook's start is known to a clock tick (10 ms), rounded down: a mark up to this much after it is still
# one made before the command ended.
MARK_SLACK_S = 0.05

Event = dict[str, Any]
Output = dict[str, Any] | None


def agent_pid(start: int) -> int:
    """The agent's process: from *start* (the hook's parent), the nearest ancestor that is not a shell."""
    from turnback.procs import parent_and_name

    pid = start
    for _ in range(8):
        found = parent_and_name(pid)
        if found is None or found[1] not in SHELLS:
            return pid
        pid = found[0]
    return pid


def call_key(tool: str, tool_input: object) -> str:
    """What names a call of an agent that gives it no id: its tool and input (a digest)."""
    import hashlib

    canonical = json.dumps([tool, tool_input], sort_keys=True, ensure_ascii=False)
    return f"{tool}:{hashlib.sha256(canonical.encode()).hexdigest()[:32]}"


class Caller(NamedTuple):
    """What the hook process knew besides its event: its parent, working folder and the agent's project folder
    (``CLAUDE_PROJECT_DIR``)."""

    parent_pid: int
    cwd: str
    project_dir: str | None
    started_at: float | None = None  # when the agent started the hook process (seconds since the epoch)
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


class Verdict(NamedTuple):
    """A hook's answer to a file tool it will not let through as it is: ``ask`` the user, or ``deny`` it."""

    decision: str
    reason: str


class Recorder:
    """One event of one agent session, recorded through the engine. *harness* names the agent in the store
    (session and call ids are the agent's own, under it); *external* is the agent's session id."""

    def __init__(self, engine: Any, caller: Caller, home: str, *, harness: str, title: str, external: str, cwd: str):
        self.engine = engine
        self.caller = caller
        self.home = home
        self.harness = harness
        self.title = title
        self.external = external
        self.cwd = cwd
        self._marked = False

    def agent_pid(self) -> int:
        return agent_pid(self.caller.parent_pid)

    def session(self) -> Any:
        if not self.external:
            raise ValueError("the event has no session_id")
        project = self.caller.project_dir or self.cwd
        session = self.engine.session_for(self.harness, self.external, project, title=self.title)
        if not self._marked:  # once per event: `turnback status` tells installed hooks that never ran by it
            from turnback.hooks.install import mark_fired

            mark_fired(self.home, self.harness, self.engine.project_of(session).root)
            self._marked = True
        return session

    def running_turn(self, session: Any) -> Any:
        """The running turn; one begun now if the prompt's event was missed (a hook installed mid-session)."""
        from turnback.errors import BusyError, RefusedError

        try:
            return self.engine.running_turn(session.id)
        except RefusedError:
            pass
        try:
            return self.engine.begin_turn(session.id, None, holder_pid=self.agent_pid())
        except BusyError:  # another hook of the same moment began it first: join that turn
            return self.engine.running_turn(session.id)

    def call(self, session: Any, use_id: str) -> Any:
        """The running call the agent knows as *use_id*; None when none runs (no before-event was seen)."""
        call = self.engine.external_call(session.id, self.harness, use_id) if use_id else None
        return call if call is not None and call.status == "running" else None

    def unpaired_id(self, session: Any, key: str) -> str:
        """The id of a call begun now, for an agent that gives its calls no id (:func:`call_key`): *key*
        ``#N`` for the Nth alike, paired with the Nth after-event alike (:meth:`first_running`)."""
        number = 1
        while self.engine.external_call(session.id, self.harness, f"{key}#{number}") is not None:
            number += 1
        return f"{key}#{number}"

    def first_running(self, session: Any, key: str) -> Any:
        """The first call still running of those begun as *key* (:meth:`unpaired_id`); None when none runs."""
        number, call = 1, None
        while call is None and self.engine.external_call(session.id, self.harness, f"{key}#{number}") is not None:
            call = self.call(session, f"{key}#{number}")
            number += 1
        return call

    def marks(self, session: Any) -> str:
        return commandstart.folder(self.home, session.id)

    # -- the events ------------------------------------------------------------------------

    def session_start(self, *, after_compaction: bool = False) -> None:
        session = self.session()
        if after_compaction:
            self.engine.busy_end(session.id, COMPACTION)
        if self.caller.env_file and os.name == "posix":  # PowerShell reads the file as assignments only
            commandstart.arm(self.caller.env_file, self.marks(session))

    def prompt(self, text: str) -> list[str]:
        """A turn begins (the one left running ends first); the lines to tell the model (revert notices)."""
        session = self.session()
        self.engine.busy_end(session.id, COMPACTION)
        self.end_running(session)
        self.engine.begin_turn(session.id, text, holder_pid=self.agent_pid())
        notices = self.engine.take_notices(session.id)
        if not notices:
            return []
        return [*[word(notice.message) for notice in notices], say("reverted_read_again")]

    def job_ended(self, use_id: str, status: str) -> None:
        """The agent says a background job ended (not a user's prompt): the job's call ends now; the model's
        answer to it joins a turn begun when it calls a tool (:meth:`running_turn`)."""
        session = self.session()
        self.engine.busy_end(session.id, COMPACTION)
        job = self.engine.external_call(session.id, self.harness, use_id)
        if job is not None and job.status == "running":
            failed = None if status == "completed" else Message("background_command_ended", status=status)
            self.engine.finish_command(job.id, error=failed)
        self.end_running(session)

    def file_before(
        self, tool: str, tool_input: dict[str, Any], use_id: str, paths: Sequence[str], *, can_ask: bool = True
    ) -> Verdict | None:
        """A file tool is about to write *paths*: keep what they hold. None when it may go ahead; else what to
        tell the agent:

        - a path turnback's own file tools refuse (its store, a ``.git`` folder, a link into the project):
          denied, where the agent can ask too. Such a write could not be recorded, and one in the store
          would let the agent change the history it is undone by.
        - content turnback cannot keep a copy of (over the cap, unreadable): the user is asked, and the call
          is recorded as not covered; where the agent's hooks cannot ask (*can_ask* False), denied (then it
          never runs: no record).
        """
        from turnback.errors import UncoveredError, UnsafePathError

        session = self.session()
        self.running_turn(session)
        begin = {"cwd": self.cwd, "external_id": (self.harness, use_id) if use_id else None, "before": list(paths)}
        try:
            self.engine.begin_call(session.id, tool, tool_input, **begin)
        except UnsafePathError as unsafe:
            return Verdict("deny", say("agent_deny_unsafe_path", why=unsafe.message))
        except UncoveredError as refused:
            if not can_ask:
                return Verdict("deny", say("agent_deny_uncovered", why=refused.why))
            # The user decides: recorded as not covered, so if it goes ahead every view says it cannot be undone.
            self.engine.begin_call(session.id, tool, tool_input, uncovered=True, **begin)
            return Verdict("ask", say("hook_ask_uncovered", why=refused.why))
        return None

    def command_before(self, command: str, use_id: str, *, background: bool = False) -> None:
        """A shell command is about to run: scan the project."""
        session = self.session()
        self.running_turn(session)
        self.engine.begin_command(
            session.id,
            command,
            cwd=self.cwd,
            external_id=(self.harness, use_id) if use_id else None,
            background=background,
        )

    def file_after(self, call: Any, paths: Sequence[str], *, error: Message | None = None) -> None:
        """A file call ended (failed when *error* says why): record what *paths* hold now."""
        handle = self.engine.resume_call(call.id, cwd=self.cwd)
        handle.end(failed=error, after=list(paths))

    def command_after(
        self,
        session: Any,
        call: Any,
        *,
        error: Message | None = None,
        duration_ms: object = None,
        ran: bool = True,
    ) -> None:
        """A command ended: scan again and record the difference, less what changed before it started;
        *ran* False: it never ran (denied), so it changed nothing."""
        if not ran:
            self.engine.finish_command(call.id, error=error, ran=False)
            return
        started = self.command_started_at(session, call, duration_ms)
        self.engine.finish_command(call.id, error=error, started_at=started)

    def command_started_at(self, session: Any, call: Any, duration_ms: object) -> float | None:
        """When the command really started: its shell's mark (exact), else an estimate. This event's hook
        began as the command ended, *duration_ms* earlier it started (an agent counts no permission prompt
        in it); earlier by ``START_SLACK_S``, so what the command did at once is never taken for the
        user's."""
        began = self.caller.started_at
        marked = self.marked_start(session, call, None if began is None else began + MARK_SLACK_S)
        if marked is not None:
            return marked
        if began is None or not isinstance(duration_ms, int | float) or duration_ms < 0:
            return None
        return began - duration_ms / 1000 - START_SLACK_S

    def marked_start(self, session: Any, call: Any, before: float | None = None) -> float | None:
        """The earliest mark a command's shell made after *call*'s before-event (and before *before*)."""
        import time

        return commandstart.started_at(self.marks(session), call.started_at / 1e9, before or time.time())

    def compaction_start(self) -> None:
        session = self.session()
        self.engine.busy_start(session.id, COMPACTION, holder_pid=self.agent_pid())

    def compaction_end(self) -> None:
        self.engine.busy_end(self.session().id, COMPACTION)

    def stop(self, keep: Sequence[str] = ()) -> str | None:
        """The turn ends; the summary line to show the user when it changed files (*keep*: see
        :meth:`end_running`)."""
        summary = self.end_running(self.session(), keep=keep)
        if summary is None or not (summary.line or summary.notes):
            return None
        return "\n".join([word(line) for line in (summary.line, *summary.notes) if line])

    def interrupt(self) -> None:
        """The user interrupted the turn: its unfinished calls end as interrupted, and the turn ends."""
        session = self.session()
        self.end_running(session, cut=Message("call_interrupted"))

    def session_end(self) -> None:
        session = self.session()
        self.engine.busy_end(session.id, COMPACTION)
        self.end_running(session)
        commandstart.clear(self.marks(session), remove=True)

    def end_running(self, session: Any, keep: Sequence[str] = (), cut: Message | None = None) -> Any:
        """Record the turn's unfinished commands and end it; its summary, or None when no turn runs.

        *keep*: the commands of background jobs the agent says still run; they stay open, to be recorded
        when the agent says they ended. *cut*: why the unfinished commands ended (default: no after-event).
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
            note = None if call.kind == "job" else (cut or Message("no_post_tool_use"))
            try:
                self.engine.finish_command(call.id, error=note, started_at=self.marked_start(session, call))
            except StoreError:  # a full disk: the turn still ends (the command stays "may be cut short")
                continue
        commandstart.clear(self.marks(session))  # none of the session's commands runs now
        return self.engine.end_turn(session.id)[1]


def handle(
    event: Event,
    caller: Caller,
    home: str,
    harness: str,
    respond: Callable[[Any, Event, Caller, str], Output],
    kept: KeptStore | None = None,
) -> tuple[str, str]:
    """Handle one event with *respond* (an adapter's: engine, event, caller, home -> output): what goes to
    stdout and to stderr. Never raises.

    The store is opened for the event and closed after it, so settings and keys are read as they are now; in
    the hook relay's long-lived process, it is *kept* open across events, each with an engine of its own (the
    settings read afresh; opened again when a new opening would give another store).
    """
    worded_in = language.set(event_language(home))
    try:
        import turnback

        with kept.lent() if kept is not None else turnback.open(home) as engine:
            output = respond(engine, event, caller, home)
        return (json.dumps(output) + "\n" if output else ""), ""
    except Exception as exc:  # never block the agent: say it once, log the rest
        from turnback.boundary import log_unexpected

        log_unexpected(home, f"hook {harness}")
        return "", failure_line(exc)
    finally:
        language.reset(worded_in)


def event_language(home: str) -> str:
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


def run(
    harness: str,
    handler: Callable[[Event, Caller, str], tuple[str, str]],
    stdin: IO[bytes] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Handle one hook event of *harness* in this process with its adapter's *handler* (``turnback --store
    DIR hook HARNESS``; the plain command goes through :mod:`turnback.hooks.relay`). Always exits 0:
    turnback's trouble never blocks the agent."""
    from turnback.home import default_home

    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        event, why = parse(stdin.read())
        if event is None or not wanted(event, harness):
            stderr.write(why)
            return 0
        out, err = handler(event, Caller.this_process(), default_home())
    except Exception as exc:  # never block the agent: a folder gone, stdin unreadable
        out, err = "", failure_line(exc)
    stdout.write(out)
    stderr.write(err)
    return 0


__all__ = ["Caller", "Recorder", "Verdict", "agent_pid", "call_key", "event_language", "handle", "run"]

"""A harness's ``turn begin``, ``exec`` and ``turn end`` served by the hook relay, so that each process of the
console script costs little more than Python's own start.

Importing the command line (:mod:`turnback.cli.main`: argparse, ``re``, the
engine and its store) costs a process some 100 ms before any work, and a
harness runs three of them a turn. :func:`main` recognises the forms a
harness uses, with a check by hand that imports nothing heavy (this module
imports only what a hook does)::

    turnback [--store DIR] [--session S] turn begin [--session S] [--message TEXT] [--pid PID]
    turnback [--store DIR] [--session S] turn end [--session S]
    turnback [--store DIR] [--session S] exec [--session S] [--unasked] -- CMD ARGS…

and hands them to the relay of the store (:mod:`turnback.hooks.relay`), a
long-lived process that holds the engine's imports, the decoded stat cache
and the project's watcher. The relay parses the words with the command
line's own parser and runs the verb's own code (``cli.commands.turn`` and
``exec``) inside the command line's error boundary, on a context of the
client's (its folder, parent process, ``TURNBACK_SESSION``, whether stdout
is a terminal), and replies what to print and the exit code.

``exec`` runs in three steps: the relay scans and records the running call
(this process waits for the command, as ``turnback exec`` does); this
process runs the command itself (its stdin, stdout, stderr and terminal; the
environment the engine gives commands, no ``TURNBACK_*``); then the relay
scans again and records what changed since the command started. When no
relay answers that last step (it ended while a long command ran), this
process records the end itself, with the same code.

Anything else (another option, ``--json``, ``--background``, ``--timeout``,
``--lang``, ``-h``), no relay answering, or a relay that says NOT_TAKEN (its
code changed, or this process's key, keyring, language or colour settings
are not its) runs the full command line, exactly as before; after it, when
no relay answered, one is started for the next call (unless
``TURNBACK_HOOK_RELAY=0``). A relay that took a request and ended before
answering is not asked again: the process says so and exits 70 (``exec``:
125, the command not run).
"""

from __future__ import annotations

import io  # loaded with Python itself
import os
import sys
import time

TYPE_CHECKING = False  # typing itself is among what this process should not import
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from turnback.cli import _common

# The steps of a request; each request's fields: the step, the client's folder, pid, parent pid, whether its
# stdout is a terminal, TURNBACK_SESSION, the step's own fields (STEP_FIELDS of them), then the words.
VERB = b"verb"  # turn begin, turn end: the whole verb
RUN = b"run"  # exec, up to the command's start; answered RUN (the call and the folder to run it in)
RAN = b"ran"  # exec, the command ended: the call, the command's pid, its status, when it started
NOT_RUN = b"not-run"  # exec, the command could not be started: the call, the OSError's errno and text
STEP_FIELDS = {VERB: 0, RUN: 0, RAN: 4, NOT_RUN: 3}
FULL = b"full"  # the answer that only the full command line can run these words
CALLER_FIELDS = 6
EXIT_UNEXPECTED = 70  # cli.main's
EXIT_TURNBACK_FAILED = 125  # exec's: turnback failed before the command ran
CLOCK_REALTIME_COARSE = 5  # Linux's clock of file times (<linux/time.h>), which a command's ctimes are taken from
ROUNDING_S = 1e-6  # a start given as float seconds is rounded (a quarter of a microsecond): never past the real one
OPTIONS = {
    "before": ("--store", "--session"),
    "begin": ("--store", "--session", "--message", "--pid"),
    "end": ("--store", "--session"),
    "exec": ("--store", "--session"),
}
TEXT_OPTIONS = ("--message",)  # free text: a value that starts with "-" is still the value (_common.join_text_values)


def harness_form(words: list[str]) -> tuple[bytes, str | None, list[str]] | None:
    """When *words* are one of the forms above: the first step (VERB or RUN), the last ``--store`` given (None:
    none), and exec's command. None for anything else (the full command line parses it)."""
    store = None
    at = 0
    while at < len(words) and words[at].startswith("-"):
        option = _option(words, at, OPTIONS["before"])
        if option is None:
            return None
        if option[0] == "--store":
            store = option[1]
        at = option[2]
    if words[at : at + 2] in (["turn", "begin"], ["turn", "end"]):
        step, allowed, at = VERB, OPTIONS[words[at + 1]], at + 2
    elif words[at : at + 1] == ["exec"]:
        step, allowed, at = RUN, OPTIONS["exec"], at + 1
    else:
        return None
    while at < len(words):
        if step == RUN and words[at] == "--":
            command = words[at + 1 :]
            return (RUN, store, command) if command else None
        if step == RUN and words[at] == "--unasked":
            at += 1
            continue
        option = _option(words, at, allowed)
        if option is None:
            return None
        if option[0] == "--store":
            store = option[1]
        at = option[2]
    return (VERB, store, []) if step == VERB else None


def _option(words: list[str], at: int, allowed: tuple[str, ...]) -> tuple[str, str, int] | None:
    """The option at *at* (``--name VALUE`` or ``--name=VALUE``, its name in *allowed*), its value, and where
    the next word is; None when it is anything else, or its value is one argparse would not take as one."""
    name, equals, value = words[at].partition("=")
    if name not in allowed:
        return None
    if equals:
        return name, value, at + 1
    if at + 1 == len(words) or (words[at + 1].startswith("-") and name not in TEXT_OPTIONS):
        return None
    return name, words[at + 1], at + 2


def main(words: list[str]) -> int:
    """``turnback WORDS`` (the console script's words): served by the relay when they are a harness's form
    and a relay takes them, else run by the full command line. The exit code."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")  # as cli.main writes: a name's undecodable bytes escaped
    form = harness_form(words)
    if form is None:
        return _full(words)
    step, store, command = form
    from turnback.home import default_home
    from turnback.hooks import relay

    home = os.path.abspath(store) if store else default_home()  # the store folder, as _common.Context.home says
    relayed = os.environ.get(relay.ENV_RELAY, "") != "0" and sys.platform.startswith("linux")
    try:
        cwd = os.getcwdb()
        meanwhile = None
        if step == RUN:
            from turnback.procs import hide_own_environment

            # As the engine does for the commands it runs (this process's environment may hold the key), while
            # the relay scans: ctypes is some 3 ms.
            meanwhile = hide_own_environment
        reply = _ask(home, _fields(step, cwd, [], words), meanwhile) if relayed else b""
        if not isinstance(reply, tuple):
            if reply == relay.TAKEN:
                return _no_answer(EXIT_TURNBACK_FAILED if step == RUN else EXIT_UNEXPECTED)
            code = _full(words)
            if relayed and reply != relay.NOT_TAKEN and os.path.isdir(home):
                relay.start_relay(home)  # none answered: one for the next call
            return code
        status, out, err = reply
        if status == FULL:
            return _full(words)
        if status != RUN:
            return _shown(status, out, err)
        call_id, _, workdir = out.partition(b"\0")
        return _run_command(home, cwd, words, command, call_id, os.fsdecode(workdir))
    except KeyboardInterrupt:
        from turnback.catalog import say

        sys.stderr.write("turnback: " + say("interrupted_goes_on_next_undo") + "\n")
        return 130  # _common.EXIT_INTERRUPTED


def _full(words: list[str]) -> int:
    from turnback.cli.main import main as full_main

    return full_main(words)


def _fields(step: bytes, cwd: bytes, step_fields: list[bytes], words: list[str]) -> list[bytes]:
    from turnback.home import env_session

    caller = [
        step,
        cwd,
        b"%d" % os.getpid(),
        b"%d" % os.getppid(),
        b"1" if sys.stdout.isatty() else b"",
        os.fsencode(env_session() or ""),
    ]
    return [*caller, *step_fields, *map(os.fsencode, words)]


def _ask(
    home: str, fields: list[bytes], meanwhile: Callable[[], object] | None = None
) -> tuple[bytes, bytes, bytes] | bytes:
    from turnback.hooks import relay

    sock = relay.connect(home)
    return b"" if sock is None else relay.ask_cli(sock, relay.cli_request(fields), meanwhile)


def _shown(status: bytes, out: bytes, err: bytes) -> int:
    try:
        sys.stdout.write(out.decode("utf-8", "surrogatepass"))
        sys.stdout.flush()
    except BrokenPipeError:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - as cli.main: the reader closed the pipe
        return 0
    sys.stderr.write(err.decode("utf-8", "surrogatepass"))
    sys.stderr.flush()
    return int(status)


def _no_answer(code: int) -> int:
    from turnback.catalog import say

    sys.stderr.write("turnback: " + say("fast_relay_no_answer") + "\n")
    return code


def _run_command(home: str, cwd: bytes, words: list[str], command: list[str], call_id: bytes, workdir: str) -> int:
    """Run exec's *command* here (this process's environment hidden already: :func:`main`), then have its end
    recorded (by the relay, else here); exec's exit code."""
    # On the clock of the command's ctimes, a little early: a change in this clock tick is the command's.
    started_at = time.clock_gettime_ns(CLOCK_REALTIME_COARSE) / 1e9 - ROUNDING_S
    try:
        pid = _spawn(command, workdir)
    except OSError as exc:
        fields = _fields(NOT_RUN, cwd, [call_id, b"%d" % (exc.errno or 0), os.fsencode(exc.strerror or "")], words)
    else:
        try:
            status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        except KeyboardInterrupt:  # the command got the same interrupt; record what it did before it ended
            status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        fields = _fields(RAN, cwd, [call_id, b"%d" % pid, b"%d" % status, repr(started_at).encode()], words)
    reply = _ask(home, fields)
    return _shown(*(reply if isinstance(reply, tuple) else Served(home).answer(fields)))


def _spawn(command: list[str], workdir: str) -> int:
    """Start *command* in *workdir* as ``subprocess.Popen`` starts exec's (the engine's): found on ``PATH``,
    no descriptor but 0-2 inherited, SIGPIPE and SIGXFSZ back to their default (Python ignores them), the
    environment the engine gives commands (``home.agent_environment``: no ``TURNBACK_*``); its pid. Not
    subprocess itself: importing it costs this process some 16 ms (locale, re, enum). A folder or program
    that is not there, or cannot be run, raises the same ``OSError`` as Popen."""
    import _signal  # type: ignore[import-not-found]  # signal's own module (no stubs): signal.py imports enum

    from turnback.home import agent_environment

    os.chdir(workdir)  # the command's folder: this process reads no relative path after this
    inherited = [(os.POSIX_SPAWN_CLOSE, int(fd)) for fd in os.listdir("/proc/self/fd") if int(fd) > 2]
    return os.posix_spawnp(
        command[0],
        command,
        agent_environment(),
        file_actions=inherited,
        setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ),
    )


# -- the relay's side --------------------------------------------------------------------------


class Served:
    """The command line's requests to the relay of the store in *home*, each run by the verb's own code as
    the full command line runs it (:func:`turnback.cli.main.run_verb`), on a context of the client's."""

    def __init__(self, home: str):
        import turnback
        from turnback.cli.main import build_parser
        from turnback.engine import KeptStore

        self.home = home
        self.parser = build_parser()  # once: every verb's module imported before the first request
        self.kept = KeptStore(lambda: turnback.open(home))  # the requests' store, opened once
        self.running: dict[bytes, tuple[int, int | None]] = {}  # a begun exec's call -> its client (pid, start)

    def busy(self) -> bool:
        """Whether a command this relay began still runs (its client, which waits for it, is alive)."""
        from turnback.procs import process_alive

        self.running = {call: client for call, client in self.running.items() if process_alive(*client)}
        return bool(self.running)

    def __call__(self, fields: list[bytes]) -> bytes:
        """The relay's reply to a request's *fields* (:func:`turnback.hooks.relay.cli_reply`)."""
        import contextvars

        from turnback.hooks import relay

        # Its own copy of the context: the language it is worded in is this request's only.
        return relay.cli_reply(*contextvars.copy_context().run(self.answer, fields))

    def answer(self, fields: list[bytes]) -> tuple[bytes, bytes, bytes]:
        """(status, stdout, stderr) for a request's *fields*: FULL, RUN (stdout: the call, NUL, the folder), or
        the exit code."""
        from turnback.cli import _common
        from turnback.cli.main import parse_words

        step, cwd, pid, parent, tty, env_session = fields[:CALLER_FIELDS]
        if step not in STEP_FIELDS:
            return FULL, b"", b""  # a newer client's step
        count = CALLER_FIELDS + STEP_FIELDS[step]
        step_fields, words = fields[CALLER_FIELDS:count], [os.fsdecode(word) for word in fields[count:]]
        try:
            args = parse_words(self.parser, words)
        except SystemExit:  # a usage error: the full command line says it
            return FULL, b"", b""
        if not _serves(step, args):
            return FULL, b"", b""
        args.store = self.home  # where the client's --store (or TURNBACK_HOME) led it
        out, err = _Captured(terminal=bool(tty)), _Captured(terminal=False)
        ctx = _common.Context(args, _common.Output(json_mode=False, stdout=out, stderr=err), argv=words, kept=self.kept)
        ctx.cwd, ctx.parent_pid, ctx.env_session = os.fsdecode(cwd), int(parent), os.fsdecode(env_session) or None
        status, began = _run_step(step, step_fields, int(pid), ctx)
        if began is not None:
            from turnback.procs import process_start

            self.running[began[0].encode()] = (int(pid), process_start(int(pid)))
            return RUN, began[0].encode() + b"\0" + os.fsencode(began[1]), b""
        if step in (RAN, NOT_RUN):
            self.running.pop(step_fields[0], None)
        return status, out.getvalue().encode("utf-8", "surrogatepass"), err.getvalue().encode("utf-8", "surrogatepass")


def _run_step(
    step: bytes, step_fields: list[bytes], pid: int, ctx: _common.Context
) -> tuple[bytes, tuple[str, str] | None]:
    """Run *step* of the client *pid* on *ctx*: its status, and (RUN) the call begun and its folder."""
    from turnback.cli.commands import exec as exec_verb
    from turnback.cli.commands import turn
    from turnback.cli.main import run_verb
    from turnback.model import CallId

    if step == VERB:
        return b"%d" % run_verb(ctx, turn.run), None
    if step == RUN:
        begun: list[tuple[str, str]] = []

        def begin(ctx: _common.Context, args: argparse.Namespace) -> int:
            result = exec_verb.begin_elsewhere(ctx, args, pid)
            if isinstance(result, int):
                return result
            begun.append(result)
            return 0

        code = run_verb(ctx, begin)
        if begun:
            return RUN, begun[0]
        return (FULL if code == exec_verb.FULL_CLI else b"%d" % code), None
    call_id = CallId(step_fields[0].decode())
    if step == RAN:
        child, status, started_at = int(step_fields[1]), int(step_fields[2]), float(step_fields[3])
        code = run_verb(
            ctx, lambda ctx, args: exec_verb.finish_elsewhere(ctx, args, call_id, child, status, started_at)
        )
        return b"%d" % code, None
    number, why = int(step_fields[1]), os.fsdecode(step_fields[2])
    return b"%d" % run_verb(
        ctx, lambda ctx, args: exec_verb.not_started_elsewhere(ctx, args, call_id, number, why)
    ), None


def _serves(step: bytes, args: argparse.Namespace) -> bool:
    """Whether the words parsed as *args* are the verb the client's *step* is of, with nothing the relay leaves
    to the full command line (``--json``, ``--lang``, a background job, a timeout)."""
    if getattr(args, "json", False) or getattr(args, "lang", None) is not None:
        return False
    if step == VERB:
        return bool(args.verb == "turn")
    return bool(args.verb == "exec" and not args.background and args.timeout is None and args.output is None)


class _Captured(io.StringIO):
    """What the verb prints on one stream of the client's, kept for the reply; a terminal when the client's is."""

    def __init__(self, *, terminal: bool):
        super().__init__()
        self._terminal = terminal

    def isatty(self) -> bool:
        return self._terminal


def serve(home: str) -> int:
    """The relay of the store in *home*: hook events, and the command line's requests (:class:`Served`)."""
    from turnback.hooks import relay

    served = Served(home)
    return relay.serve(home, served, served.busy, served.kept)  # hook events share the requests' store


if __name__ == "__main__":
    from turnback.cli.fast import serve as serve_here  # as itself, not __main__: the relay's code watch sees it

    sys.exit(serve_here(sys.argv[2]) if sys.argv[1:2] == ["serve"] and len(sys.argv) == 3 else 2)

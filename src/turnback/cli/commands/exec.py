"""``turnback exec [--timeout SEC] [--background] -- CMD ARGS…``: run a shell command as a call.

The project is scanned before and after the command; the difference is the
call's change, printed as one line (``changed src/a.rs +3 -1 · new b.txt``).
exec exits with the command's own status: 125 when turnback fails before the
command runs (as ``env`` does), 126 when it cannot be run, 127 when it is not
found, 124 when it still runs after ``--timeout`` (it keeps running; its
changes are recorded when it ends, and undo waits for it).

With ``--json`` the command's stdout goes to stderr, so that stdout carries
one JSON object once the command is done.
"""

from __future__ import annotations

import argparse
import errno
import sys

import turnback
from turnback import boundary, short_id
from turnback.catalog import say, word
from turnback.cli import _common
from turnback.engine import CommandNotStarted, CommandResult
from turnback.model import CallId
from turnback.render import data
from turnback.render.terminal import quote

EXIT_TURNBACK_FAILED = 125
EXIT_CANNOT_RUN = 126
EXIT_NOT_FOUND = 127
EXIT_TIMED_OUT = 124
FULL_CLI = -1  # begin_elsewhere: only run can run this one


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "exec",
        parents=[common],
        help="run a shell command as a call: what it changes can be undone",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_session_option(parser)
    parser.add_argument("--timeout", type=float, metavar="SEC", help="stop waiting after SEC seconds (exit 124)")
    parser.add_argument("--background", action="store_true", help="start it as a background job and return")
    parser.add_argument("--output", metavar="FILE", help="a background job's output goes to FILE (default: nowhere)")
    parser.add_argument(
        "--unasked",
        action="store_true",
        help="the harness ran it without asking the user, because turnback covers says an undo can take it back",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to run")


def _command(args: argparse.Namespace) -> list[str]:
    return list(args.command[1:] if args.command[:1] == ["--"] else args.command)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    argv = _command(args)
    out = ctx.out
    try:
        session = ctx.session()
        if args.background:
            call = ctx.engine.start_job(session.id, argv, cwd=ctx.cwd, output=args.output, unasked=args.unasked)
            if call.status == "failed":
                out.note("turnback: " + say("job_did_not_start", error=word(call.error or "")))
                return EXIT_TURNBACK_FAILED
            out.line(say("job_started", job=short_id(call.id), pid=call.pid, command=" ".join(map(quote, argv))))
            out.json({"job": {"id": call.id, "pid": call.pid}})
            return 0
        stdout = sys.stderr.buffer if out.json_mode else None
        out.flush()
        ctx.engine.auto_start_watchers()  # a harness's next exec on a big project then scans only what changed
        result = ctx.engine.run_command(
            session.id, argv, cwd=ctx.cwd, timeout=args.timeout, stdout=stdout, unasked=args.unasked
        )
    except CommandNotStarted as error:
        return _not_started(out, error)
    except turnback.TurnbackError as error:
        return _turnback_failed(out, error)
    return _shown(out, result, args.timeout)


# -- exec in two steps, for turnback.cli.fast: the hook relay records, the client process runs the command --


def begin_elsewhere(ctx: _common.Context, args: argparse.Namespace, runner_pid: int) -> tuple[CallId, str] | int:
    """Up to the command's start, for the process *runner_pid* that runs it itself and waits for it: the call
    and the folder to run it in; or the exit code and what was said (turnback failed before the command ran),
    or ``FULL_CLI`` when only :func:`run` can run it (an incognito session). Then :func:`finish_elsewhere`."""
    try:
        session = ctx.session()
        ctx.engine.auto_start_watchers()
        begun = ctx.engine.begin_exec(
            session.id, _command(args), runner_pid=runner_pid, cwd=ctx.cwd, unasked=args.unasked
        )
    except turnback.TurnbackError as error:
        return _turnback_failed(ctx.out, error)
    return FULL_CLI if begun is None else begun


def finish_elsewhere(
    ctx: _common.Context, args: argparse.Namespace, call_id: CallId, pid: int, status: int, started_at: float
) -> int:
    """The command of :func:`begin_elsewhere` ran as *pid*, from *started_at*, and ended with *status*
    (negative: the signal that ended it): recorded and shown as :func:`run` shows it; the exit code."""
    try:
        ctx.engine.exec_started(call_id, pid)
        result = ctx.engine.finish_exec(call_id, status, started_at=started_at)
    except turnback.TurnbackError as error:
        return _turnback_failed(ctx.out, error)
    return _shown(ctx.out, result, args.timeout)


def not_started_elsewhere(
    ctx: _common.Context, args: argparse.Namespace, call_id: CallId, error_number: int, why: str
) -> int:
    """The command of :func:`begin_elsewhere` could not be started (``OSError`` *error_number*, *why*)."""
    try:
        ctx.engine.fail_exec(call_id, _command(args)[0], error_number, why)
    except CommandNotStarted as error:
        return _not_started(ctx.out, error)
    except turnback.TurnbackError as error:
        return _turnback_failed(ctx.out, error)


def _not_started(out: _common.Output, error: CommandNotStarted) -> int:
    code = EXIT_NOT_FOUND if error.errno == errno.ENOENT else EXIT_CANNOT_RUN
    out.note("turnback: " + word(error.message))
    out.json(boundary.refusal_data(error, code))
    return code


def _turnback_failed(out: _common.Output, error: turnback.TurnbackError) -> int:
    out.note("turnback: " + word(error.message))
    out.json(boundary.refusal_data(error, EXIT_TURNBACK_FAILED))
    return EXIT_TURNBACK_FAILED


def _shown(out: _common.Output, result: CommandResult, timeout: float | None) -> int:
    """What exec prints once the command ended (or its *timeout* passed); exec's exit code."""
    if result.timed_out:
        still_runs = say("command_still_runs", seconds=f"{timeout:g}", job=short_id(result.call.id))
        out.note("turnback: " + still_runs)
    if result.line:
        if out.json_mode:
            out.note(result.line)
        else:
            out.line(result.line)
    out.json({"call": data.call_data(result.call), "exit": result.exit_code, "line": result.line})
    if result.timed_out:
        return EXIT_TIMED_OUT
    return result.exit_code if result.exit_code is not None and result.exit_code >= 0 else 128 - (result.exit_code or 0)

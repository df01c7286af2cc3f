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
from turnback.engine import CommandNotStarted
from turnback.render import data
from turnback.render.terminal import quote

EXIT_TURNBACK_FAILED = 125
EXIT_CANNOT_RUN = 126
EXIT_NOT_FOUND = 127
EXIT_TIMED_OUT = 124


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


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    argv = args.command[1:] if args.command[:1] == ["--"] else args.command
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
        code = EXIT_NOT_FOUND if error.errno == errno.ENOENT else EXIT_CANNOT_RUN
        out.note("turnback: " + word(error.message))
        out.json(boundary.refusal_data(error, code))
        return code
    except turnback.TurnbackError as error:
        out.note("turnback: " + word(error.message))
        out.json(boundary.refusal_data(error, EXIT_TURNBACK_FAILED))
        return EXIT_TURNBACK_FAILED
    if result.timed_out:
        still_runs = say("command_still_runs", seconds=f"{args.timeout:g}", job=short_id(result.call.id))
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

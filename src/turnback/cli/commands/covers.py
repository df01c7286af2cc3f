"""``turnback covers -- CMD ARGS…``: can an undo take back what this command may destroy?

A harness asks before running a destructive command (``rm -r build``) without
asking its user. Exit 0 and ``covered`` when turnback's snapshots hold every
file the command names; exit 1 with the reasons when not (``shred``,
``git clean -x``, a path left out of the snapshots, an outside path the mode
does not copy).
"""

from __future__ import annotations

import argparse

from turnback.catalog import say, word
from turnback.cli import _common
from turnback.render.data import message_data


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "covers",
        parents=[common],
        help="say whether an undo can take back what a command may destroy",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_session_option(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to check")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    argv = args.command[1:] if args.command[:1] == ["--"] else args.command
    coverage = ctx.engine.covers(ctx.session().id, argv, cwd=ctx.cwd)
    if coverage.covered:
        ctx.out.line(say("covers_covered"))
    else:
        ctx.out.line(say("covers_not_covered"))
        ctx.out.lines(["  " + word(reason) for reason in coverage.reasons])
    ctx.out.json({"covered": coverage.covered, "reasons": [message_data(reason) for reason in coverage.reasons]})
    return 0 if coverage.covered else 1

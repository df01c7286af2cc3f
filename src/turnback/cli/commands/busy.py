"""``turnback busy start|end REASON``: mark the session busy for a reason of the harness's own.

While a mark stands (compaction, an approval waiting), undo, revert, rollback
and resend refuse with exit 3, naming it. A mark whose process (the one that
ran ``busy start``, or ``--pid``) has ended expires by itself.
"""

from __future__ import annotations

import argparse
import os

from turnback.catalog import say
from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "busy",
        parents=[common],
        help="mark the session busy (compaction, approval waiting), or end the mark",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = parser.add_subparsers(dest="busy_verb", metavar="VERB", required=True)
    start = verbs.add_parser("start", parents=[common], help="mark the session busy")
    _common.add_session_option(start)
    start.add_argument("reason", help="what it is busy with, shown to a refused undo")
    start.add_argument("--pid", type=int, help="the process whose end also ends the mark (default: the caller)")
    end = verbs.add_parser("end", parents=[common], help="end the session's mark (with REASON, or all)")
    _common.add_session_option(end)
    end.add_argument("reason", nargs="?", help="end only the marks with this reason")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    session = ctx.session()
    if args.busy_verb == "start":
        mark = ctx.engine.busy_start(session.id, args.reason, holder_pid=args.pid if args.pid else os.getppid())
        ctx.out.line(say("busy_reason", reason=args.reason))
        ctx.out.json({"mark": {"id": mark, "reason": args.reason}})
        return 0
    ended = ctx.engine.busy_end(session.id, args.reason)
    ctx.out.line(say("busy_marks_ended", count=ended))
    ctx.out.json({"ended": ended})
    return 0 if ended else 1

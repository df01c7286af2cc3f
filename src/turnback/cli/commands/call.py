"""``turnback call before|after``: record a call whose files the harness writes itself.

``call before --session S --tool T PATH...`` keeps the earlier state of each
path and prints the call's id; after the harness wrote them,
``call after CALL PATH...`` records what they hold and ends the call. A
call that never gets its ``after`` stays "may be cut short" and revertible.
"""

from __future__ import annotations

import argparse

from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("call", parents=[common], help="record a call whose files the harness writes itself")
    verbs = parser.add_subparsers(dest="call_verb", metavar="VERB", required=True)
    before = verbs.add_parser(
        "before", parents=[common], help="keep the state of PATHs before a write; prints the call id"
    )
    _common.add_session_option(before)
    before.add_argument("--tool", required=True, help="the tool's name (Write, Edit, ...)")
    before.add_argument("--input", metavar="JSON", help="the call's raw arguments, shown by turnback show --input")
    before.add_argument("paths", nargs="+", metavar="PATH")
    _common.add_uncovered_option(before)
    after = verbs.add_parser("after", parents=[common], help="record what PATHs hold after the write and end the call")
    after.add_argument("call", help="the call id (or unique prefix) that call before printed")
    after.add_argument("paths", nargs="*", metavar="PATH")
    after.add_argument("--failed", metavar="REASON", help="the call failed (its changes are still recorded)")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine = ctx.engine
    if args.call_verb == "before":
        session = ctx.session()
        handle = engine.begin_call(
            session.id, args.tool, args.input, cwd=ctx.cwd, before=args.paths, uncovered=args.uncovered
        )
        ctx.out.line(handle.id)
        ctx.out.json({"call": {"id": handle.id}})
        return 0
    handle = engine.resume_call(args.call, cwd=ctx.cwd)
    for path in args.paths:
        handle.after(path)
    return _common.show_call(ctx, handle.end(failed=args.failed))

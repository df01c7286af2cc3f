"""``turnback resend N [--revert | --keep | --anyway]``: edit and resend the message of turn N.

The calls from turn N on are taken away. First each file they changed is
listed once: how many calls changed it, and the lines a revert adds and
removes. Then choose: ``--revert`` reverts each change, newest call first
(a change that cannot be reverted is listed with its reason, and nothing is
resent: the reverts done stay done); ``--anyway`` reverts what it can and
drops the copies of the rest; ``--keep`` leaves the files as they are. The
calls are then deleted with their copies, and the next turn continues from
turn N's parent. Without a choice it only previews.
"""

from __future__ import annotations

import argparse

from turnback.catalog import Message, say
from turnback.cli import _common
from turnback.render import data, text
from turnback.render.terminal import display_width, pad, quote


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "resend",
        parents=[common],
        help="edit and resend message N: take its calls and later ones away (preview; choose how)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_session_option(parser)
    parser.add_argument("turn", help="the turn whose message is edited: its number or id")
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--revert", action="store_const", const="revert", dest="mode", help="Revert and Send")
    choice.add_argument("--keep", action="store_const", const="keep", dest="mode", help="Keep Files and Send")
    choice.add_argument("--anyway", action="store_const", const="anyway", dest="mode", help="Send Anyway")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine, out = ctx.engine, ctx.out
    plan = engine.plan_resend(ctx.session(with_turns=True).id, args.turn, mode=args.mode or "revert")
    files = engine.resend_files(plan)
    width = max((display_width(quote(f.path)) for f in files), default=0) + 2
    calls = [say("n_calls", count=item.calls) for item in files]
    # Ten columns fit English's "99 calls"; a wider label (日本語's "1 件の呼び出し") widens the column.
    calls_width = max([10, *(display_width(label) + 2 for label in calls)])
    for item, label in zip(files, calls, strict=True):
        out.line(f"{pad(quote(item.path), width)}{pad(label, calls_width)}+{item.added} -{item.removed}")
    if not files:
        out.line(say("resend_no_files"))
    files_data = data.resend_files_data(files)
    if args.mode is None:
        out.lines(text.plan_lines(plan, engine.load, diff_limit=0))
        out.line(
            say(
                "resend_choose",
                revert=Message("label_revert_and_send"),
                keep=Message("label_keep_files_and_send"),
                anyway=Message("label_send_anyway"),
            )
        )
        out.json({"files": files_data, **data.plan_data(plan, applied=False), "resent": False})
        return 0
    result = engine.apply(plan)
    out.lines(text.result_lines(result))
    resent = not any(note.code == "nothing_resent" for note in result.notes)
    out.json({"files": files_data, **data.result_data(result), "resent": resent})
    return 0 if resent else 1

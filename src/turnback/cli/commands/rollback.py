"""``turnback rollback N [--expect-head H] [--confirm]``: move the head back to turn N, restoring files.

Without ``--confirm`` it only previews: every file of every turn on the way,
newest first, and the turns it rewinds. The turns after N stay, as an
abandoned branch (``turnback log`` shows them); a new turn starts a new branch
from N. ``--expect-head`` names the head you saw: if another turn or rollback
happened since, the rollback is refused and nothing changes. ``0`` rolls back
to the start of the session. The preview counts the lines each file gets back;
``--diff`` shows the whole diff.
"""

from __future__ import annotations

import argparse

from turnback import short_id
from turnback.catalog import say
from turnback.cli import _common
from turnback.render import data, text, views


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "rollback",
        parents=[common],
        help="roll the conversation back to turn N (preview; --confirm applies)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_session_option(parser)
    parser.add_argument("turn", help="the turn to go back to: its number or id (0: the start)")
    parser.add_argument("--expect-head", metavar="H", help="the head you saw (number or id); refused if it moved")
    parser.add_argument("--confirm", action="store_true", help="apply the rollback (without it: preview only)")
    parser.add_argument("--diff", action="store_true", help="show the whole diff the rollback writes back")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine, out = ctx.engine, ctx.out
    plan = engine.plan_rollback(
        ctx.session(with_turns=True).id, args.turn, expect_head=args.expect_head, confirming=args.confirm
    )
    hidden = engine.hidden_paths(plan.session_id, [row.path for row in plan.rows if row.conflict])
    out.lines(text.plan_lines(plan, engine.load, diff_limit=engine.config.diff_lines, hidden=hidden))
    if args.diff:
        changes = views.plan_changes(plan, engine.load)
        ignored = set(engine.hidden_paths(plan.session_id, [change.path for change in changes]))
        out.lines(views.patch_text(changes, ignored, engine.load).splitlines())
        out.lines(views.left_out_lines(changes, ignored))
    elif not args.confirm:
        out.lines(views.going_back_lines(plan, engine.load, diff_flag="--diff"))
    if not args.confirm:
        # The exact confirm: pinned to the head this preview saw (its id also names the session).
        head = short_id(plan.head_from) if plan.head_from else "0"
        session = f" --session {args.session}" if args.session else ""
        command = f"turnback rollback {args.turn}{session} --confirm --expect-head {head}"
        out.line(say("rollback_changes_nothing_yet", command=command))
        out.json({**data.plan_data(plan, applied=False), "turns": list(plan.turn_ids)})
        return 0
    result = engine.apply(plan)
    out.lines(text.result_lines(result))
    out.json({**data.result_data(result), "turns": list(plan.turn_ids)})
    return 0

"""``turnback undo [N] [--from N] [--force] (--yes|--dry-run)``: take back turns, newest first."""

from __future__ import annotations

import argparse

from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "undo",
        parents=[common],
        help="take back the newest turn that is not undone (shows the plan, then asks)",
        description="Take back the newest turn of the session that is not undone. A file changed after the turn "
        "is skipped unless --force (its current content then goes to the trash). An interrupted undo goes on first.",
    )
    _common.add_session_option(parser)
    parser.add_argument(
        "n",
        nargs="?",
        metavar="N",
        help="undo turn N alone: its number or id (newer turns must be undone, or --force)",
    )
    parser.add_argument(
        "--from",
        dest="from_n",
        metavar="N",
        help="undo turn N (number or id) and every later turn, newest first",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="also overwrite files changed after the turn, and break the stack rule",
    )
    _common.add_confirm_options(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    session = ctx.session(with_turns=True)
    plan = ctx.engine.plan_undo(session.id, turn=args.n, from_turn=args.from_n, force=args.force)
    return _common.take_back(ctx, plan, yes=args.yes, dry_run=args.dry_run)

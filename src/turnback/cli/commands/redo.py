"""``turnback redo (--yes|--dry-run)``: take back the newest undo, revert or rollback (undo the undo).

Every file goes back to what the operation displaced, if it still holds what
the operation put there; a file changed since is left alone. A redo is an
operation too: ``turnback redo`` again takes the redo back.
"""

from __future__ import annotations

import argparse

from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "redo",
        parents=[common],
        help="take back the newest undo, revert or rollback (shows the plan, then asks)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_session_option(parser)
    _common.add_confirm_options(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    plan = ctx.engine.plan_redo(ctx.session(with_turns=True).id)
    return _common.take_back(ctx, plan, yes=args.yes, dry_run=args.dry_run)

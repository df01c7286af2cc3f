"""``turnback revert CALL [--anyway] (--yes|--dry-run)``: take back one call."""

from __future__ import annotations

import argparse

from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "revert",
        parents=[common],
        help="put back what the files held before one call, if they still hold what it wrote",
        description="Revert one call. A file that changed since the call is left alone and its diff shown; "
        "--anyway writes the earlier content over exactly what the preview showed.",
    )
    parser.add_argument("call", help="the call id, or a unique prefix of it")
    parser.add_argument("--anyway", action="store_true", help="restore even files that changed since the call")
    _common.add_confirm_options(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    plan = ctx.engine.plan_revert(args.call, anyway=args.anyway)
    return _common.take_back(ctx, plan, yes=args.yes, dry_run=args.dry_run)

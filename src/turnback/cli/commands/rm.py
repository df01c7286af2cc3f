"""``turnback rm --session S PATH``: delete a file, link or empty folder, keeping what it held."""

from __future__ import annotations

import argparse

from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("rm", parents=[common], help="delete a file, link or empty folder, keeping a copy")
    _common.add_session_option(parser)
    parser.add_argument("path", help="what to delete")
    _common.add_uncovered_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    session = ctx.session()
    return _common.show_call(ctx, ctx.engine.delete(session.id, args.path, cwd=ctx.cwd, uncovered=args.uncovered))

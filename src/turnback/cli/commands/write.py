"""``turnback write --session S PATH``: write stdin to PATH, keeping what it held before."""

from __future__ import annotations

import argparse

from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "write",
        parents=[common],
        help="write stdin to a file (making missing folders), keeping its earlier state",
    )
    _common.add_session_option(parser)
    parser.add_argument("path", help="the file to write (relative to this folder, or absolute)")
    _common.add_uncovered_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    session = ctx.session()
    content = ctx.stdin.read()
    return _common.show_call(
        ctx, ctx.engine.write(session.id, args.path, content, cwd=ctx.cwd, uncovered=args.uncovered)
    )

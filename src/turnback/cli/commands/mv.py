"""``turnback mv --session S SRC DST``: move a file, link or folder inside the project (a folder moves as a
command whose change the scans record)."""

from __future__ import annotations

import argparse

from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "mv", parents=[common], help="move a file, link or folder (replacing a file at DST), keeping both states"
    )
    _common.add_session_option(parser)
    parser.add_argument("src", help="the file, link or folder to move")
    parser.add_argument("dst", help="its new path (a file there is replaced, and kept)")
    _common.add_uncovered_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    session = ctx.session()
    return _common.show_call(
        ctx, ctx.engine.move(session.id, args.src, args.dst, cwd=ctx.cwd, uncovered=args.uncovered)
    )

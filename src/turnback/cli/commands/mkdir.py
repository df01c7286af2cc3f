"""``turnback mkdir --session S PATH``: make a folder and any missing folders above it."""

from __future__ import annotations

import argparse

from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("mkdir", parents=[common], help="make a folder (and missing parents); undo removes them")
    _common.add_session_option(parser)
    parser.add_argument("path", help="the folder to make")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    session = ctx.session()
    return _common.show_call(ctx, ctx.engine.mkdir(session.id, args.path, cwd=ctx.cwd))

"""``turnback edit --session S PATH --old OLD --new NEW [--all]``: replace text in a file."""

from __future__ import annotations

import argparse

from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "edit",
        parents=[common],
        help="replace text in a file, keeping its earlier state",
        description="Replace OLD by NEW in PATH. OLD must occur exactly once, unless --all is given. "
        "Text that starts with '-' is taken as it is (--old --verbose, or --old=--verbose).",
    )
    _common.add_session_option(parser)
    parser.add_argument("path", help="the file to edit")
    parser.add_argument("--old", required=True, help="the text to replace")
    parser.add_argument("--new", required=True, help="the text to put in its place")
    parser.add_argument("--all", action="store_true", help="replace every occurrence")
    _common.add_uncovered_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    session = ctx.session()
    call = ctx.engine.edit(
        session.id, args.path, args.old, args.new, replace_all=args.all, cwd=ctx.cwd, uncovered=args.uncovered
    )
    return _common.show_call(ctx, call)

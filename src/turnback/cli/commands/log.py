"""``turnback log --session S``: the session's turns, newest first, with their calls and changes."""

from __future__ import annotations

import argparse

from turnback.cli import _common
from turnback.render import data, text


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("log", parents=[common], help="show the session's turns, calls and changed files")
    _common.add_session_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    session = ctx.session()
    turns = ctx.engine.log(session.id)
    session = ctx.engine.session(session.id)
    lines = text.log_lines(turns, ctx.engine.load)
    ctx.out.lines(lines or ["no turns yet"])
    ctx.out.json({"session": session.id, "head": session.head, "turns": [data.turn_data(turn) for turn in turns]})
    return 0

"""``turnback status``: the session's head, what runs or marks it busy, and an interrupted operation."""

from __future__ import annotations

import argparse

from turnback.cli import _common
from turnback.render import data, text


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("status", parents=[common], help="show the session's head, what runs, and unfinished work")
    _common.add_session_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine, out = ctx.engine, ctx.out
    session_id = ctx.session(with_turns=True).id
    engine.catch_up(session_id)
    status = engine.status(session_id)
    out.lines(text.status_lines(**status._asdict(), max_mib=engine.config.store_max_mib))
    out.json(data.status_data(status))
    return 0

"""``turnback notices``: what the assistant must be told (``Reverted the change to PATH``), each once."""

from __future__ import annotations

import argparse

from turnback.catalog import word
from turnback.cli import _common
from turnback.render.data import message_data


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("notices", parents=[common], help="fetch the notices for the assistant (each once)")
    _common.add_session_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    notices = ctx.engine.take_notices(ctx.session().id)
    ctx.out.lines([word(message) for _, message in notices])
    ctx.out.json(
        {"notices": [{"path": path, "text": word(message), **message_data(message)} for path, message in notices]}
    )
    return 0

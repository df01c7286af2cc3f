"""``turnback files``: each file the session's turns touched, with its state (as of turn 3, created in
turn 2, deleted in turn 4, reverted)."""

from __future__ import annotations

import argparse

from turnback.cli import _common
from turnback.render import data, text


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("files", parents=[common], help="list the files the session changed, and their state")
    _common.add_session_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    files = ctx.engine.files(ctx.session(with_turns=True).id)
    ctx.out.lines(text.file_lines(files))
    ctx.out.json(data.files_data(files))
    return 0

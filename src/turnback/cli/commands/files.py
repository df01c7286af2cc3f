"""``turnback files``: each file the session's turns touched, with its state (as of turn 3, created in
turn 2, deleted in turn 4, reverted)."""

from __future__ import annotations

import argparse

from turnback.catalog import say, word
from turnback.cli import _common
from turnback.render import data
from turnback.render.terminal import display_width, pad, quote


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("files", parents=[common], help="list the files the session changed, and their state")
    _common.add_session_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    files = ctx.engine.files(ctx.session(with_turns=True).id)
    width = max((display_width(quote(path)) for path, _ in files), default=0) + 2
    ctx.out.lines([pad(quote(path), width) + word(state) for path, state in files] or [say("no_files_changed")])
    ctx.out.json(data.files_data(files))
    return 0

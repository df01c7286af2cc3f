"""``turnback read PATH``: print a file for the assistant; after a revert, it must read before it edits."""

from __future__ import annotations

import argparse
import base64
import sys

from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("read", parents=[common], help="print a file and mark it read by the assistant")
    _common.add_session_option(parser)
    parser.add_argument("path", help="the file to read")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    content = ctx.engine.read(ctx.session().id, args.path, cwd=ctx.cwd)
    if ctx.out.json_mode:
        try:
            ctx.out.json({"path": args.path, "text": content.decode("utf-8")})
        except UnicodeDecodeError:
            ctx.out.json({"path": args.path, "base64": base64.b64encode(content).decode()})
        return 0
    ctx.out.flush()
    sys.stdout.buffer.write(content)
    sys.stdout.buffer.flush()
    return 0

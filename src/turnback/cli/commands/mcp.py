"""``turnback mcp --root DIR``: serve file tools with checkpoints to an MCP client over stdio.

Add it to a client's MCP servers as the command ``turnback mcp --root DIR``.
Every write, edit, delete, move and command of the agent is recorded:
``turnback log``, ``turnback undo`` and ``turnback revert`` take it back.
There is no undo tool for the agent. Needs the ``mcp`` extra:
``pip install 'turnback[mcp]'``.
"""

from __future__ import annotations

import argparse

from turnback.catalog import Message
from turnback.cli import _common
from turnback.errors import UsageError


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "mcp",
        parents=[common],
        help="serve checkpointed file tools to an MCP client (stdio)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--root", required=True, metavar="DIR", help="the folder the tools may use (the project)")
    parser.add_argument("--title", help="a title for the session (default: MCP client)")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    try:
        from turnback.mcp.server import serve
    except ImportError as exc:
        raise UsageError(Message("mcp_package_missing")) from exc
    serve(args.root, home=ctx.home, store_url=ctx.store_url, title=args.title, lang=getattr(args, "lang", None))
    return 0

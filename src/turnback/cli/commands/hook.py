"""``turnback hook claude-code|codex|gemini|cursor``: handle one agent hook event (JSON on stdin).

The agent runs this for the events ``turnback install claude-code|codex|gemini|cursor`` adds. It
always exits 0: a problem of turnback's prints one warning line and never
blocks the agent.
"""

from __future__ import annotations

import argparse

from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "hook",
        parents=[common],
        help="handle one agent hook event on stdin (run by the agent, see install)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "harness", choices=["claude-code", "codex", "gemini", "cursor"], help="which agent sent the event"
    )


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    if args.harness == "codex":
        from turnback.hooks.codex import run as handle_codex

        return handle_codex(ctx.stdin)
    if args.harness == "gemini":
        from turnback.hooks.gemini import run as handle_gemini

        return handle_gemini(ctx.stdin)
    if args.harness == "cursor":
        from turnback.hooks.cursor import run as handle_cursor

        return handle_cursor(ctx.stdin)
    from turnback.hooks.claude import run as handle

    return handle(ctx.stdin)

"""``turnback hook claude-code|codex|gemini|cursor``: handle one agent hook event (JSON on stdin).

The agent runs this for the events ``turnback install claude-code|codex|gemini|cursor`` adds. It
always exits 0: a problem of turnback's prints one warning line and never
blocks the agent.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator

from turnback.cli import _common
from turnback.home import ENV_HOME, ENV_STORE


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


@contextlib.contextmanager
def _store_in_environment(ctx: _common.Context) -> Iterator[None]:
    """``--store`` handed to the adapters as an agent's launcher hands them the store: in the environment, where
    each event reads it (the relay's long-lived process reads each event's so); as it was again after."""
    given = {ENV_HOME: ctx.home, ENV_STORE: ctx.store_url}
    saved = {name: os.environ.get(name) for name in given}
    for name, value in given.items():
        if value is not None:
            os.environ[name] = value
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    with _store_in_environment(ctx):
        return _handle(ctx, args)


def _handle(ctx: _common.Context, args: argparse.Namespace) -> int:
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

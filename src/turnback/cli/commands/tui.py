"""``turnback tui [--session S]``: the terminal UI: the history tree, a node's detail, a command line.

``/history``, ``/rollback N`` (a preview) and ``/rollback N confirm``, ``/undo``, ``/revert CALL``,
``/redo``, ``/diff``, ``/files``, ``/status``, ``/sessions``, ``/lang``, ``/help`` and ``/quit``; ``/help``
in the TUI says more. Needs the ``tui`` extra (Textual).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys

import turnback
from turnback.catalog import Message, language
from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "tui",
        parents=[common],
        help="the terminal UI: history tree, previews, rollback, undo and revert",
        description=__doc__.split("\n\n", 1)[1].replace("``", "") if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_session_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    if importlib.util.find_spec("textual") is None:
        raise turnback.UsageError(Message("tui_needs_extra"))
    session = ctx.session(with_turns=True)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise turnback.UsageError(Message("tui_needs_terminal"))
    from turnback import tui

    kept = turnback.KeptStore(lambda: turnback.open(ctx.home, store_url=ctx.store_url))
    try:
        return tui.run(kept, session, lang=language.get())
    finally:
        kept.close()

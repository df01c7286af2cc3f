"""``turnback install|uninstall claude-code [--project DIR | --user]``: add or remove turnback's hooks.

``install`` merges turnback's hook entries into ``DIR/.claude/settings.json``
(``--project``, default: this folder) or ``~/.claude/settings.json``
(``--user``), leaving every other setting and hook as it is. ``uninstall``
removes exactly those entries. Then use Claude Code as usual, and
``turnback log``, ``turnback undo`` and the rest in a terminal.
"""

from __future__ import annotations

import argparse
import os

from turnback.catalog import Message, say
from turnback.cli import _common
from turnback.hooks import install as claude_settings


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    for verb, text in (("install", "add turnback's hooks to Claude Code"), ("uninstall", "remove them again")):
        parser = sub.add_parser(
            verb,
            parents=[common],
            help=text,
            description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.add_argument("harness", choices=["claude-code"], help="the agent")
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--project", metavar="DIR", help="the project's .claude/settings.json (default: here)")
        where.add_argument("--user", action="store_true", help="your ~/.claude/settings.json")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    project = None if args.user else (args.project or ctx.cwd)
    path = claude_settings.settings_path(project=project, user_home=os.path.expanduser("~"))
    if args.verb == "install":
        events = claude_settings.install(path)
        ctx.out.line(say("hooks_installed", path=path, events=Message("comma_list", items=tuple(events))))
        ctx.out.line(say("hooks_use_as_usual"))
        ctx.out.json({"settings": path, "events": events})
        return 0
    removed = claude_settings.uninstall(path)
    ctx.out.line(say("hooks_removed" if removed else "hooks_none", path=path))
    ctx.out.json({"settings": path, "removed": removed})
    return 0 if removed else 1

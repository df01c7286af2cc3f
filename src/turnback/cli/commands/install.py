"""``turnback install|uninstall claude-code|codex|gemini|cursor [--project DIR | --user]``: add or remove hooks.

``install`` merges turnback's hook entries into ``DIR/.claude/settings.json``
(``--project``, default: this folder) or ``~/.claude/settings.json``
(``--user``); for Codex, ``DIR/.codex/hooks.json`` or ``~/.codex/hooks.json``;
for Gemini CLI, ``DIR/.gemini/settings.json`` or ``~/.gemini/settings.json``;
for Cursor, ``DIR/.cursor/hooks.json`` or ``~/.cursor/hooks.json``;
leaving every other setting and hook as it is. ``uninstall`` removes exactly
those entries. Codex runs hooks only once you trust them in Codex (``/hooks``):
install says how, and never trusts them for you. Then use the agent as usual,
and ``turnback log``, ``turnback undo`` and the rest in a terminal.
"""

from __future__ import annotations

import argparse
import os

from turnback.catalog import Message, say
from turnback.cli import _common
from turnback.hooks import install as hooks


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    for verb, text in (("install", "add turnback's hooks to Claude Code"), ("uninstall", "remove them again")):
        parser = sub.add_parser(
            verb,
            parents=[common],
            help=text,
            description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.add_argument("harness", choices=list(hooks.HARNESSES), help="the agent")
        where = parser.add_mutually_exclusive_group()
        where.add_argument(
            "--project",
            metavar="DIR",
            help="the project's agent settings (.claude/, .codex/, .gemini/, .cursor/; default: here)",
        )
        where.add_argument(
            "--user", action="store_true", help="your own settings (~/.claude/, ~/.codex/, ~/.gemini/, ~/.cursor/)"
        )


def _after_install(harness: str, project: str | None) -> list[str]:
    """What to do next, as each agent needs it."""
    if harness == "codex":  # Codex runs a hook only once it is trusted there: never trusted for the user
        return [say("codex_hooks_trust", folder=os.path.realpath(project) if project is not None else "~")]
    if harness == "gemini":
        return [say("gemini_hooks_trust", folder=os.path.realpath(project))] if project is not None else []
    if harness == "cursor":
        return [say("cursor_edits_from_last_scan")]
    return [say("hooks_use_as_usual")]


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    project = None if args.user else (args.project or ctx.cwd)
    harness = hooks.HARNESSES[args.harness]
    path = harness.hooks_path(project=project, user_home=os.path.expanduser("~"))
    if args.verb == "install":
        events = harness.add(path)
        ctx.out.line(say("hooks_installed", path=path, events=Message("comma_list", items=tuple(events))))
        for line in _after_install(harness.name, project):
            ctx.out.line(line)
        ctx.out.json({"settings": path, "events": events})
        return 0
    removed = hooks.uninstall(path, harness.mark)
    ctx.out.line(say("hooks_removed" if removed else "hooks_none", path=path))
    ctx.out.json({"settings": path, "removed": removed})
    return 0 if removed else 1

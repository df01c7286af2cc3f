"""``turnback status``: the session's head, what runs or marks it busy, and an interrupted operation."""

from __future__ import annotations

import argparse

from turnback.catalog import Message, word
from turnback.cli import _common
from turnback.render import data, text


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("status", parents=[common], help="show the session's head, what runs, and unfinished work")
    _common.add_session_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine, out = ctx.engine, ctx.out
    notes = _hooks_not_fired(ctx)
    out.lines([word(note) for note in notes])
    session_id = ctx.session(with_turns=True).id
    engine.catch_up(session_id)
    status = engine.status(session_id)
    out.lines(text.status_lines(**status._asdict(), max_mib=engine.config.store_max_mib))
    out.json(data.status_data(status, notes))
    return 0


def _hooks_not_fired(ctx: _common.Context) -> list[Message]:
    """What to say of this folder's (or the user's) Codex or Gemini CLI hooks that are turnback's but never
    ran for this project (by the mark each hook leaves): both skip hooks nobody trusted without a word."""
    import os

    from turnback.errors import UsageError
    from turnback.hooks import install

    home = os.path.expanduser("~")
    agents = (
        (install.HARNESSES["codex"], "status_codex_hooks_not_fired"),
        (install.HARNESSES["gemini"], "agent_gemini_hooks_not_fired"),
    )
    try:
        root = ctx.engine.watched_project(ctx.cwd).root
    except UsageError:
        root = None  # no project here yet: no hook ever ran for it
    notes = []
    for harness, code in agents:
        paths = [harness.hooks_path(project=where, user_home=home) for where in (ctx.cwd, None)]
        found = [path for path in paths if install.installed(path, harness.mark)]
        if found and (root is None or not install.fired(ctx.engine.home, harness.name, root)):
            notes.append(Message(code, path=found[0]))
    return notes

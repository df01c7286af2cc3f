"""``turnback status``: the session's head, what runs or marks it busy, and an interrupted operation."""

from __future__ import annotations

import argparse

from turnback.catalog import say
from turnback.cli import _common
from turnback.model import Session
from turnback.render import data, text


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("status", parents=[common], help="show the session's head, what runs, and unfinished work")
    _common.add_session_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine, out = ctx.engine, ctx.out
    _codex_hooks_not_fired(ctx)
    session_id = ctx.session(with_turns=True).id
    engine.catch_up(session_id)
    status = engine.status(session_id)
    out.lines(text.status_lines(**status._asdict(), max_mib=engine.config.store_max_mib))
    out.json(data.status_data(status))
    return 0


def _codex_hooks_not_fired(ctx: _common.Context) -> None:
    """Say so when this folder's (or the user's) Codex hooks are turnback's but no Codex session was ever
    recorded here: Codex skips hooks nobody trusted without a word."""
    import os

    from turnback.hooks import install

    home = os.path.expanduser("~")
    paths = [install.codex_hooks_path(project=where, user_home=home) for where in (ctx.cwd, None)]
    found = [path for path in paths if install.installed(path, install.CODEX_MARK)]
    if not found:
        return
    root = os.path.realpath(ctx.cwd)
    sessions = ctx.engine.sessions()
    if any(session.title == "Codex" and _holds(ctx, session, root) for session in sessions):
        return
    ctx.out.line(say("status_codex_hooks_not_fired", path=found[0]))


def _holds(ctx: _common.Context, session: Session, folder: str) -> bool:
    """Whether *session*'s project holds *folder*."""
    import os

    root = ctx.engine.project_of(session).root
    return folder == root or folder.startswith(root.rstrip(os.sep) + os.sep)

"""``turnback delete SESSION --yes``: delete a session with its turns, calls and copies."""

from __future__ import annotations

import argparse

from turnback import short_id
from turnback.catalog import say
from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "delete", parents=[common], help="delete a session and its copies (nothing of it can be undone after)"
    )
    parser.add_argument("session", help="the session's id, or a unique prefix of it")
    _common.add_confirm_options(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine, out = ctx.engine, ctx.out
    session = engine.session(args.session)
    turns = engine.log(session.id)
    title = session.title or say("untitled")
    out.line(say("delete_session_preview", session=short_id(session.id), title=title, count=len(turns)))
    if args.dry_run:
        out.json({"session": session.id, "deleted": False})
        return 0
    answer = _common.ask(out, say("delete_prompt"), yes=args.yes)
    if answer != "yes":
        out.json({"session": session.id, "deleted": False})
        return _common.decline(ctx, answer, deleting=True)
    engine.delete_session(session.id)
    out.line(say("session_deleted", session=short_id(session.id)))
    out.json({"session": session.id, "deleted": True})
    return 0

"""``turnback session new --project DIR [--title T] [--incognito]``: start a session."""

from __future__ import annotations

import argparse

from turnback.cli import _common
from turnback.render import data


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("session", parents=[common], help="start a session (a conversation) in a project")
    verbs = parser.add_subparsers(dest="session_verb", metavar="VERB", required=True)
    new = verbs.add_parser("new", parents=[common], help="start a session; prints its id")
    new.add_argument("--project", metavar="DIR", default=".", help="the project folder (registered on first use)")
    new.add_argument("--title", metavar="T", help="a title to tell sessions apart")
    new.add_argument("--actor", metavar="NAME", help="who works in the session (a user name)")
    new.add_argument("--incognito", action="store_true", help="keep no copies: nothing of this session can be undone")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    session = ctx.engine.new_session(args.project, title=args.title, actor=args.actor, incognito=args.incognito)
    ctx.out.line(session.id)
    ctx.out.json({"session": data.session_data(session, ctx.engine.project_of(session))})
    return 0

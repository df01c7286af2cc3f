"""``turnback sessions [--project DIR]``: list sessions, most recently active first, marking the default.

The default of a project is the session a bare ``undo``, ``log`` or ``diff`` there acts on.
"""

from __future__ import annotations

import argparse

from turnback.catalog import say
from turnback.cli import _common
from turnback.render import data, text


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("sessions", parents=[common], help="list sessions, most recently active first")
    parser.add_argument("--project", metavar="DIR", help="only the sessions of this project")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine = ctx.engine
    sessions = engine.sessions(args.project)
    defaults = engine.default_sessions(sessions)
    listed = []
    for session in sessions:
        project = engine.project_of(session)
        turns = engine.log(session.id)
        ctx.out.line(text.session_line(session, project, turns=len(turns), default=session.id in defaults))
        listed.append((session, project, len(turns)))
    if not sessions:
        ctx.out.line(say("no_sessions_yet"))
    ctx.out.json(data.sessions_data(listed, defaults))
    return 0

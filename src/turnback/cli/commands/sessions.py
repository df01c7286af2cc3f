"""``turnback sessions [--project DIR]``: list sessions, most recently active first, marking the default.

The default of a project is the session a bare ``undo``, ``log`` or ``diff`` there acts on.
"""

from __future__ import annotations

import argparse
import datetime

from turnback import short_id
from turnback.catalog import say
from turnback.cli import _common
from turnback.render import data
from turnback.render.terminal import quote


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("sessions", parents=[common], help="list sessions, most recently active first")
    parser.add_argument("--project", metavar="DIR", help="only the sessions of this project")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine = ctx.engine
    sessions = engine.sessions(args.project)
    # The session a bare undo, log or diff in each project acts on.
    defaults = {
        engine.default_session([s for s in sessions if s.project_id == project_id]).id
        for project_id in {session.project_id for session in sessions}
    }
    listed = []
    for session in sessions:
        project = engine.project_of(session)
        turns = engine.log(session.id)
        active = datetime.datetime.fromtimestamp(session.active_at / 1e9).strftime("%Y-%m-%d %H:%M")
        marks = "  " + say("session_incognito") if session.incognito else ""
        marks += "  " + say("session_default") if session.id in defaults else ""
        title = f"  {quote(session.title)}" if session.title else ""
        # The count right-aligned in three columns, so the turn labels line up.
        count = say("n_turns", count=len(turns))
        count = " " * max(0, 3 - len(str(len(turns)))) + count
        root = quote(project.root)
        if project.other_host is not None:  # a store shared by hosts: the files are on that one
            root = say("host_root_on", root=root, host=project.other_host)
        ctx.out.line(f"{short_id(session.id)}  {active}  {count}  {root}{title}{marks}")
        listed.append((session, project, len(turns)))
    if not sessions:
        ctx.out.line(say("no_sessions_yet"))
    ctx.out.json(data.sessions_data(listed, defaults))
    return 0

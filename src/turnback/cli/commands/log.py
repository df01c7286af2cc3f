"""``turnback log --session S``: the session's turns, newest first, with their calls and changes."""

from __future__ import annotations

import argparse

from turnback.catalog import say
from turnback.cli import _common
from turnback.render import data, text


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("log", parents=[common], help="show the session's turns, calls and changed files")
    _common.add_session_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine = ctx.engine
    session = ctx.session(with_turns=True)
    engine.mark_interrupted(session.id)
    turns = engine.log(session.id)
    session = engine.session(session.id)
    active = {turn.id for turn in engine.active_line(session.id)}
    resent = {turn.id for turn in turns if turn.resent}
    notes = engine.overlap_notes  # a change another call (of any session) may have made says so, as in show
    lines = text.log_lines(turns, engine.load, head=session.head, active=active, resent=resent, notes=notes)
    ctx.out.lines(lines or [say("no_turns_yet")])
    undo_next = engine.undo_next(session.id)
    ctx.out.json(data.history_data(session, turns, active=active, resent=resent, undo_next=undo_next, notes=notes))
    return 0

"""``turnback turn begin|end --session S``: the agent's work after one user message."""

from __future__ import annotations

import argparse

from turnback import short_id
from turnback.catalog import say, word
from turnback.cli import _common
from turnback.render import data


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("turn", parents=[common], help="begin or end a turn of a session")
    verbs = parser.add_subparsers(dest="turn_verb", metavar="VERB", required=True)
    begin = verbs.add_parser("begin", parents=[common], help="begin a turn (after a user message)")
    _common.add_session_option(begin)
    begin.add_argument("--message", metavar="TEXT", help="the user's message that starts the turn")
    begin.add_argument(
        "--pid",
        type=int,
        metavar="PID",
        help="the process whose end also ends the turn (default: the process that ran turnback turn begin, "
        "e.g. its shell); a harness whose steps run in separate processes gives one that lives for the whole turn",
    )
    end = verbs.add_parser("end", parents=[common], help="end the running turn; prints what it changed")
    _common.add_session_option(end)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    session = ctx.session()
    if args.turn_verb == "begin":
        holder = args.pid if args.pid is not None else ctx.parent_pid
        turn = ctx.engine.begin_turn(session.id, args.message, holder_pid=holder)
        ctx.out.line(say("turn_begun", number=turn.number, turn=short_id(turn.id)))
        ctx.out.json({"turn": {"id": turn.id, "number": turn.number, "parent": turn.parent}})
        return 0
    turn, summary = ctx.engine.end_turn(session.id)
    if summary.line or not summary.notes:
        ctx.out.line(word(summary.line) if summary.line else say("no_files_changed"))
    ctx.out.lines([word(note) for note in summary.notes])
    ctx.out.json({"turn": data.turn_data(turn), "summary": data.summary_data(summary)})
    return 0

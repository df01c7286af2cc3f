"""``turnback ops``: the session's operations (undo, revert, rollback, resend, redo), newest first."""

from __future__ import annotations

import argparse
import datetime

from turnback import short_id
from turnback.catalog import Message, join, say, word
from turnback.cli import _common
from turnback.render import text
from turnback.render.terminal import display_width, pad


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("ops", parents=[common], help="list the operations applied in the session, newest first")
    _common.add_session_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine = ctx.engine
    session = ctx.session(with_turns=True)
    taken_back = engine.taken_back_by(session.id)
    items = []
    operations = list(reversed(engine.operations(session.id)))
    # The kind column is as wide as the widest kind listed (8: English's "rollback"; 日本語's is 12 columns).
    kind_width = max([8, *(display_width(word(text.op_noun(plan.kind))) for plan in operations)])
    for plan in operations:
        done = sum(1 for row in plan.rows if row.status == "done")
        when = datetime.datetime.fromtimestamp(plan.created_at / 1e9).strftime("%Y-%m-%d %H:%M:%S")
        notes = []
        if plan.status == "applying":
            notes.append(Message("op_interrupted_next_undo"))
        if plan.id in taken_back:
            notes.append(Message("op_taken_back_by", op=short_id(taken_back[plan.id])))
        if plan.reverses:
            notes.append(Message("op_takes_back", op=short_id(plan.reverses)))
        note = f"  ({join(notes)})" if notes else ""
        kind = pad(word(text.op_noun(plan.kind)), kind_width)
        rows = say("rows_done", done=done, count=len(plan.rows))
        ctx.out.line(f"{short_id(plan.id)}  {when}  {kind} {rows}{note}")
        items.append(
            {
                "id": plan.id,
                "kind": plan.kind,
                "status": plan.status,
                "rows": len(plan.rows),
                "done": done,
                "reverses": plan.reverses,
                "taken_back_by": taken_back.get(plan.id),
            }
        )
    if not items:
        ctx.out.line(say("no_operations_yet"))
    ctx.out.json({"ops": items})
    return 0

"""``turnback status``: the session's head, what runs or marks it busy, and an interrupted operation."""

from __future__ import annotations

import argparse

from turnback import short_id
from turnback.cli import _common
from turnback.render import data, text
from turnback.render.diff import human_size


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("status", parents=[common], help="show the session's head, what runs, and unfinished work")
    _common.add_session_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine, out = ctx.engine, ctx.out
    session_id = ctx.session(with_turns=True).id
    engine.catch_up(session_id)
    status = engine.status(session_id)
    head = f"turn {status.head.number} ({short_id(status.head.id)})" if status.head else "the start (no turn yet)"
    out.line(f"session {short_id(status.session.id)}  head: {head}")
    for turn in status.running:
        out.line(f"running: turn {turn.number} (held by process {turn.holder_pid})")
    for reason in status.busy:
        out.line(f"busy: {reason}")
    for call in status.commands:
        out.line(f"running: {'job' if call.kind == 'job' else 'command'} {short_id(call.id)} (pid {call.pid})")
    interrupted = status.interrupted
    if interrupted is not None:
        done = sum(1 for row in interrupted.rows if row.status != "pending")
        out.line(
            f"interrupted: {interrupted.kind} {short_id(interrupted.id)}, {done} of {len(interrupted.rows)} rows done; "
            f"turnback {'undo' if interrupted.kind != 'revert' else 'revert ' + short_id(interrupted.call_id or '')} "
            "--yes finishes it"
        )
        out.lines(["  " + text.row_line(row, with_result=True) for row in interrupted.rows if row.status != "pending"])
        out.lines(["  pending: " + text.row_line(row) for row in interrupted.rows if row.status == "pending"])
    if not (status.running or status.busy or status.commands or interrupted):
        out.line("idle: nothing runs, nothing is unfinished")
    out.line(
        f"kept for reverting (copies and call input): {human_size(status.kept_bytes)}"
        f" (store.max_mib {engine.config.store_max_mib})"
    )
    out.json(
        {
            "session": status.session.id,
            "head": status.session.head,
            "running_turns": [t.id for t in status.running],
            "busy": list(status.busy),
            "commands": [c.id for c in status.commands],
            "interrupted": data.plan_data(interrupted, applied=False) if interrupted else None,
            "kept_bytes": status.kept_bytes,
        }
    )
    return 0

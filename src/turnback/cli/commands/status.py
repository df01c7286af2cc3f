"""``turnback status``: the session's head, what runs or marks it busy, and an interrupted operation."""

from __future__ import annotations

import argparse

from turnback import short_id
from turnback.catalog import Message, say, word
from turnback.cli import _common
from turnback.model import Session
from turnback.render import data, text
from turnback.render.diff import human_size


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("status", parents=[common], help="show the session's head, what runs, and unfinished work")
    _common.add_session_option(parser)


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine, out = ctx.engine, ctx.out
    _codex_hooks_not_fired(ctx)
    session_id = ctx.session(with_turns=True).id
    engine.catch_up(session_id)
    status = engine.status(session_id)
    head = (
        Message("status_head_turn", number=status.head.number, turn=short_id(status.head.id))
        if status.head
        else Message("status_head_start")
    )
    out.line(say("status_session_head", session=short_id(status.session.id), head=head))
    for turn in status.running:
        out.line(say("status_running_turn", number=turn.number, pid=turn.holder_pid))
    for reason in status.busy:
        out.line(say("busy_reason", reason=word(reason)))
    for call in status.commands:
        what = Message("noun_job" if call.kind == "job" else "noun_command")
        out.line(say("status_running_call", what=what, call=short_id(call.id), pid=call.pid))
    interrupted = status.interrupted
    if interrupted is not None:
        done = sum(1 for row in interrupted.rows if row.status != "pending")
        finish = (
            "turnback undo"
            if interrupted.kind != "revert"
            else f"turnback revert {short_id(interrupted.call_id or '')}"
        )
        rows_done = Message("rows_done", done=done, count=len(interrupted.rows))
        kind = text.op_noun(interrupted.kind)
        out.line(say("status_interrupted", kind=kind, op=short_id(interrupted.id), rows_done=rows_done, command=finish))
        out.lines(["  " + text.row_line(row, with_result=True) for row in interrupted.rows if row.status != "pending"])
        pending = [row for row in interrupted.rows if row.status == "pending"]
        out.lines(["  " + say("status_pending_row", row=text.row_line(row)) for row in pending])
    if not (status.running or status.busy or status.commands or interrupted):
        out.line(say("status_idle"))
    out.line(say("status_kept", size=human_size(status.kept_bytes), max_mib=engine.config.store_max_mib))
    out.json(
        {
            "session": status.session.id,
            "head": status.session.head,
            "running_turns": [t.id for t in status.running],
            "busy": [word(reason) for reason in status.busy],
            "commands": [c.id for c in status.commands],
            "interrupted": data.plan_data(interrupted, applied=False) if interrupted else None,
            "kept_bytes": status.kept_bytes,
        }
    )
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

"""``turnback verify``: read every record, decrypt every copy, check its id and SQLite's integrity; report
per session what is damaged and which sessions are intact.

Changes nothing. Exits 0 only when nothing is damaged.
"""

from __future__ import annotations

import argparse

from turnback import short_id
from turnback.catalog import join, word
from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    sub.add_parser("verify", parents=[common], help="check every stored record and copy, and the database")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    damage = ctx.engine.verify()
    out = ctx.out
    if damage.clean:
        out.line("verified: every copy decrypts and matches its id; the database is intact")
    for problem in damage.integrity:
        out.line(f"database: {word(problem)}")
    if damage.blobs:
        out.line(f"{len(damage.blobs)} damaged cop{'ies' if len(damage.blobs) != 1 else 'y'}")
    for session_id, records in damage.records_by_session.items():
        shown = join(records)
        if session_id:
            out.line(f"session {short_id(session_id)}: damaged: {shown}; its log and undo stop there")
        else:
            out.line(f"store: damaged: {shown}")
    for session_id, calls in damage.calls_by_session.items():
        shown = ", ".join(short_id(call) for call in calls)
        out.line(f"session {short_id(session_id)}: {len(calls)} call(s) can no longer be reverted: {shown}")
    if damage.integrity:
        out.line("no session is vouched for while the database is damaged: a damaged page or index hides rows")
    elif not damage.clean and damage.intact_sessions:
        shown = ", ".join(short_id(session) for session in damage.intact_sessions)
        out.line(f"intact: {len(damage.intact_sessions)} session(s), every record and copy: {shown}")
    out.json(
        {
            "ok": damage.clean,
            "damaged_blobs": len(damage.blobs),
            "integrity": [word(problem) for problem in damage.integrity],
            "sessions": {session: list(calls) for session, calls in damage.calls_by_session.items()},
            "records": {session: [word(r) for r in records] for session, records in damage.records_by_session.items()},
            "intact_sessions": list(damage.intact_sessions),
        }
    )
    return 0 if damage.clean else 1

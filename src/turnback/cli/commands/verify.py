"""``turnback verify``: decrypt every copy, check its id and SQLite's integrity; report per session.

Changes nothing. Exits 0 only when nothing is damaged.
"""

from __future__ import annotations

import argparse

from turnback import short_id
from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    sub.add_parser("verify", parents=[common], help="check every stored copy and the database")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    damage = ctx.engine.verify()
    out = ctx.out
    if damage.clean:
        out.line("verified: every copy decrypts and matches its id; the database is intact")
    for problem in damage.integrity:
        out.line(f"database: {problem}")
    if damage.blobs:
        out.line(f"{len(damage.blobs)} damaged cop{'ies' if len(damage.blobs) != 1 else 'y'}")
    for session_id, calls in damage.calls_by_session.items():
        shown = ", ".join(short_id(call) for call in calls)
        out.line(f"session {short_id(session_id)}: {len(calls)} call(s) can no longer be reverted: {shown}")
    out.json(
        {
            "ok": damage.clean,
            "damaged_blobs": len(damage.blobs),
            "integrity": list(damage.integrity),
            "sessions": {session: list(calls) for session, calls in damage.calls_by_session.items()},
        }
    )
    return 0 if damage.clean else 1

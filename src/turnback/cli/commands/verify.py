"""``turnback verify``: read every record, decrypt every copy, check its id and SQLite's integrity; report
per session what is damaged and which sessions are intact.

Changes nothing. Exits 0 only when nothing is damaged.
"""

from __future__ import annotations

import argparse

from turnback import short_id
from turnback.catalog import Message, say, word
from turnback.cli import _common
from turnback.render import data


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    sub.add_parser("verify", parents=[common], help="check every stored record and copy, and the database")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    damage = ctx.engine.verify()
    out = ctx.out
    if damage.clean:
        out.line(say("verify_clean"))
    for problem in damage.integrity:
        out.line(say("verify_database_problem", problem=word(problem)))
    if damage.blobs:
        out.line(say("verify_damaged_copies", count=len(damage.blobs)))
    for session_id, records in damage.records_by_session.items():
        if session_id:
            out.line(say("verify_session_damaged", session=short_id(session_id), records=tuple(records)))
        else:
            out.line(say("verify_store_damaged", records=tuple(records)))
    for session_id, calls in damage.calls_by_session.items():
        shown = Message("comma_list", items=tuple(short_id(call) for call in calls))
        out.line(say("verify_calls_unrevertable", session=short_id(session_id), count=len(calls), calls=shown))
    if damage.integrity:
        out.line(say("verify_none_vouched"))
    elif not damage.clean and damage.intact_sessions:
        shown = Message("comma_list", items=tuple(short_id(session) for session in damage.intact_sessions))
        out.line(say("verify_intact", count=len(damage.intact_sessions), sessions=shown))
    out.json(
        {
            "ok": damage.clean,
            "damaged_blobs": len(damage.blobs),
            "integrity": [word(problem) for problem in damage.integrity],
            "integrity_problems": [data.message_data(problem) for problem in damage.integrity],
            "sessions": {session: list(calls) for session, calls in damage.calls_by_session.items()},
            "records": {session: [word(r) for r in records] for session, records in damage.records_by_session.items()},
            "damaged_records": {
                session: [data.message_data(r) for r in records]
                for session, records in damage.records_by_session.items()
            },
            "intact_sessions": list(damage.intact_sessions),
        }
    )
    return 0 if damage.clean else 1

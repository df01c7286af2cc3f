"""What changed in the store, cheaply: for a front end that shows sessions live (``turnback serve``'s events)."""

from __future__ import annotations

from typing import Any

from turnback.model import CallId, OpId, SessionId, TurnId
from turnback.store.records import SessionActivity
from turnback.store.sqlite.base import SqliteRecords


def _values(row: Any) -> tuple[object, ...]:
    """A grouped row's values (SQLite's rows and the PostgreSQL store's both read by name), () for none."""
    return tuple(row[name] for name in row.keys()) if row else ()  # noqa: SIM118 - a sqlite3.Row iterates values


class ActivityQueries(SqliteRecords):
    """Written in the SQL SQLite and PostgreSQL both speak; only :meth:`data_version` is SQLite's own."""

    def data_version(self) -> int:
        """A number that changes whenever another connection commits (SQLite's ``PRAGMA data_version``)."""
        row = self.db.one("PRAGMA data_version")
        assert row is not None  # a pragma that reads always answers one row
        return int(row["data_version"])

    def activity(self) -> list[SessionActivity]:
        """Each session's newest turn, call and operation, and a marker that changes with any of its turns,
        calls, operations or busy marks (one grouped read of each table)."""
        turns = {
            row["session_id"]: row
            for row in self.db.all(
                "SELECT session_id, max(number) AS newest, count(*) AS n, coalesce(max(ended_at), 0) AS ended,"
                " sum(CASE WHEN status = 'running' THEN 1 ELSE 0 END) AS running,"
                " sum(CASE WHEN undone <> 'no' THEN 1 ELSE 0 END) AS undone FROM turns GROUP BY session_id"
            )
        }
        calls = {
            row["session_id"]: row
            for row in self.db.all(
                "SELECT session_id, max(id) AS newest, count(*) AS n, coalesce(max(ended_at), 0) AS ended"
                " FROM calls GROUP BY session_id"
            )
        }
        ops = {
            row["session_id"]: row
            for row in self.db.all(
                "SELECT session_id, max(id) AS newest, count(*) AS n, coalesce(max(applied_at), 0) AS applied,"
                " coalesce(max(finished_at), 0) AS finished FROM ops GROUP BY session_id"
            )
        }
        busy = {
            row["session_id"]: row["n"]
            for row in self.db.all("SELECT session_id, count(*) AS n FROM busy_marks GROUP BY session_id")
        }
        newest_turns = {
            row["session_id"]: row["id"]
            for row in self.db.all(
                "SELECT turns.session_id, turns.id FROM turns JOIN"
                " (SELECT session_id, max(number) AS number FROM turns GROUP BY session_id) AS newest"
                " ON newest.session_id = turns.session_id AND newest.number = turns.number"
            )
        }
        found = []
        for row in self.db.all("SELECT id, head, active_at FROM sessions ORDER BY active_at DESC, id DESC"):
            sid = row["id"]
            turn, call, op = turns.get(sid), calls.get(sid), ops.get(sid)
            marker = (row["head"], _values(turn), _values(call), _values(op), busy.get(sid, 0))
            found.append(
                SessionActivity(
                    SessionId(sid),
                    TurnId(newest_turns[sid]) if sid in newest_turns else None,
                    CallId(call["newest"]) if call else None,
                    OpId(op["newest"]) if op else None,
                    repr(marker),
                )
            )
        return found

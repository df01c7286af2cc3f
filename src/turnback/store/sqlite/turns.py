"""Turns: a session's numbered turns, their state, and the git refs each moved."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from turnback.catalog import Message
from turnback.errors import UsageError
from turnback.model import Call, RefChange, SessionId, Turn, TurnId, TurnStatus, UndoState
from turnback.store.records import RunningTurn
from turnback.store.sqlite.base import TURN_STATUSES, UNDO_STATES, checked_choice, checked_int, record_named
from turnback.store.sqlite.calls import CallQueries
from turnback.store.sqlite.sessions import SessionQueries

_TURN_COLUMNS = (
    "id, session_id, number, parent, message_enc, status, undone, started_at, ended_at, holder_pid, holder_start,"
    " resent"
)


class TurnQueries(CallQueries, SessionQueries):
    def _turn_from_row(self, row: sqlite3.Row, calls: tuple[Call, ...] = (), *, with_refs: bool = False) -> Turn:
        turn_id = TurnId(row["id"])
        what = record_named(Message("record_noun_turn"), str(turn_id))
        return Turn(
            id=turn_id,
            session_id=SessionId(row["session_id"]),
            number=checked_int(row["number"], what, optional=False),
            parent=TurnId(row["parent"]) if row["parent"] else None,
            message=self._open(row["message_enc"], f"turns.message:{turn_id}"),
            status=checked_choice(row["status"], TURN_STATUSES, what),
            undone=checked_choice(row["undone"], UNDO_STATES, what),
            started_at=checked_int(row["started_at"], what, optional=False),
            ended_at=checked_int(row["ended_at"], what),
            holder_pid=checked_int(row["holder_pid"], what),
            calls=calls,
            refs=self.ref_changes(turn_id) if with_refs else (),
            resent=bool(row["resent"]),
        )

    def create_turn(
        self,
        session_id: SessionId,
        message: str | None,
        *,
        holder_pid: int | None,
        holder_start: int | None,
        refs: dict[str, str] | None = None,
    ) -> Turn:
        """A new running turn, child of the session's head; *refs* are the git refs at its start."""
        turn_id = TurnId(self.new_id())
        with self.transaction():
            session = self.session(session_id)
            row = self.db.one("SELECT COALESCE(MAX(number), 0) AS last FROM turns WHERE session_id=?", (session_id,))
            assert row is not None  # an aggregate always gives a row
            self.db.execute(
                f"INSERT INTO turns({_TURN_COLUMNS}) VALUES(?,?,?,?,?,?,?,?,?,?,?,0)",
                (
                    turn_id,
                    session_id,
                    int(row["last"]) + 1,
                    session.head,
                    self._seal(message, f"turns.message:{turn_id}"),
                    "running",
                    "no",
                    self.now(),
                    None,
                    holder_pid,
                    holder_start,
                ),
            )
            if refs is not None:
                self.db.execute(
                    "UPDATE turns SET refs_before_enc=? WHERE id=?",
                    (self._seal_json(refs, f"turns.refs_before:{turn_id}"), turn_id),
                )
            self.db.execute("UPDATE sessions SET head=?, active_at=? WHERE id=?", (turn_id, self.now(), session_id))
        return self.turn(turn_id)

    def turn(self, turn_id: TurnId, *, with_calls: bool = False) -> Turn:
        row = self.db.one(f"SELECT {_TURN_COLUMNS} FROM turns WHERE id=?", (turn_id,))
        if row is None:
            raise UsageError(Message("no_such_turn", turn=turn_id))
        calls = self.calls_of_turn(turn_id) if with_calls else ()
        return self._turn_from_row(row, calls, with_refs=with_calls)

    def turns(self, session_id: SessionId, *, with_calls: bool = False) -> list[Turn]:
        rows = self.db.all(f"SELECT {_TURN_COLUMNS} FROM turns WHERE session_id=? ORDER BY number", (session_id,))
        return [
            self._turn_from_row(row, self.calls_of_turn(TurnId(row["id"])) if with_calls else (), with_refs=with_calls)
            for row in rows
        ]

    def last_turn(self, session_id: SessionId) -> Turn | None:
        row = self.db.one(
            f"SELECT {_TURN_COLUMNS} FROM turns WHERE session_id=? ORDER BY number DESC LIMIT 1", (session_id,)
        )
        return self._turn_from_row(row) if row is not None else None

    def turn_by_number(self, session_id: SessionId, number: int) -> Turn:
        row = self.db.one(f"SELECT {_TURN_COLUMNS} FROM turns WHERE session_id=? AND number=?", (session_id, number))
        if row is None:
            raise UsageError(Message("no_such_turn_number", number=number))
        return self._turn_from_row(row)

    def turns_with_changes(self, session_id: SessionId) -> set[str]:
        """Ids of the session's turns that recorded at least one change of a file or a git ref."""
        rows = self.db.all(
            "SELECT DISTINCT calls.turn_id AS turn_id FROM calls JOIN changes ON changes.call_id = calls.id"
            " WHERE calls.session_id=?"
            " UNION SELECT DISTINCT ref_changes.turn_id FROM ref_changes JOIN turns ON turns.id = ref_changes.turn_id"
            " WHERE turns.session_id=?",
            (session_id, session_id),
        )
        return {row["turn_id"] for row in rows}

    def running_turns(self, session_id: SessionId) -> list[RunningTurn]:
        """Turns begun and not ended, with the start time of the process holding each."""
        rows = self.db.all(
            f"SELECT {_TURN_COLUMNS} FROM turns WHERE session_id=? AND status='running' ORDER BY number",
            (session_id,),
        )
        return [RunningTurn(self._turn_from_row(row), row["holder_start"]) for row in rows]

    def end_turn(self, turn_id: TurnId, status: TurnStatus) -> None:
        self.db.execute(
            "UPDATE turns SET status=?, ended_at=? WHERE id=? AND status='running'",
            (status, self.now(), turn_id),
        )

    def reopen_turn(self, turn_id: TurnId, *, holder_pid: int | None, holder_start: int | None) -> bool:
        """Make an ended turn run again (an MCP server's turn runs only while a tool call does)."""
        cursor = self.db.execute(
            "UPDATE turns SET status='running', ended_at=NULL, holder_pid=?, holder_start=?"
            " WHERE id=? AND status='ended'",
            (holder_pid, holder_start, turn_id),
        )
        return cursor.rowcount == 1

    def set_turn_undone(self, turn_id: TurnId, undone: UndoState) -> None:
        self.db.execute("UPDATE turns SET undone=? WHERE id=?", (undone, turn_id))

    def refresh_turn_undone(self, turn_id: TurnId) -> UndoState:
        """Set a turn's undo state from its changes: all taken back, some, or none."""
        files = self.db.one(
            "SELECT COUNT(*) AS total, COALESCE(SUM(changes.reverted), 0) AS reverted"
            " FROM changes JOIN calls ON calls.id = changes.call_id WHERE calls.turn_id=?",
            (turn_id,),
        )
        refs = self.db.one(
            "SELECT COUNT(*) AS total, COALESCE(SUM(reverted), 0) AS reverted FROM ref_changes WHERE turn_id=?",
            (turn_id,),
        )
        assert files is not None and refs is not None  # aggregates always give a row
        total = int(files["total"]) + int(refs["total"])
        reverted = int(files["reverted"]) + int(refs["reverted"])
        state: UndoState = "no" if reverted == 0 else ("yes" if reverted == total else "partly")
        self.set_turn_undone(turn_id, state)
        return state

    def drop_calls_of_turns(self, turn_ids: Sequence[TurnId]) -> None:
        """Edit and resend: delete the calls of *turn_ids* with their changes (their copies go at the next gc)."""
        for turn_id in turn_ids:
            self.db.execute("DELETE FROM changes WHERE call_id IN (SELECT id FROM calls WHERE turn_id=?)", (turn_id,))
            self.db.execute("DELETE FROM calls WHERE turn_id=?", (turn_id,))
            self.db.execute("DELETE FROM ref_changes WHERE turn_id=?", (turn_id,))
            self.db.execute("UPDATE turns SET resent=1 WHERE id=?", (turn_id,))

    # -- git refs ----------------------------------------------------------------------------

    def refs_at_turn_start(self, turn_id: TurnId) -> dict[str, str] | None:
        row = self.db.one("SELECT refs_before_enc FROM turns WHERE id=?", (turn_id,))
        if row is None or row["refs_before_enc"] is None:
            return None
        data: dict[str, str] = self._open_json(row["refs_before_enc"], f"turns.refs_before:{turn_id}")
        return data

    def add_ref_changes(self, turn_id: TurnId, moves: Sequence[tuple[str, str | None, str | None]]) -> None:
        """Record the refs a turn moved: (name, value before, value after)."""
        self.db.executemany(
            "INSERT INTO ref_changes(turn_id, seq, body_enc) VALUES(?,?,?)",
            [
                (turn_id, seq, self._seal_json([name, before, after], f"ref_changes:{turn_id}:{seq}"))
                for seq, (name, before, after) in enumerate(moves)
            ],
        )

    def ref_changes(self, turn_id: TurnId) -> tuple[RefChange, ...]:
        changes = []
        for row in self.db.all(
            "SELECT id, seq, body_enc, reverted FROM ref_changes WHERE turn_id=? ORDER BY seq", (turn_id,)
        ):
            name, before, after = self._open_json(row["body_enc"], f"ref_changes:{turn_id}:{row['seq']}")
            changes.append(RefChange(row["id"], turn_id, name, before, after, bool(row["reverted"])))
        return tuple(changes)

    def mark_ref_changes_reverted(self, ids: Iterable[int], *, reverted: bool = True) -> None:
        self.db.executemany("UPDATE ref_changes SET reverted=? WHERE id=?", [(int(reverted), i) for i in ids])

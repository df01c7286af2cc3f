"""Operations: a plan saved with its rows, its status moved by compare-and-swap, each row's result."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from turnback.catalog import Message
from turnback.errors import UsageError
from turnback.model import (
    BlobId,
    CallId,
    FileState,
    OpId,
    OpStatus,
    Plan,
    PlanRow,
    PlanSection,
    ProjectId,
    RefUpdate,
    RowStatus,
    SessionId,
    TurnId,
)
from turnback.paths import RelPath
from turnback.store.records import OperationSummary
from turnback.store.sqlite.base import (
    OP_KINDS,
    OP_STATUSES,
    ROW_ACTIONS,
    ROW_STATUSES,
    SqliteRecords,
    checked_choice,
    record_item,
    record_named,
)


def message_to_json(message: Message | None) -> dict[str, Any] | None:
    return message.to_json() if message is not None else None


def message_from_json(data: object) -> Message | None:
    """A message as saved; a plain string is a reason an older turnback saved as English text."""
    return None if data is None else _message(data)


def _message(data: object) -> Message:
    if isinstance(data, dict):
        return Message.from_json(data)
    return Message("plain", text=str(data))


def state_to_json(state: FileState | None) -> dict[str, Any] | None:
    if state is None:
        return None
    return {
        "kind": state.kind,
        "blob": state.blob.hex() if state.blob else None,
        "size": state.size,
        "mode": state.mode,
        "target": state.target,
    }


def state_from_json(data: dict[str, Any] | None) -> FileState | None:
    if data is None:
        return None
    return FileState(
        kind=data["kind"],
        blob=BlobId(bytes.fromhex(data["blob"])) if data.get("blob") else None,
        size=data.get("size"),
        mode=data.get("mode"),
        target=data.get("target"),
    )


def _row_body(row: PlanRow) -> dict[str, Any]:
    """What a plan row holds beyond its action and status (sealed as one value)."""
    return {
        "path": row.path,
        "reason": message_to_json(row.reason),
        "expect": state_to_json(row.expect),
        "target": state_to_json(row.target),
        "change_ids": list(row.change_ids),
        "turn_id": row.turn_id,
        "force_only": row.force_only,
        "conflict": row.conflict,
        "warnings": [message_to_json(warning) for warning in row.warnings],
        "trash_name": row.trash_name,
        "ref": [row.ref.name, row.ref.expect, row.ref.target] if row.ref else None,
        "outside": row.outside,
        "unmark": row.unmark,
    }


def _plan_spec(plan: Plan) -> dict[str, Any]:
    """What a plan holds beyond its plain columns and rows (sealed as one value)."""
    return {
        "sections": [[s.turn_id, message_to_json(s.title)] for s in plan.sections],
        "turn_ids": list(plan.turn_ids),
        "call_id": plan.call_id,
        "force": plan.force,
        "notes": [message_to_json(note) for note in plan.notes],
        "head_from": plan.head_from,
        "head_to": plan.head_to,
        "moves_head": plan.moves_head,
        "resend_turn": plan.resend_turn,
        "resend_mode": plan.resend_mode,
    }


class OperationQueries(SqliteRecords):
    def save_plan(self, plan: Plan) -> None:
        with self.transaction():
            self.db.execute(
                "INSERT INTO ops(id, session_id, project_id, kind, status, spec_enc, created_at, reverses)"
                " VALUES(?,?,?,?,?,?,?,?)",
                (
                    plan.id,
                    plan.session_id,
                    plan.project_id,
                    plan.kind,
                    plan.status,
                    self._seal_json(_plan_spec(plan), f"ops.spec:{plan.id}"),
                    plan.created_at,
                    plan.reverses,
                ),
            )
            self.db.executemany(
                "INSERT INTO op_rows(op_id, seq, action, status, body_enc, expect_blob, target_blob)"
                " VALUES(?,?,?,?,?,?,?)",
                [
                    (
                        plan.id,
                        row.seq,
                        row.action,
                        row.status,
                        self._seal_json(_row_body(row), f"op_rows.body:{plan.id}:{row.seq}"),
                        row.expect.blob if row.expect else None,
                        row.target.blob if row.target else None,
                    )
                    for row in plan.rows
                ],
            )

    def _plan_rows(self, op_id: OpId, what: Message) -> tuple[PlanRow, ...]:
        rows: list[PlanRow] = []
        for stored in self.db.all(
            "SELECT seq, action, status, body_enc, result_enc FROM op_rows WHERE op_id=? ORDER BY seq",
            (op_id,),
        ):
            seq = stored["seq"]
            body = self._open_json(stored["body_enc"], f"op_rows.body:{op_id}:{seq}")
            note = message_from_json(self._open_json_or_text(stored["result_enc"], f"op_rows.result:{op_id}:{seq}"))
            action = checked_choice(stored["action"], ROW_ACTIONS, record_item(Message("record_noun_row"), seq, what))
            status = checked_choice(stored["status"], ROW_STATUSES, record_item(Message("record_noun_row"), seq, what))
            rows.append(
                PlanRow(
                    seq=seq,
                    action=action,
                    path=RelPath(body["path"]),
                    reason=message_from_json(body["reason"]),
                    expect=state_from_json(body["expect"]),
                    target=state_from_json(body["target"]),
                    change_ids=tuple(body["change_ids"]),
                    turn_id=body["turn_id"],
                    force_only=body["force_only"],
                    conflict=body["conflict"],
                    warnings=tuple(_message(warning) for warning in body["warnings"]),
                    trash_name=body["trash_name"],
                    status=status,
                    note=note,
                    ref=RefUpdate(*body["ref"]) if body.get("ref") else None,
                    outside=body.get("outside", False),
                    unmark=body.get("unmark", False),
                )
            )
        return tuple(rows)

    def load_plan(self, op_id: OpId) -> Plan:
        op = self.db.one(
            "SELECT id, session_id, project_id, kind, status, spec_enc, created_at, reverses FROM ops WHERE id=?",
            (op_id,),
        )
        if op is None:
            raise UsageError(Message("no_such_operation", op=op_id))
        what = record_named(Message("record_noun_operation"), op_id)
        kind = checked_choice(op["kind"], OP_KINDS, what)
        status = checked_choice(op["status"], OP_STATUSES, what)
        spec = self._open_json(op["spec_enc"], f"ops.spec:{op_id}")
        rows = self._plan_rows(op_id, what)
        return Plan(
            id=OpId(op["id"]),
            kind=kind,
            session_id=SessionId(op["session_id"]),
            project_id=ProjectId(op["project_id"]),
            rows=rows,
            sections=tuple(PlanSection(TurnId(t) if t else None, _message(title)) for t, title in spec["sections"]),
            turn_ids=tuple(TurnId(t) for t in spec["turn_ids"]),
            call_id=CallId(spec["call_id"]) if spec["call_id"] else None,
            force=spec["force"],
            status=status,
            created_at=op["created_at"],
            notes=tuple(_message(note) for note in spec.get("notes", ())),
            head_from=spec.get("head_from"),
            head_to=spec.get("head_to"),
            moves_head=spec.get("moves_head", False),
            reverses=op["reverses"],
            resend_turn=spec.get("resend_turn"),
            resend_mode=spec.get("resend_mode"),
        )

    def set_op_status(self, op_id: OpId, status: OpStatus, *, expect: OpStatus | None = None) -> bool:
        """Move an operation to *status*; with *expect*, only from that status (compare-and-swap)."""
        column = {"applying": "applied_at", "done": "finished_at", "planned": "created_at"}[status]
        if expect is None:
            cursor = self.db.execute(f"UPDATE ops SET status=?, {column}=? WHERE id=?", (status, self.now(), op_id))
        else:
            cursor = self.db.execute(
                f"UPDATE ops SET status=?, {column}=? WHERE id=? AND status=?",
                (status, self.now(), op_id, expect),
            )
        return cursor.rowcount == 1

    def set_row_status(self, op_id: OpId, seq: int, status: RowStatus, note: Message | None) -> None:
        self.set_row_statuses(op_id, [(seq, status, note)])

    def set_row_statuses(self, op_id: OpId, rows: Sequence[tuple[int, RowStatus, Message | None]]) -> None:
        """Each (seq, status, note) of *rows* journaled: one statement run for all of them."""
        self.db.executemany(
            "UPDATE op_rows SET status=?, result_enc=? WHERE op_id=? AND seq=?",
            [
                (
                    status,
                    self._seal(
                        json.dumps(message_to_json(note)) if note is not None else None, f"op_rows.result:{op_id}:{seq}"
                    ),
                    op_id,
                    seq,
                )
                for seq, status, note in rows
            ],
        )

    def _open_json_or_text(self, sealed: bytes | None, context: str) -> Any:
        """A sealed JSON value, or (a result note an older turnback kept) its text as it is."""
        text = self._open(sealed, context)
        if text is None:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text

    def ops_of_session(self, session_id: SessionId) -> list[OperationSummary]:
        """The session's applied (or applying) operations, oldest first: id, kind, status, reverses, taken back by."""
        rows = self.db.all(
            "SELECT id, kind, status, reverses, taken_back_by FROM ops WHERE session_id=? AND status<>'planned'"
            " ORDER BY id",
            (session_id,),
        )
        return [
            OperationSummary(OpId(r["id"]), r["kind"], r["status"], r["reverses"], r["taken_back_by"]) for r in rows
        ]

    def ops_in_status(self, session_id: SessionId, status: OpStatus) -> list[OpId]:
        rows = self.db.all("SELECT id FROM ops WHERE session_id=? AND status=? ORDER BY id", (session_id, status))
        return [OpId(row["id"]) for row in rows]

    def newest_op_to_take_back(self, session_id: SessionId) -> OpId | None:
        """The newest applied operation of the session that changed something and is not taken back yet."""
        row = self.db.one(
            "SELECT ops.id AS id FROM ops WHERE ops.session_id=? AND ops.status='done' AND ops.taken_back_by IS NULL"
            " AND EXISTS (SELECT 1 FROM op_rows WHERE op_rows.op_id = ops.id AND op_rows.status='done')"
            " ORDER BY ops.id DESC LIMIT 1",
            (session_id,),
        )
        return OpId(row["id"]) if row else None

    def set_taken_back(self, op_id: OpId, by: OpId) -> None:
        self.db.execute("UPDATE ops SET taken_back_by=? WHERE id=?", (by, op_id))

    def op_evicted(self, op_id: OpId) -> bool:
        """Whether the store cap dropped the copies of operation *op_id*."""
        row = self.db.one("SELECT evicted FROM ops WHERE id=?", (op_id,))
        return bool(row and row["evicted"])

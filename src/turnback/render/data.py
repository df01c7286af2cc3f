"""The JSON shapes every front end returns (the CLI adds ``"schema": 1``).

Paths are POSIX paths relative to the project root; ids are full ids.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from turnback.catalog import Message, word
from turnback.model import Call, Change, OpResult, Plan, PlanRow, Project, Session, Turn, TurnSummary
from turnback.render.text import ChangeNotes, result_message


def change_items(call: Call, note_of: Callable[[Change], Message | None] | None = None) -> list[dict[str, Any]]:
    """``[{"path", "kind"}]`` for a call; a move shows as one ``moved`` item with ``from``.

    *note_of*: whose a change may be when another call ran meanwhile; such an item has ``"may_be"``, the note's
    code, params and message (an undo holds it unless ``--force``).
    """
    changes: list[Change] = list(call.changes)
    items: list[dict[str, Any]] = []
    source: Change | None = None
    if call.tool == "move":
        sources = [c for c in changes if c.before.exists and c.after is not None and not c.after.exists]
        source = sources[0] if sources else None
    for change in changes:
        if source is not None and change is source:
            continue
        if (
            source is not None
            and change.after is not None
            and change.after.same_as(source.before)
            and change.path != source.path
        ):
            items.append({"path": change.path, "kind": "moved", "from": source.path})
            continue
        item: dict[str, Any] = {"path": change.path, "kind": change.kind}
        note = note_of(change) if note_of is not None else None
        if note is not None:
            item["may_be"] = message_data(note)
        items.append(item)
    return items


def call_data(call: Call, note_of: Callable[[Change], Message | None] | None = None) -> dict[str, Any]:
    return {
        "id": call.id,
        "tool": call.tool,
        "status": call.status,
        "cut_short": call.cut_short,
        "revertible": any(not c.reverted and not c.evicted for c in call.changes),
        "changes": change_items(call, note_of),
    }


def turn_data(turn: Turn, notes: ChangeNotes | None = None) -> dict[str, Any]:
    return {
        "id": turn.id,
        "number": turn.number,
        "parent": turn.parent,
        "message": turn.message,
        "status": turn.status,
        # Two booleans, one type each: "undone" is true for a turn taken back wholly or in part.
        "undone": turn.undone != "no",
        "partly_undone": turn.undone == "partly",
        "calls": [call_data(call, notes(call) if notes is not None else None) for call in turn.calls],
    }


def summary_data(summary: TurnSummary) -> dict[str, Any]:
    return {
        "files": summary.files,
        "added": summary.added,
        "removed": summary.removed,
        "line": word(summary.line) if summary.line else "",
        "notes": [word(note) for note in summary.notes],
    }


def session_data(session: Session, project: Project | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": session.id,
        "title": session.title,
        "incognito": session.incognito,
        "head": session.head,
        "active_at": session.active_at,
    }
    if project is not None:
        data["project"] = {"id": project.id, "root": project.root}
        if project.other_host is not None:  # a store shared by hosts: the files are on that one
            data["project"]["host"] = project.other_host
    return data


def message_data(message: Message) -> dict[str, Any]:
    """``{"code", "params", "message"}``: an outcome as data, and worded in the current language."""
    return {**message.to_json(), "message": word(message)}


def row_data(row: PlanRow) -> dict[str, Any]:
    """A plan or result row; ``code`` and ``message`` are its outcome (the result's note, else the plan's reason)."""
    outcome = row.note or row.reason
    data: dict[str, Any] = {
        "action": row.action,
        "path": row.path,
        "reason": word(row.reason) if row.reason else None,
        "status": row.status,
        "code": outcome.code if outcome else None,
        "message": word(outcome) if outcome else None,
    }
    if row.note:
        data["note"] = word(row.note)
    if row.warnings:
        data["warnings"] = [word(warning) for warning in row.warnings]
    return data


def plan_data(plan: Plan, *, applied: bool, trash: str | None = None) -> dict[str, Any]:
    return {
        "plan": {"id": plan.id, "kind": plan.kind, "status": plan.status, "turns": list(plan.turn_ids)},
        "rows": [row_data(row) for row in plan.rows],
        "notes": [message_data(note) for note in plan.notes],
        "applied": applied,
        "trash": trash,
    }


def result_data(result: OpResult) -> dict[str, Any]:
    data = plan_data(result.plan, applied=True, trash=result.trash_dir)
    data["resumed"] = result.resumed
    data.update(message_data(result_message(result)))
    data["notes"] = [message_data(note) for note in (*result.plan.notes, *result.notes)]
    return data


__all__ = [
    "call_data",
    "change_items",
    "message_data",
    "plan_data",
    "result_data",
    "row_data",
    "session_data",
    "summary_data",
    "turn_data",
]

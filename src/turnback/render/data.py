"""The JSON shapes every front end returns (the CLI adds ``"schema": 1``).

Paths are POSIX paths relative to the project root; ids are full ids.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol

from turnback.catalog import Message, word
from turnback.model import BlobId, Call, Change, OpResult, Plan, PlanRow, Project, Session, Turn, TurnSummary
from turnback.render.diff import diff_states, file_headers
from turnback.render.summary import call_title
from turnback.render.text import ChangeNotes, action_name, call_states, change_block, result_message
from turnback.render.views import plan_changes

DENIED = frozenset({"call_denied", "call_denied_because"})  # a call's error when the user said no to it
FULL_DIFF = 1 << 30  # a limit of lines no diff reaches: a page scrolls what a terminal clips


class SessionStatus(Protocol):
    """What ``status`` reports (the engine's ``SessionStatus``; render cannot import the engine)."""

    @property
    def session(self) -> Session: ...
    @property
    def running(self) -> Sequence[Turn]: ...
    @property
    def busy(self) -> Sequence[Message]: ...
    @property
    def commands(self) -> Sequence[Call]: ...
    @property
    def interrupted(self) -> Plan | None: ...
    @property
    def kept_bytes(self) -> int: ...


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


def history_data(
    session: Session,
    turns: Sequence[Turn],
    *,
    active: Collection[str],
    resent: Collection[str],
    undo_next: str | None,
    notes: ChangeNotes | None = None,
    load: Callable[[BlobId], bytes] | None = None,
) -> dict[str, Any]:
    """``log --json``: the session's history tree, each turn with its place on it (head, active, abandoned,
    resent) and whether it is the one a plain undo takes back now (*undo_next*). With *load* (a page), each call
    also has what its block shows (:func:`call_block_data`)."""
    nodes = []
    for turn in turns:
        node = turn_data(turn, notes)
        node["head"] = turn.id == session.head
        node["undo_next"] = turn.id == undo_next
        node["branch"] = "resent" if turn.id in resent else "active" if turn.id in active else "abandoned"
        if load is not None:
            for call, item in zip(turn.calls, node["calls"], strict=True):
                item.update(call_block_data(call, turn, load, item["changes"]))
        nodes.append(node)
    return {"session": session.id, "head": session.head, "turns": nodes}


def call_block_data(
    call: Call, turn: Turn, load: Callable[[BlobId], bytes], items: list[dict[str, Any]]
) -> dict[str, Any]:
    """What a call's block in the page's history shows beside ``call_data``: its title and kind, its +/- counts,
    its states as ``log`` words them (cut short, failed, can no longer be reverted, Reverted); and on each of
    its change *items* (updated in place) whether it was reverted, its copy dropped or never kept, its counts."""
    by_path = {change.path: change for change in call.changes}
    added = removed = 0
    for item in items:
        change = by_path[item["path"]]
        diff = diff_states(change.before, change.after, load) if not (change.not_covered or change.evicted) else None
        counted = diff is not None and not diff.binary
        item.update(
            reverted=change.reverted,
            evicted=change.evicted,
            not_covered=word(change.not_covered) if change.not_covered else None,
            binary=diff is not None and diff.binary,
            added=diff.added if counted and diff else 0,
            removed=diff.removed if counted and diff else 0,
        )
        added, removed = added + item["added"], removed + item["removed"]
    return {
        "title": call_title(call),
        "kind": call.kind,
        "added": added,
        "removed": removed,
        "states": [message_data(state) for state in call_states(call, turn)],
        "denied": call.error is not None and call.error.code in DENIED,  # the user said no to it
    }


def change_diff_data(change: Change, load: Callable[[BlobId], bytes], *, hidden: bool) -> dict[str, Any]:
    """One change of a call as a page draws it: its diff's lines (file headers, then hunks, unclipped) and
    counts; none of a *hidden* (ignored) file's contents. A binary or oversized file, a link or a mode
    change has a ``note`` saying so instead of lines."""
    before, after = change.before, change.after
    item: dict[str, Any] = {
        "path": change.path,
        "kind": change.kind,
        "hidden": hidden,
        "reverted": change.reverted,
        "not_covered": bool(change.not_covered or change.evicted),
        "binary": False,
        "too_large": False,
        "added": 0,
        "removed": 0,
        "note": None,
        "lines": [],
    }
    if hidden or item["not_covered"] or "dir" in (before.kind, after.kind if after is not None else None):
        return item
    if any(state is not None and state.kind in ("symlink", "special") for state in (before, after)):
        return {**item, "note": "\n".join(change_block(change.path, before, after, load, FULL_DIFF))}
    diff = diff_states(before, after, load)
    item.update(added=diff.added, removed=diff.removed)
    if diff.binary:
        return {**item, "binary": not diff.too_large, "too_large": diff.too_large, "note": diff.binary_line}
    if not diff.lines:
        return {**item, "note": "\n".join(change_block(change.path, before, after, load, FULL_DIFF)) or None}
    headers = file_headers(change.path, old_exists=before.exists, new_exists=after is not None and after.exists)
    return {**item, "lines": [*headers, *diff.lines]}


def call_view_data(
    call: Call,
    turn: Turn,
    load: Callable[[BlobId], bytes],
    *,
    raw_input: str | None,
    missing_input: Message | None,
    hidden: Collection[str],
    hide_error: bool,
    notes: Callable[[Change], Message | None] | None = None,
) -> dict[str, Any]:
    """``show --json``'s call with what a page shows of it: its turn, title, raw input (or why there is none),
    error, and each change's diff. Nothing of a file .gitignore ignores: not its contents, not an error about it."""
    return {
        **call_data(call, notes),
        "turn": {"id": turn.id, "number": turn.number},
        "kind": call.kind,
        "title": call_title(call),
        "started_at": call.started_at,
        "ended_at": call.ended_at,
        "exit_code": call.exit_code,
        "late": call.late,
        "error": None if hide_error or call.error is None else word(call.error),
        "input": raw_input,
        "input_missing": message_data(missing_input) if raw_input is None and missing_input else None,
        "diffs": [change_diff_data(change, load, hidden=change.path in hidden) for change in call.changes],
    }


def sessions_data(listed: Sequence[tuple[Session, Project, int]], defaults: Collection[str]) -> dict[str, Any]:
    """``sessions --json``: each session with its project, its number of turns, and whether it is the default."""
    items = []
    for session, project, turns in listed:
        item = session_data(session, project)
        item["turns"] = turns
        item["default"] = session.id in defaults
        items.append(item)
    return {"sessions": items}


def status_data(status: SessionStatus, notes: Sequence[Message] = ()) -> dict[str, Any]:
    """``status --json``: the head, what runs or marks the session busy (``busy`` worded, ``busy_reasons`` as
    :func:`message_data`), an interrupted operation, what is kept; *notes*: what the text says above it
    (installed hooks that have not run yet), each as :func:`message_data`."""
    interrupted = status.interrupted
    return {
        "notes": [message_data(note) for note in notes],
        "session": status.session.id,
        "head": status.session.head,
        "running_turns": [t.id for t in status.running],
        "busy": [word(reason) for reason in status.busy],
        "busy_reasons": [message_data(reason) for reason in status.busy],
        "commands": [c.id for c in status.commands],
        "interrupted": plan_data(interrupted, applied=False) if interrupted else None,
        "kept_bytes": status.kept_bytes,
    }


def files_data(files: Sequence[tuple[str, Message]]) -> dict[str, Any]:
    """``files --json``: each file the session touched, and its state (as of, created in, deleted in turn N)."""
    return {"files": [{"path": path, "state": word(state), **message_data(state)} for path, state in files]}


class ResendFile(Protocol):
    """A file an edit and resend would revert (the engine's ``ResendFile``; render cannot import the engine)."""

    @property
    def path(self) -> str: ...
    @property
    def calls(self) -> int: ...
    @property
    def added(self) -> int: ...
    @property
    def removed(self) -> int: ...


def resend_files_data(files: Sequence[ResendFile]) -> list[dict[str, Any]]:
    """``resend --json``'s ``files``: each file once, how many calls changed it, the lines a revert adds and removes."""
    return [{"path": f.path, "calls": f.calls, "added": f.added, "removed": f.removed} for f in files]


def summary_data(summary: TurnSummary) -> dict[str, Any]:
    """``turn end --json``'s summary: the totals, the line worded (``line``) and as data (``code``, ``params``,
    ``message``; None for a turn that changed no file), and its notes worded."""
    line = message_data(summary.line) if summary.line else {"code": None, "params": None, "message": None}
    return {
        "files": summary.files,
        "added": summary.added,
        "removed": summary.removed,
        "line": word(summary.line) if summary.line else "",
        "notes": [word(note) for note in summary.notes],
        **line,
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
    """A plan or result row; ``code``, ``params`` and ``message`` are its outcome (the result's note, else the
    plan's reason): a reason of several clauses is code ``clauses``, and its params say which."""
    outcome = row.note or row.reason
    data: dict[str, Any] = {
        "action": row.action,
        "path": row.path,
        "reason": word(row.reason) if row.reason else None,
        "status": row.status,
        "code": outcome.code if outcome else None,
        "params": outcome.to_json()["params"] if outcome else None,
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


def _later_call(message: Message | None) -> str | None:
    """The call a conflict's reason names as the one that wrote the file later (its short id), if any."""
    if message is None:
        return None
    if message.code == "later_call_wrote_it":
        return str(message.params["call"])
    for value in message.params.values():
        for item in value if isinstance(value, tuple) else (value,):
            found = _later_call(item) if isinstance(item, Message) else None
            if found is not None:
                return found
    return None


def plan_view_data(
    plan: Plan, load: Callable[[BlobId], bytes], *, hidden: Collection[str], host: str
) -> dict[str, Any]:
    """A preview as a page asks about it: ``plan_data``, the host it writes on, the head it saw, and per row
    whether it is a conflict, whether it deletes what the call created, the later call that wrote the file
    (its short id) and the diff it writes back (what the file holds now -> what it goes back to; none of a
    *hidden* file's contents)."""
    shown = plan_data(plan, applied=False)
    shown["host"] = host
    shown["head"] = plan.head_from
    shown["action"] = message_data(action_name(plan))  # the confirming button's label (Revert, Delete Anyway, …)
    for row, item in zip(plan.rows, shown["rows"], strict=True):
        item["conflict"] = row.conflict
        item["created"] = row.target is not None and not row.target.exists and row.ref is None
        item["later_call"] = _later_call(row.reason)
        acting = (row.conflict or row.acts) and row.path not in hidden and row.ref is None
        item["diff"] = change_block(row.path, row.expect, row.target, load, FULL_DIFF) if acting else []
    return shown


def going_back_data(plan: Plan, load: Callable[[BlobId], bytes]) -> list[dict[str, Any]]:
    """Each file a rollback puts back, with the lines it adds and removes (the rows ``going_back_lines`` prints)."""
    return [
        {"path": c.path, "outside": c.outside, "added": c.added, "removed": c.removed, "binary": c.binary}
        for c in sorted(plan_changes(plan, load), key=lambda change: change.path)
        if "dir" not in (c.before.kind, c.after.kind)
    ]


def result_data(result: OpResult) -> dict[str, Any]:
    data = plan_data(result.plan, applied=True, trash=result.trash_dir)
    data["resumed"] = result.resumed
    data.update(message_data(result_message(result)))
    data["notes"] = [message_data(note) for note in (*result.plan.notes, *result.notes)]
    return data


__all__ = [
    "call_block_data",
    "call_data",
    "call_view_data",
    "change_diff_data",
    "change_items",
    "files_data",
    "going_back_data",
    "history_data",
    "message_data",
    "plan_data",
    "plan_view_data",
    "resend_files_data",
    "result_data",
    "row_data",
    "session_data",
    "sessions_data",
    "status_data",
    "summary_data",
    "turn_data",
]

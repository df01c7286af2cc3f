"""The lines a user reads: plan previews, results, a call's diff, the log.

Functions here take model values and a ``load`` function for content;
they never read the disk or the store themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from turnback.model import BlobId, Call, Change, FileState, OpResult, Plan, PlanRow, Turn, short_id
from turnback.render.diff import FileDiff, clip_lines, diff_states, file_headers
from turnback.render.summary import call_title, net_changes, shown_path
from turnback.render.terminal import quote

Load = Callable[[BlobId], bytes]

GIT_INDEX_LINE = "your git index is unchanged; git status can show staged changes"


def _describe(state: FileState | None) -> str:
    if state is None:
        return "unknown"
    if state.kind == "symlink":
        return f"a link to {quote(state.target or '')}"
    return state.describe()


def change_block(path: str, before: FileState | None, after: FileState | None, load: Load, limit: int) -> list[str]:
    """The diff of one path from *before* to *after*: headers, then *limit* lines (0: no diff)."""
    if limit == 0:
        return []
    if any(state is not None and state.kind == "dir" for state in (before, after)):
        return []
    if any(state is not None and state.kind in ("symlink", "special") for state in (before, after)):
        return [f"{quote(path)}: {_describe(before)} -> {_describe(after)}"]
    diff = diff_states(before, after, load)
    if diff.binary:
        return [diff.binary_line]
    old_exists = before is not None and before.exists
    new_exists = after is not None and after.exists
    if not diff.lines:
        if before is not None and after is not None and old_exists and new_exists and before.mode != after.mode:
            return [f"mode {before.mode or 0:o} -> {after.mode or 0:o}"]
        return []
    return [
        *file_headers(path, old_exists=old_exists, new_exists=new_exists),
        *clip_lines(list(diff.lines), limit),
    ]


def change_label(change: Change, diff: FileDiff | None) -> str:
    counts = ""
    if diff is not None and not diff.binary and (diff.added or diff.removed):
        counts = f" +{diff.added} -{diff.removed}"
    folder = "/" if (change.after is not None and change.after.kind == "dir") or change.before.kind == "dir" else ""
    return f"{change.kind} {quote(change.path)}{folder}{counts}"


IGNORED = "ignored by .gitignore: contents not shown"


def call_lines(
    call: Call,
    turn_number: int | None,
    load: Load,
    limit: int,
    *,
    hidden: Collection[str] = (),
    hide_error: bool = False,
    notes: Callable[[Change], str | None] | None = None,
) -> list[str]:
    """``call ID  edit src/a.py  (turn 2)`` and each change's diff; a *hidden* path shows no contents.

    *hide_error*: the call is about an ignored file, and its error message may quote that file. *notes*: a
    change's note, if any (whose it may be, when another call ran meanwhile).
    """
    where = f"  (turn {turn_number})" if turn_number is not None else ""
    lines = [f"call {short_id(call.id)}  {call_title(call)}{where}"]
    if call.cut_short:
        lines.append("this call may be cut short: its completion was never recorded")
    if call.status == "failed":
        lines.append(f"the call failed ({IGNORED})" if hide_error else f"the call failed: {quote(str(call.error))}")
    if any(change.evicted for change in call.changes):
        lines.append("this change can no longer be reverted: its copy was dropped")
    for change in call.changes:
        if change.reverted:
            lines.append(f"reverted {quote(change.path)}")
            continue
        if change.not_covered or change.evicted:
            why = change.not_covered or "its copy was dropped by the size cap"
            lines.append(f"{change.kind} {quote(change.path)} (not covered: {why})")
            continue
        if change.path in hidden:
            folder = "/" if "dir" in (change.before.kind, change.after.kind if change.after else "") else ""
            lines.append(f"{change.kind} {quote(change.path)}{folder} ({IGNORED})")
            continue
        label = change_label(change, diff_states(change.before, change.after, load))
        note = notes(change) if notes is not None else None
        lines.append(f"{label} ({note})" if note is not None else label)
        lines.extend(change_block(change.path, change.before, change.after, load, limit))
    return lines


def row_line(row: PlanRow, *, with_result: bool = False) -> str:
    action = row.action
    if row.ref is not None and action == "ref":
        return f"{action:<11} {quote(row.ref.text())}"
    text = f"{action:<11} {shown_path(row.path, outside=row.outside)}"
    # What the row leaves there decides the slash; a row that removes something names what it removes.
    shown = row.target if row.target is not None and row.target.exists else row.expect
    if shown is not None and shown.kind == "dir":
        text += "/"
    reason = row.note if with_result and row.note else row.reason
    if reason and (action in ("skip", "not covered", "mark") or with_result or row.conflict):
        text += f" ({reason})"
    return text


def plan_lines(plan: Plan, load: Load, *, diff_limit: int, hidden: Collection[str] = ()) -> list[str]:
    """The preview: a header per turn, then a row per path, then conflict diffs and warnings."""
    lines: list[str] = []
    rows_by_turn: dict[str | None, list[PlanRow]] = {}
    for row in plan.rows:
        rows_by_turn.setdefault(row.turn_id, []).append(row)
    for section in plan.sections:
        lines.append(section.title)
        lines.extend(row_line(row) for row in rows_by_turn.pop(section.turn_id, []))
    for rest in rows_by_turn.values():
        lines.extend(row_line(row) for row in rest)
    for row in plan.rows:
        for warning in row.warnings:
            lines.append(f"warning: {quote(row.path)}: {warning}")
    if plan.kind == "revert":  # the diff it writes back, asked about before it is written (a clean one too)
        for row in plan.rows:
            if (row.conflict or row.acts) and row.path not in hidden:
                block = change_block(row.path, row.expect, row.target, load, diff_limit)
                if block:
                    lines.append(f"{quote(row.path)}: from what it holds now back to what it held before the call:")
                    lines.extend(block)
    if any(row.action == "ref" for row in plan.rows):
        lines.append(GIT_INDEX_LINE)
    lines.extend(plan.notes)
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def result_lines(result: OpResult) -> list[str]:
    """``undone: 1 file restored, 1 file moved to TRASH/, 1 ref moved`` and each row that did not go through."""
    plan = result.plan
    done = [row for row in plan.rows if row.status == "done"]
    restored = sum(1 for row in done if row.action == "restore")
    trashed = sum(1 for row in done if row.action == "trash" and row.expect is not None and row.expect.kind != "dir")
    folders = sum(1 for row in done if row.action == "trash" and row.expect is not None and row.expect.kind == "dir")
    marked = sum(1 for row in done if row.action == "mark")
    refs = sum(1 for row in done if row.action == "ref")
    parts = []
    if restored:
        parts.append(f"{_count(restored, 'file')} restored")
    if trashed:
        parts.append(f"{_count(trashed, 'file')} moved to {quote(result.trash_dir or '')}/")
    if folders:
        parts.append(f"{_count(folders, 'folder')} removed")
    if refs:
        parts.append(f"{_count(refs, 'ref')} moved")
    if marked:
        parts.append(f"{marked} already as before")
    verb = {"undo": "undone", "revert": "reverted", "rollback": "rolled back", "resend": "reverted", "redo": "redone"}[
        plan.kind
    ]
    lines = []
    if result.resumed:
        lines.append(f"finished the interrupted {plan.kind} {short_id(plan.id)}")
    if parts:
        line = f"{verb}: " + ", ".join(parts)
        if result.trash_dir and not trashed:
            line += f"; what was replaced is in {quote(result.trash_dir)}/"
        lines.append(line)
    elif plan.kind == "resend":
        lines.append("no file was reverted")
    else:
        lines.append(f"{plan.kind} changed nothing")
    lines.extend(result.notes)
    for row in plan.rows:
        if row.status in ("skipped", "failed"):
            label = (
                "failed" if row.status == "failed" else ("not covered" if row.action == "not covered" else "skipped")
            )
            shown = shown_path(row.path, outside=row.outside)
            lines.append(f"{label:<11} {shown} ({row.note or row.reason})")
    return lines


def force_only_line(plan: Plan) -> str:
    """``undo changed nothing: 1 path acts only with --force; turnback undo --force acts on it``."""
    count = len(plan.force_only_rows)
    flag = "--force" if plan.kind == "undo" else "--anyway"
    command = (
        "turnback undo --force" if plan.kind == "undo" else f"turnback revert {short_id(plan.call_id or '')} --anyway"
    )
    subject = "1 path acts" if count == 1 else f"{count} paths act"
    return (
        f"{plan.kind} changed nothing: {subject} only with {flag}; {command} acts on {'it' if count == 1 else 'them'}"
    )


def interrupted_reason(turn: Turn) -> str:
    """Why a turn is marked interrupted: the one way it happens is that its holding process ended."""
    pid = f" (pid {turn.holder_pid})" if turn.holder_pid is not None else ""
    return f"the process that began it{pid} ended before turn end"


def _turn_marks(turn: Turn, *, head: str | None, active: Collection[str], resent: Collection[str]) -> list[str]:
    marks = []
    if turn.id == head:
        marks.append("head")
    if turn.id in resent:
        marks.append("replaced by an edited message")
    elif turn.id not in active:
        marks.append("abandoned")
    if turn.status == "running":
        marks.append("running")
    elif turn.status == "interrupted":
        marks.append(f"interrupted: {interrupted_reason(turn)}")
    if turn.undone == "yes":
        marks.append("undone")
    elif turn.undone == "partly":
        marks.append("partly undone")
    return marks


def _turn_body(turn: Turn, load: Load) -> list[str]:
    lines = []
    for call in turn.calls:
        status = ""
        if call.cut_short:
            status = "  (may be cut short)"
        elif call.status == "failed":
            status = "  (failed)"
        if any(c.evicted for c in call.changes):
            status += "  (can no longer be reverted)"
        lines.append(f"  {short_id(call.id)}  {call_title(call)}{status}")
    for change in net_changes(turn.calls, load):
        if change.after.kind == "dir" or change.before.kind == "dir":
            continue
        counts = "" if change.binary or change.kind == "mode" else f" +{change.added} -{change.removed}"
        shown = shown_path(change.path, outside=change.outside)
        if change.not_covered:
            counts = f" (not covered: {change.not_covered}; it cannot be undone)"
        lines.append(f"    {change.kind} {shown}{counts}")
    return lines


def log_lines(
    turns: Sequence[Turn],
    load: Load,
    *,
    head: str | None = None,
    active: Collection[str] = (),
    resent: Collection[str] = (),
) -> list[str]:
    """The session's history tree, newest first, drawn like ``git log --graph``, with calls and changes.

    Each branch is a lane; a turn with two children (the active line and an
    abandoned branch after a rollback) joins its lanes with ``|/``.
    """
    lanes: list[str | None] = []  # the turn each lane waits for
    lines: list[str] = []
    for turn in sorted(turns, key=lambda t: t.number, reverse=True):
        waiting = [i for i, want in enumerate(lanes) if want == turn.id]
        if not waiting:
            lanes.append(turn.id)
            column = len(lanes) - 1
        else:
            column = waiting[0]
            if len(waiting) > 1:
                art = [" "] * (2 * len(lanes))
                for i in range(len(lanes)):
                    if i not in waiting[1:]:
                        art[2 * i] = "|"
                for j in waiting[1:]:
                    art[2 * j - 1] = "/"
                lines.append("".join(art).rstrip())
                for extra in reversed(waiting[1:]):
                    del lanes[extra]
        graph = "".join("* " if i == column else "| " for i in range(len(lanes)))
        marks = _turn_marks(turn, head=head, active=active, resent=resent)
        message = quote((turn.message or "").strip().splitlines()[0]) if (turn.message or "").strip() else ""
        mark_text = f"  [{', '.join(marks)}]" if marks else ""
        lines.append(f"{graph}turn {turn.number}  {short_id(turn.id)}  {message}{mark_text}".rstrip())
        lanes[column] = turn.parent
        below = "".join("  " if lanes[i] is None else "| " for i in range(len(lanes)))
        lines.extend((below + line).rstrip() for line in _turn_body(turn, load))
        if turn.parent is None:
            del lanes[column]
    return lines


__all__ = [
    "GIT_INDEX_LINE",
    "IGNORED",
    "call_lines",
    "change_block",
    "force_only_line",
    "interrupted_reason",
    "log_lines",
    "plan_lines",
    "result_lines",
    "row_line",
]

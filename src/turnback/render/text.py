"""The lines a user reads: plan previews, results, a call's diff, the log.

Functions here take model values and a ``load`` function for content;
they never read the disk or the store themselves.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Collection, Sequence

from turnback.catalog import Message, say, word
from turnback.model import OP_NOUNS, BlobId, Call, Change, FileState, OpKind, OpResult, Plan, PlanRow, Turn, short_id
from turnback.render.diff import FileDiff, clip_lines, diff_states, file_headers
from turnback.render.summary import call_title, net_changes, shown_path
from turnback.render.terminal import pad, quote

Load = Callable[[BlobId], bytes]

ACTION_CODES = {
    "restore": "action_restore",
    "trash": "action_trash",
    "skip": "action_skip",
    "not covered": "action_not_covered",
    "mark": "action_mark",
    "ref": "action_ref",
}
ACTION_WIDTH = 11  # the column a row's path starts at, in English and as wide as the widest label elsewhere


def action_label(action: str) -> str:
    """A row's action as the preview shows it (``restore``), padded to the path column."""
    return pad(say(ACTION_CODES[action]), ACTION_WIDTH)


def _describe(state: FileState | None) -> str:
    if state is None:
        return say("state_unknown")
    if state.kind == "symlink":
        return say("state_link_to", target=quote(state.target or ""))
    return word(state.describe())


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
            return [say("mode_change", old=f"{before.mode or 0:o}", new=f"{after.mode or 0:o}")]
        return []
    headers = file_headers(path, old_exists=old_exists, new_exists=new_exists)
    # render.diff_lines counts every line shown, the ---/+++ headers too (20 means 20, not 22).
    return [*headers, *clip_lines(list(diff.lines), max(1, limit - len(headers)))]


CHANGE_KIND_CODES = {
    "new": "kind_new",
    "modified": "kind_modified",
    "deleted": "kind_deleted",
    "moved": "kind_moved",
    "mode": "kind_mode",
}


def change_kind(kind: str) -> str:
    """``new``, ``modified``, ``deleted``, ``moved``, ``mode``: what a change did, as a row shows it."""
    return say(CHANGE_KIND_CODES[kind])


def change_label(change: Change, diff: FileDiff | None) -> str:
    counts = ""
    if diff is not None and not diff.binary and (diff.added or diff.removed):
        counts = f" +{diff.added} -{diff.removed}"
    folder = "/" if (change.after is not None and change.after.kind == "dir") or change.before.kind == "dir" else ""
    return f"{change_kind(change.kind)} {quote(change.path)}{folder}{counts}"


IGNORED = Message("ignored_not_shown")


def in_parentheses(text: str, note: Message | str) -> str:
    """``TEXT (NOTE)``: a row and what it says about itself."""
    return say("with_note", text=text, note=note)


def call_lines(
    call: Call,
    turn_number: int | None,
    load: Load,
    limit: int,
    *,
    hidden: Collection[str] = (),
    hide_error: bool = False,
    notes: Callable[[Change], Message | None] | None = None,
) -> list[str]:
    """``call ID  edit src/a.py  (turn 2)`` and each change's diff; a *hidden* path shows no contents.

    *hide_error*: the call is about an ignored file, and its error message may quote that file. *notes*: a
    change's note, if any (whose it may be, when another call ran meanwhile).
    """
    where = say("in_turn", number=turn_number) if turn_number is not None else ""
    lines = [f"call {short_id(call.id)}  {call_title(call)}{where}"]
    if call.cut_short:
        lines.append(say("call_cut_short"))
    if call.status == "failed":
        error = say("call_failed_hidden", why=IGNORED) if hide_error else None
        lines.append(error or say("call_failed", error=quote(word(call.error or ""))))
    if any(change.evicted for change in call.changes):
        lines.append(say("call_copy_dropped"))
    for change in call.changes:
        if change.reverted:
            lines.append(say("change_reverted", path=quote(change.path)))
            continue
        if change.not_covered or change.evicted:
            why = change.not_covered or Message("copy_evicted_long")
            lines.append(
                in_parentheses(
                    f"{change_kind(change.kind)} {quote(change.path)}", Message("not_covered_because", why=why)
                )
            )
            continue
        if change.path in hidden:
            folder = "/" if "dir" in (change.before.kind, change.after.kind if change.after else "") else ""
            lines.append(in_parentheses(f"{change_kind(change.kind)} {quote(change.path)}{folder}", IGNORED))
            continue
        label = change_label(change, diff_states(change.before, change.after, load))
        note = notes(change) if notes is not None else None
        lines.append(in_parentheses(label, note) if note is not None else label)
        lines.extend(change_block(change.path, change.before, change.after, load, limit))
    return lines


def row_line(row: PlanRow, *, with_result: bool = False) -> str:
    action = row.action
    if row.ref is not None and action == "ref":
        return f"{action_label(action)} {quote(row.ref.text())}"
    text = f"{action_label(action)} {shown_path(row.path, outside=row.outside)}"
    # What the row leaves there decides the slash; a row that removes something names what it removes.
    shown = row.target if row.target is not None and row.target.exists else row.expect
    if shown is not None and shown.kind == "dir":
        text += "/"
    reason = row.note if with_result and row.note else row.reason
    if reason and (action in ("skip", "not covered", "mark") or with_result or row.conflict):
        text = in_parentheses(text, reason)
    return text


def plan_lines(plan: Plan, load: Load, *, diff_limit: int, hidden: Collection[str] = ()) -> list[str]:
    """The preview: a header per turn, then a row per path, then conflict diffs and warnings."""
    lines: list[str] = []
    rows_by_turn: dict[str | None, list[PlanRow]] = {}
    for row in plan.rows:
        rows_by_turn.setdefault(row.turn_id, []).append(row)
    for section in plan.sections:
        lines.append(word(section.title))
        lines.extend(row_line(row) for row in rows_by_turn.pop(section.turn_id, []))
    for rest in rows_by_turn.values():
        lines.extend(row_line(row) for row in rest)
    for row in plan.rows:
        for warning in row.warnings:
            lines.append(say("row_warning", path=quote(row.path), warning=warning))
    if plan.kind == "revert":  # the diff it writes back, asked about before it is written (a clean one too)
        for row in plan.rows:
            if (row.conflict or row.acts) and row.path not in hidden:
                block = change_block(row.path, row.expect, row.target, load, diff_limit)
                if block:
                    lines.append(say("revert_diff_header", path=quote(row.path)))
                    lines.extend(block)
    if any(row.action == "ref" for row in plan.rows):
        lines.append(say("git_index_unchanged"))
    lines.extend(word(note) for note in plan.notes)
    return lines


_RESULT_VERBS = {
    "undo": Message("op_undone"),
    "revert": Message("op_reverted"),
    "rollback": Message("op_rolled_back"),
    "resend": Message("op_reverted"),
    "redo": Message("op_redone"),
}


def op_noun(kind: OpKind) -> Message:
    """An operation's kind (``undo``, ``revert``...) as the noun that names it."""
    return OP_NOUNS[kind]


def result_message(result: OpResult) -> Message:
    """What an operation did, as one message: ``undone: 1 file restored, 1 file moved to TRASH/``."""
    plan = result.plan
    done = [row for row in plan.rows if row.status == "done"]
    # A folder put back is not a file: "7 files restored" for 6 files and their folder would miscount.
    back = [row for row in done if row.action == "restore" and row.target is not None]
    restored = sum(1 for row in back if row.target is not None and row.target.kind != "dir")
    folders_back = len(back) - restored
    trashed = sum(1 for row in done if row.action == "trash" and row.expect is not None and row.expect.kind != "dir")
    folders = sum(1 for row in done if row.action == "trash" and row.expect is not None and row.expect.kind == "dir")
    marked = sum(1 for row in done if row.action == "mark")
    refs = sum(1 for row in done if row.action == "ref")
    parts: list[Message] = []
    if restored:
        parts.append(Message("files_restored", count=restored))
    if folders_back:
        parts.append(Message("folders_restored", count=folders_back))
    if trashed:
        parts.append(Message("files_trashed", count=trashed, trash=quote(result.trash_dir or "")))
    if folders:
        parts.append(Message("folders_removed", count=folders))
    if refs:
        parts.append(Message("refs_moved", count=refs))
    if marked:
        parts.append(Message("already_as_before", count=marked))
    if parts:
        line = Message("result_parts", verb=_RESULT_VERBS[plan.kind], parts=Message("comma_list", items=tuple(parts)))
        if result.trash_dir and not trashed:
            return Message("result_replaced_in_trash", line=line, trash=quote(result.trash_dir))
        return line
    if plan.kind == "resend":
        return Message("no_file_reverted")
    return Message("op_changed_nothing", what=OP_NOUNS[plan.kind])


def result_lines(result: OpResult) -> list[str]:
    """``undone: 1 file restored, 1 file moved to TRASH/, 1 ref moved`` and each row that did not go through."""
    plan = result.plan
    lines = []
    if result.resumed:
        lines.append(say("finished_interrupted", what=OP_NOUNS[plan.kind], op=short_id(plan.id)))
    lines.append(word(result_message(result)))
    for row in plan.rows:
        if row.status in ("skipped", "failed"):
            label = (
                "result_failed"
                if row.status == "failed"
                else ("action_not_covered" if row.action == "not covered" else "result_skipped")
            )
            shown = shown_path(row.path, outside=row.outside)
            lines.append(in_parentheses(f"{pad(say(label), ACTION_WIDTH)} {shown}", row.note or row.reason or ""))
    # Notes last: they speak of the rows above them ("1 change could not be reverted (above)").
    lines.extend(word(note) for note in result.notes)
    return lines


def action_name(plan: Plan) -> Message:
    """What confirming *plan* does, by the product's labels: a revert is ``Revert`` or ``Delete`` (it only
    removes what the call made), ``Restore Anyway`` or ``Delete Anyway`` with ``--anyway``; else its kind."""
    if plan.kind != "revert":
        return OP_NOUNS[plan.kind]
    acting = [row for row in plan.rows if row.action in ("restore", "trash")]
    deletes = bool(acting) and all(row.action == "trash" for row in acting)
    if plan.force and any(row.conflict for row in acting):
        return Message("label_delete_anyway" if deletes else "label_restore_anyway")
    return Message("label_delete" if deletes else "label_revert")


def confirm_prompt(plan: Plan) -> str:
    """``undo? y = yes, n = no``: the question asked before *plan* is applied."""
    return say("confirm_prompt", action=action_name(plan))


def force_only_line(plan: Plan) -> str:
    """``undo changed nothing: 1 path acts only with --force; turnback undo --force acts on it``."""
    flag = "--force" if plan.kind == "undo" else "--anyway"
    command = (
        "turnback undo --force" if plan.kind == "undo" else f"turnback revert {short_id(plan.call_id or '')} --anyway"
    )
    return say(
        "force_only_changed_nothing",
        what=OP_NOUNS[plan.kind],
        count=len(plan.force_only_rows),
        flag=flag,
        command=command,
    )


def interrupted_reason(turn: Turn) -> Message:
    """Why a turn is marked interrupted: the one way it happens is that its holding process ended."""
    if turn.holder_pid is not None:
        return Message("turn_holder_ended_pid", pid=turn.holder_pid)
    return Message("turn_holder_ended")


def _turn_marks(turn: Turn, *, head: str | None, active: Collection[str], resent: Collection[str]) -> list[str]:
    marks = []
    if turn.id == head:
        marks.append(say("mark_head"))
    if turn.id in resent:
        marks.append(say("mark_resent"))
    elif turn.id not in active:
        marks.append(say("mark_abandoned"))
    if turn.status == "running":
        marks.append(say("mark_running"))
    elif turn.status == "interrupted":
        marks.append(say("mark_interrupted", why=interrupted_reason(turn)))
    if turn.undone == "yes":
        marks.append(say("mark_undone"))
    elif turn.undone == "partly":
        marks.append(say("mark_partly_undone"))
    return marks


ChangeNotes = Callable[[Call], Callable[[Change], "Message | None"]]
"""Per call, whose each of its changes may be (another call, of any session, ran meanwhile), if anyone's."""


def _noted_paths(turn: Turn, notes: ChangeNotes | None) -> dict[str, Message]:
    noted: dict[str, Message] = {}
    for call in turn.calls if notes is not None else ():
        note_of = notes(call) if notes is not None else None
        for change in call.changes:
            note = note_of(change) if note_of is not None else None
            if note is not None:
                noted.setdefault(change.path, note)
    return noted


def _turn_body(turn: Turn, load: Load, notes: ChangeNotes | None = None) -> list[str]:
    lines = []
    for call in turn.calls:
        status = ""
        if call.cut_short:
            status = say("call_status_cut_short")
        elif call.status == "failed":
            status = say("call_status_failed")
        if any(c.evicted for c in call.changes):
            status += say("call_status_evicted")
        elif turn.undone != "yes" and call.changes and all(c.reverted for c in call.changes):
            # A call taken back on its own (a revert); an undone turn's calls are all taken back, said once.
            status += say("call_status_reverted", label=Message("label_reverted"))
        lines.append(f"  {short_id(call.id)}  {call_title(call)}{status}")
    noted = _noted_paths(turn, notes)
    for change in net_changes(turn.calls, load):
        if change.after.kind == "dir" or change.before.kind == "dir":
            continue
        counts = "" if change.binary or change.kind == "mode" else f" +{change.added} -{change.removed}"
        shown = shown_path(change.path, outside=change.outside)
        if change.not_covered:
            counts = say("not_covered_cannot_undo", why=change.not_covered)
        line = f"    {change_kind(change.kind)} {shown}{counts}"
        note = noted.get(change.path)
        lines.append(in_parentheses(line, note) if note is not None else line)
    return lines


def job_end(call: Call) -> str:
    """How a job that no longer runs ended: failed to run, exited, or was ended by a signal."""
    if call.status == "failed":
        return say("job_failed", error=quote(word(call.error or "")))
    status = call.exit_code
    if status is None:
        return say("job_ended")
    if status < 0:  # as Python reports a child a signal ended: minus the signal's number
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = "?"
        return say("job_ended_signal", signal=-status, name=name)
    return say("job_ended_exit", status=status)


def log_lines(
    turns: Sequence[Turn],
    load: Load,
    *,
    head: str | None = None,
    active: Collection[str] = (),
    resent: Collection[str] = (),
    notes: ChangeNotes | None = None,
) -> list[str]:
    """The session's history tree, newest first, drawn like ``git log --graph``, with calls and changes.

    *notes*: whose a change may be, when another call (of any session) ran meanwhile; said on its file's line.

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
        mark_text = say("turn_marks", marks=Message("comma_list", items=tuple(marks))) if marks else ""
        lines.append(
            f"{graph}{say('turn_number_shown', number=turn.number)}  {short_id(turn.id)}  {message}{mark_text}".rstrip()
        )
        lanes[column] = turn.parent
        below = "".join("  " if lanes[i] is None else "| " for i in range(len(lanes)))
        lines.extend((below + line).rstrip() for line in _turn_body(turn, load, notes))
        if turn.parent is None:
            del lanes[column]
    return lines


__all__ = [
    "ACTION_WIDTH",
    "IGNORED",
    "ChangeNotes",
    "action_label",
    "action_name",
    "call_lines",
    "change_block",
    "change_kind",
    "confirm_prompt",
    "force_only_line",
    "in_parentheses",
    "interrupted_reason",
    "job_end",
    "log_lines",
    "op_noun",
    "plan_lines",
    "result_lines",
    "result_message",
    "row_line",
]

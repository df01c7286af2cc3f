"""The turn views: ``turnback diff`` (a patch git applies), ``diff --stat``, and the end-of-turn notes.

A file ignored by the project's ``.gitignore`` files is listed, but its
contents are never printed. A path outside the project, or one the
snapshots left out, is listed apart: a patch relative to the project root
cannot carry it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from turnback.catalog import Message, say, word
from turnback.model import BlobId, FileState, Plan, RefChange, change_kind, ref_short_name, ref_value_text
from turnback.render.diff import diff_states
from turnback.render.patch import PatchFile, git_patch
from turnback.render.summary import CODE_GROUP, LINE_ORDER, LINE_WORD, NetChange, display_path, group_of
from turnback.render.terminal import display_width, escape_line, pad, quote
from turnback.render.text import IGNORED

Load = Callable[[BlobId], bytes]


def _word(kind: str) -> str:
    """``changed``, ``new``, ``deleted``, ``mode``, ``moved``: a change's kind as diff views name it."""
    return word(LINE_WORD[kind])


def _side(state: FileState, load: Load) -> tuple[bytes | None, str | None, int | None]:
    if state.kind == "file" and state.blob is not None:
        return load(state.blob), None, state.mode
    if state.kind == "symlink":
        return None, state.target, None
    return None, None, None


def _files(changes: Sequence[NetChange]) -> list[NetChange]:
    return [c for c in changes if "dir" not in (c.before.kind, c.after.kind)]


def patch_text(changes: Sequence[NetChange], ignored: set[str], load: Load) -> str:
    """A patch of the project's files that ``git apply`` accepts; ignored, outside and uncovered files left out."""
    files = []
    for change in _files(changes):
        if (
            change.outside
            or change.not_covered
            or change.path in ignored
            or "special"
            in (
                change.before.kind,
                change.after.kind,
            )
        ):
            continue
        old, old_link, old_mode = _side(change.before, load)
        new, new_link, new_mode = _side(change.after, load)
        files.append(PatchFile(change.path, old, new, old_mode, new_mode, old_link, new_link))
    return git_patch(files)


def left_out_lines(changes: Sequence[NetChange], ignored: set[str]) -> list[str]:
    """The files a patch cannot show: ignored (contents hidden), outside the project, not covered."""
    lines = []
    for change in _files(changes):
        kind = _word(change.kind)
        if change.path in ignored:
            lines.append(say("with_note", text=f"{kind} {quote(change.path)}", note=IGNORED))
        elif change.outside:
            lines.append(say("with_note", text=f"{kind} {display_path(change.path)}", note=Message("outside_project")))
        elif change.not_covered:
            why = Message("not_covered_because", why=change.not_covered)
            lines.append(say("with_note", text=f"{kind} {quote(change.path)}", note=why))
    return lines


def _counts(added: int, removed: int, *, binary: bool = False) -> str:
    if binary:
        return say("binary")
    return " ".join(part for part in (f"+{added}" if added else "", f"-{removed}" if removed else "") if part)


def refs_moved(refs: Sequence[RefChange]) -> Message:
    """``main 1a2b3c4 -> 5d6e7f8, HEAD main -> feature``: each ref a turn moved, from and to."""
    moves = tuple(
        Message(
            "ref_moved_from_to",
            name=ref_short_name(ref.name),
            before=ref_value_text(ref.before),
            after=ref_value_text(ref.after),
        )
        for ref in refs
    )
    return Message("comma_list", items=moves)


def stat_lines(changes: Sequence[NetChange], user_groups: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    """Per-group totals, then a line per file, then ``N files changed, +A -R`` (the seed's ``diff --stat``)."""
    files = [c for c in _files(changes) if not c.outside]
    if not files:
        return [say("no_files_changed")]
    totals: dict[str, list[int]] = {}
    for change in files:
        total = totals.setdefault(group_of(change.path, user_groups), [0, 0])
        total[0] += change.added
        total[1] += change.removed
    added = sum(c.added for c in files)
    removed = sum(c.removed for c in files)
    ranked = sorted(totals.items(), key=lambda item: (-(item[1][0] + item[1][1]), item[0] != CODE_GROUP, item[0]))
    rows = [(name, f"+{a}" if a else "", f"-{r}" if r else "") for name, (a, r) in ranked]
    rows.append((say("total"), f"+{added}" if added else "", f"-{removed}" if removed else ""))
    name_width = max(display_width(name) for name, _, _ in rows) + 2
    plus_width = max(len(plus) for _, plus, _ in rows) + 2
    lines = [f"{pad(name, name_width)}{plus:<{plus_width}}{minus}".rstrip() for name, plus, minus in rows]
    lines.append("")
    word_width = max(display_width(_word(c.kind)) for c in files) + 1
    path_width = max(display_width(quote(c.path)) for c in files) + 2
    for change in sorted(files, key=lambda c: (LINE_ORDER[c.kind], c.path)):
        counts = _counts(change.added, change.removed, binary=change.binary)
        lines.append(f"{pad(_word(change.kind), word_width)}{pad(quote(change.path), path_width)}{counts}".rstrip())
    lines.append(say("files_changed", count=len(files), added=added, removed=removed))
    return lines


def plan_changes(plan: Plan, load: Load) -> list[NetChange]:
    """What each path of *plan* goes through when applied: from what it holds now to what it goes back to."""
    changes = []
    for row in plan.rows:
        if row.action not in ("restore", "trash") or row.expect is None or row.target is None:
            continue
        diff = diff_states(row.expect, row.target, load)
        kind = change_kind(row.expect, row.target)
        changes.append(
            NetChange(row.path, row.expect, row.target, kind, diff.added, diff.removed, diff.binary, row.outside)
        )
    return changes


def going_back_lines(plan: Plan, load: Load, *, diff_flag: str) -> list[str]:
    """Each file's count of lines a plan adds and removes (a diffstat), and where the whole diff is."""
    files = sorted(_files(plan_changes(plan, load)), key=lambda change: change.path)  # as git diff --stat
    if not files:
        return []
    added, removed = sum(c.added for c in files), sum(c.removed for c in files)
    width = max(display_width(display_path(c.path) if c.outside else c.path) for c in files) + 2
    lines = [say("going_back", added=added, removed=removed, flag=diff_flag)]
    for change in files:
        shown = display_path(change.path) if change.outside else change.path
        lines.append(f"  {pad(shown, width)}{_counts(change.added, change.removed, binary=change.binary)}".rstrip())
    return lines


def turn_notes(changes: Sequence[NetChange], *, unasked: bool, project_root: str) -> list[Message]:
    """Lines after the end-of-turn summary: changes that cannot be undone, files outside the project, and a
    turn whose commands ran unasked."""
    notes = []
    for change in _files(changes):
        if not change.outside:
            if change.not_covered:
                notes.append(Message("cannot_be_undone", change=uncovered_change(change)))
            continue
        shown = display_path(change.path)
        if change.not_covered:
            notes.append(Message("changed_outside_not_covered", path=shown, why=change.not_covered))
        else:
            notes.append(Message("changed_outside_covered", path=shown))
    if unasked:
        files = [c for c in _files(changes) if not c.outside]
        if files:
            added = sum(c.added for c in files)
            removed = sum(c.removed for c in files)
            where = display_path(project_root)
            notes.append(Message("changed_unasked", count=len(files), added=added, removed=removed, where=where))
    return notes


def uncovered_change(change: NetChange) -> Message:
    """``deleted big.bin (not covered: REASON)``: a change turnback kept no copy for, so it cannot be undone."""
    why = Message("not_covered_because", why=change.not_covered)
    shown = Message("kind_and_path", kind=LINE_WORD[change.kind], path=display_path(change.path))
    return Message("with_note", text=shown, note=why)


_COLORS = {"+": "\033[32m", "-": "\033[31m", "@": "\033[36m", "d": "\033[1m"}
_RESET = "\033[0m"


def colorize(lines: Sequence[str]) -> list[str]:
    """Colour a patch for a terminal: additions green, removals red, hunk headers cyan, file headers bold.

    The patch's own control characters (file content) are escaped first, so only these colours reach the terminal.
    """
    out = []
    for line in map(escape_line, lines):
        if line.startswith(("+++", "---", "diff --git")):
            out.append(_COLORS["d"] + line + _RESET)
        elif line[:1] in _COLORS and line[:1] != "d":
            out.append(_COLORS[line[:1]] + line + _RESET)
        else:
            out.append(line)
    return out


__all__ = [
    "colorize",
    "going_back_lines",
    "left_out_lines",
    "patch_text",
    "plan_changes",
    "refs_moved",
    "stat_lines",
    "turn_notes",
    "uncovered_change",
]

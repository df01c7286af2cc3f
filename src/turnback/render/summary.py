"""Summaries: net changes of a turn, the end-of-turn line with groups, short descriptions.

Groups: user groups from ``[diff.groups]`` match first, in file order, then
the built-in ones, by the glob rules of :mod:`turnback.globs`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import NamedTuple

from turnback.catalog import Message, word
from turnback.globs import glob_matches
from turnback.model import BlobId, Call, Change, ChangeKind, FileState, Turn, change_kind
from turnback.render.diff import diff_states
from turnback.render.terminal import Dim, quote, shell_line

BUILTIN_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "generated",
        (
            "Cargo.lock",
            "package-lock.json",
            "npm-shrinkwrap.json",
            "yarn.lock",
            "pnpm-lock.yaml",
            "poetry.lock",
            "uv.lock",
            "Pipfile.lock",
            "Gemfile.lock",
            "composer.lock",
            "go.sum",
            "flake.lock",
            "*.snap",
            "fixtures/",
        ),
    ),
    (
        "tests",
        (
            "tests/",
            "test/",
            "__tests__/",
            "spec/",
            "*_test.go",
            "*_test.py",
            "test_*.py",
            "*.spec.ts",
            "*.spec.tsx",
            "*.spec.js",
            "*.spec.jsx",
            "*.test.ts",
            "*.test.tsx",
            "*.test.js",
            "*.test.jsx",
            "*_spec.rb",
        ),
    ),
    ("docs", ("*.md", "docs/")),
)
CODE_GROUP = "code"


def group_of(path: str, user_groups: Sequence[tuple[str, Sequence[str]]]) -> str:
    for name, globs in (*user_groups, *BUILTIN_GROUPS):
        if any(glob_matches(glob, path) for glob in globs):
            return name
    return CODE_GROUP


class NetChange(NamedTuple):
    """One path's change over a span of calls: the first before and the last after."""

    path: str
    before: FileState
    after: FileState
    kind: ChangeKind
    added: int
    removed: int
    binary: bool
    outside: bool = False
    not_covered: Message | None = None


def net_changes(calls: Sequence[Call], load: Callable[[BlobId], bytes]) -> list[NetChange]:
    """The net change of each file, link or folder over *calls* (dropping paths that ended where they began).

    A path left out of the snapshots (not covered) has no content to compare: it is kept whenever it changed.
    """
    first: dict[str, Change] = {}
    last: dict[str, Change] = {}
    for call in calls:
        for change in call.changes:
            first.setdefault(change.path, change)
            last[change.path] = change
    result = []
    for path, opening in first.items():
        closing = last[path]
        before = opening.before
        after = closing.after if closing.after is not None else closing.before
        not_covered = opening.not_covered or closing.not_covered
        if not not_covered and (opening.evicted or closing.evicted):
            not_covered = Message("copy_evicted")
        if not not_covered and (before.same_as(after) or before.kind == after.kind == "dir"):
            continue
        diff = diff_states(before, after, load) if "file" in (before.kind, after.kind) and not not_covered else None
        result.append(
            NetChange(
                path=path,
                before=before,
                after=after,
                kind=change_kind(before, after),
                added=diff.added if diff else 0,
                removed=diff.removed if diff else 0,
                binary=diff.binary if diff else not_covered is not None,
                outside=opening.outside,
                not_covered=not_covered,
            )
        )
    return result


def summary_line(changes: Sequence[NetChange], user_groups: Sequence[tuple[str, Sequence[str]]]) -> Message | None:
    """``3 files changed, +24 -7``, naming up to two groups that are not code, largest first."""
    files = [c for c in changes if "dir" not in (c.before.kind, c.after.kind) and not c.outside]
    if not files:
        return None
    added = sum(change.added for change in files)
    removed = sum(change.removed for change in files)
    line = Message("files_changed", count=len(files), added=added, removed=removed)
    totals: dict[str, list[int]] = {}
    for change in files:
        group = group_of(change.path, user_groups)
        if group == CODE_GROUP:
            continue
        total = totals.setdefault(group, [0, 0])
        total[0] += change.added
        total[1] += change.removed
    if totals:
        ranked = sorted(totals.items(), key=lambda item: (-(item[1][0] + item[1][1]), item[0]))[:2]
        named = []
        for name, (group_added, group_removed) in ranked:
            text = name
            if group_added or not group_removed:
                text += f" +{group_added}"
            if group_removed:
                text += f" -{group_removed}"
            named.append(text)
        line = Message("with_note", text=line, note=Message("comma_list", items=tuple(named)))
    return line


def display_path(path: str, home: str | None = None) -> str:
    """A project path as is; an outside (absolute) path with the home folder as ``~``; quoted as
    :func:`turnback.render.terminal.quote` quotes it."""
    home = home if home is not None else os.path.expanduser("~")
    if home and home != "/" and (path == home or path.startswith(home.rstrip("/") + "/")):
        return quote("~" + path[len(home.rstrip("/")) :])
    return quote(path)


def shown_path(path: str, *, outside: bool) -> str:
    """A recorded path as a line shows it: quoted, and an outside one with the home folder as ``~``."""
    return display_path(path) if outside else quote(path)


# Deletions first: a deletion is what a reader must not miss in "(+4 more)".
LINE_ORDER = {"deleted": 0, "modified": 1, "new": 2, "mode": 3, "moved": 4}
LINE_WORD = {
    "modified": Message("line_changed"),
    "deleted": Message("kind_deleted"),
    "new": Message("kind_new"),
    "mode": Message("kind_mode"),
    "moved": Message("kind_moved"),
}


def command_line(
    changes: Sequence[Change],
    load: Callable[[BlobId], bytes],
    *,
    shown: int = 3,
    notes: Callable[[Change], Message | None] | None = None,
) -> str:
    """``changed src/a.rs +3 -1 · deleted old.rs · new notes.md (+2 more)``: what a command changed.

    *notes*: a change's note, if any (whose it may be, when another call ran meanwhile); asked for the
    changes shown only.
    """
    files = [c for c in changes if "dir" not in (c.before.kind, c.after.kind if c.after else "")]
    if not files:
        return ""
    files.sort(key=lambda c: (LINE_ORDER[c.kind], c.path))
    items = []
    for change in files[:shown]:
        text = f"{word(LINE_WORD[change.kind])} {shown_path(change.path, outside=change.outside)}"
        if change.not_covered or change.evicted:
            text = word(Message("with_note", text=text, note=Message("action_not_covered")))
        elif (
            change.kind == "modified" and change.before.kind == "file" and change.after and change.after.kind == "file"
        ):
            diff = diff_states(change.before, change.after, load)
            if not diff.binary:
                text += f" +{diff.added} -{diff.removed}"
        note = notes(change) if notes is not None else None
        if note is not None:
            text = word(Message("with_note", text=text, note=note))
        items.append(text)
    line = " · ".join(items)
    if len(files) > shown:
        line += word(Message("n_more_in_parentheses", count=len(files) - shown))
    return Dim(line)


_VERBS = {
    "new": "describe_add",
    "modified": "describe_change",
    "deleted": "describe_delete",
    "mode": "describe_mode",
    "moved": "describe_move",
}


def describe_changes(changes: Sequence[NetChange]) -> str:
    """``change a.txt and add notes.md`` for a turn without a message."""
    items = [
        word(Message(_VERBS[change.kind], path=shown_path(change.path, outside=change.outside)))
        for change in changes
        if change.after.kind != "dir"
    ]
    if not items:
        return word(Message("no_file_changes"))
    if len(items) > 3:
        items = [*items[:2], word(Message("n_more", count=len(items) - 2))]
    if len(items) == 1:
        return items[0]
    return word(Message("a_and_b", first=Message("comma_list", items=tuple(items[:-1])), last=items[-1]))


def turn_title(turn: Turn, load: Callable[[BlobId], bytes]) -> str:
    """The first line of the turn's message, else a description of what it changed."""
    if turn.message and turn.message.strip():
        first_line = turn.message.strip().splitlines()[0]
        return quote(first_line if len(first_line) <= 72 else first_line[:71] + "…")
    return describe_changes(net_changes(turn.calls, load))


def _command_words(raw: str | None) -> list[str]:
    try:
        words = json.loads(raw or "{}").get("command") or []
    except (ValueError, AttributeError):
        return []
    return [str(word) for word in words]


def command_text(call: Call) -> str:
    """A command call's command line, cut to 60 characters."""
    text = shell_line(_command_words(call.input))
    return text if len(text) <= 60 else text[:59] + "…"


def commands_not_undone(calls: Sequence[Call]) -> Message | None:
    """The preview's one line saying that the commands among *calls* had effects no undo takes back (None: none)."""
    names = list(dict.fromkeys(command_text(call) for call in calls if call.kind in ("command", "job")))
    if not names:
        return None
    more = (Message("n_more_in_parentheses", count=len(names) - 5),) if len(names) > 5 else ()
    return Message("commands_not_undone", commands=Message("comma_list", items=tuple(names[:5])), more=more)


def call_title(call: Call) -> str:
    """``edit src/a.py``, ``move a.txt -> b.txt``, ``exec make test``: the tool and what it acted on."""
    if call.kind in ("command", "job"):
        return f"{'job' if call.kind == 'job' else 'exec'} {command_text(call)}"
    files = [
        c for c in call.changes if not (c.before.kind == "absent" and c.after is not None and c.after.kind == "dir")
    ]
    paths = [c.path for c in files] or [c.path for c in call.changes]
    if call.tool == "move" and len(files) >= 2:
        return f"move {quote(files[-2].path)} -> {quote(files[-1].path)}"
    if not paths:
        return quote(call.tool)
    shown = ", ".join(quote(path) for path in paths[:3]) + (f" (+{len(paths) - 3} more)" if len(paths) > 3 else "")
    return f"{quote(call.tool)} {shown}"


__all__ = [
    "BUILTIN_GROUPS",
    "LINE_ORDER",
    "LINE_WORD",
    "NetChange",
    "call_title",
    "command_line",
    "command_text",
    "commands_not_undone",
    "describe_changes",
    "display_path",
    "group_of",
    "net_changes",
    "shown_path",
    "summary_line",
    "turn_title",
]

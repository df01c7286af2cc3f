"""Summaries: net changes of a turn, the end-of-turn line with groups, short descriptions.

Groups: user groups from ``[diff.groups]`` match first, in file order, then
the built-in ones. A glob without ``/`` matches a file name in any folder;
one that ends in ``/`` matches every file below a folder of that name; any
other matches the whole path from the project root.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from turnback.model import BlobId, Call, ChangeKind, FileState, Turn, change_kind
from turnback.render.diff import diff_states

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


def glob_matches(glob: str, path: str) -> bool:
    parts = path.split("/")
    if glob.endswith("/"):
        folder = glob.rstrip("/")
        depth = folder.count("/") + 1
        folders = parts[:-1]
        return any(fnmatchcase("/".join(folders[i : i + depth]), folder) for i in range(len(folders) - depth + 1))
    if "/" not in glob:
        return fnmatchcase(parts[-1], glob)
    return fnmatchcase(path, glob)


def group_of(path: str, user_groups: Sequence[tuple[str, Sequence[str]]]) -> str:
    for name, globs in (*user_groups, *BUILTIN_GROUPS):
        if any(glob_matches(glob, path) for glob in globs):
            return name
    return CODE_GROUP


@dataclass(frozen=True, slots=True)
class NetChange:
    """One path's change over a span of calls: the first before and the last after."""

    path: str
    before: FileState
    after: FileState
    kind: ChangeKind
    added: int
    removed: int
    binary: bool
    moved_from: str | None = None


def net_changes(calls: Sequence[Call], load: Callable[[BlobId], bytes]) -> list[NetChange]:
    """The net change of each file, link or folder over *calls* (dropping paths that ended where they began)."""
    first: dict[str, FileState] = {}
    last: dict[str, FileState] = {}
    for call in calls:
        for change in call.changes:
            first.setdefault(change.path, change.before)
            last[change.path] = change.after if change.after is not None else change.before
    result = []
    for path, before in first.items():
        after = last[path]
        if before.same_as(after) and before.kind != "dir":
            continue
        if before.kind == after.kind == "dir":
            continue
        diff = diff_states(before, after, load) if "file" in (before.kind, after.kind) else None
        result.append(
            NetChange(
                path=path,
                before=before,
                after=after,
                kind=change_kind(before, after),
                added=diff.added if diff else 0,
                removed=diff.removed if diff else 0,
                binary=diff.binary if diff else False,
            )
        )
    return result


def summary_line(changes: Sequence[NetChange], user_groups: Sequence[tuple[str, Sequence[str]]]) -> str:
    """``3 files changed, +24 -7``, naming up to two groups that are not code, largest first."""
    files = [change for change in changes if change.before.kind != "dir" and change.after.kind != "dir"]
    if not files:
        return ""
    added = sum(change.added for change in files)
    removed = sum(change.removed for change in files)
    line = f"{len(files)} file{'s' if len(files) != 1 else ''} changed, +{added} -{removed}"
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
        line += f" ({', '.join(named)})"
    return line


_VERBS = {
    "new": "add",
    "modified": "change",
    "deleted": "delete",
    "mode": "change the mode of",
    "moved": "move",
}


def describe_changes(changes: Sequence[NetChange]) -> str:
    """``change a.txt and add notes.md`` for a turn without a message."""
    items = [f"{_VERBS[change.kind]} {change.path}" for change in changes if change.after.kind != "dir"]
    if not items:
        return "no file changes"
    if len(items) > 3:
        items = [*items[:2], f"{len(items) - 2} more"]
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


def turn_title(turn: Turn, load: Callable[[BlobId], bytes]) -> str:
    """The first line of the turn's message, else a description of what it changed."""
    if turn.message and turn.message.strip():
        first_line = turn.message.strip().splitlines()[0]
        return first_line if len(first_line) <= 72 else first_line[:71] + "…"
    return describe_changes(net_changes(turn.calls, load))


def call_title(call: Call) -> str:
    """``edit src/a.py``, ``move a.txt -> b.txt``: the tool and the paths it wrote."""
    files = [
        c for c in call.changes if not (c.before.kind == "absent" and c.after is not None and c.after.kind == "dir")
    ]
    paths = [c.path for c in files] or [c.path for c in call.changes]
    if call.tool == "move" and len(files) >= 2:
        return f"move {files[-2].path} -> {files[-1].path}"
    if not paths:
        return call.tool
    shown = ", ".join(paths[:3]) + (f" (+{len(paths) - 3} more)" if len(paths) > 3 else "")
    return f"{call.tool} {shown}"


__all__ = [
    "BUILTIN_GROUPS",
    "NetChange",
    "call_title",
    "describe_changes",
    "glob_matches",
    "group_of",
    "net_changes",
    "summary_line",
    "turn_title",
]

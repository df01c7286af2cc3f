"""Unified diffs and line counts between two versions of a file.

Lines split on ``\\n`` only (a lone ``\\r`` is part of its line, as git sees
it), a last line without a newline gets ``\\ No newline at end of file``,
and content that is not UTF-8 text, or holds a NUL, is binary: it is never
printed, only ``Binary files differ`` with the sizes.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import NamedTuple

from turnback.catalog import say
from turnback.model import BlobId, FileState
from turnback.render.terminal import Dim, quote

CONTEXT = 3
MAX_DIFF_BYTES = 8 << 20
NO_NEWLINE = "\\ No newline at end of file"


def is_binary(data: bytes) -> bool:
    if b"\0" in data[:8192]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` kept; only ``\\n`` ends a line."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


class FileDiff(NamedTuple):
    """The diff of one path: its hunk lines (no file headers), counts, and whether it is binary."""

    binary: bool
    lines: tuple[str, ...]
    added: int
    removed: int
    old_size: int
    new_size: int
    too_large: bool = False

    @property
    def binary_line(self) -> str:
        """What is shown instead of lines: binary content, or text too large to diff."""
        old, new = human_size(self.old_size), human_size(self.new_size)
        return say("files_differ_too_large" if self.too_large else "binary_files_differ", old=old, new=new)


def _range(start: int, length: int) -> str:
    if length == 1:
        return str(start + 1)
    if length == 0:
        return f"{start},0"
    return f"{start + 1},{length}"


def _emit(prefix: str, line: str, out: list[str]) -> None:
    if line.endswith("\n"):
        out.append(prefix + line[:-1])
    else:
        out.append(prefix + line)
        out.append(NO_NEWLINE)


Opcode = tuple[str, int, int, int, int]


def _opcodes(a: list[str], b: list[str]) -> list[Opcode]:
    """difflib's opcodes from *a* to *b*, matching only what lies between their common first and last lines.

    SequenceMatcher is quadratic in what it compares; an edit of a few lines in
    a long file (or a thousand such files after a bulk change) compares just those.
    """
    start = 0
    limit = min(len(a), len(b))
    while start < limit and a[start] == b[start]:
        start += 1
    end = 0
    while end < limit - start and a[-1 - end] == b[-1 - end]:
        end += 1
    middle = difflib.SequenceMatcher(None, a[start : len(a) - end], b[start : len(b) - end], autojunk=False)
    codes: list[Opcode] = [("equal", 0, start, 0, start)] if start else []
    for tag, i1, i2, j1, j2 in middle.get_opcodes():
        codes.append((tag, i1 + start, i2 + start, j1 + start, j2 + start))
    if end:
        codes.append(("equal", len(a) - end, len(a), len(b) - end, len(b)))
    if len(codes) > 1 and codes[0][0] == codes[1][0] == "equal":  # the middle began with what was trimmed
        first, second = codes[0], codes.pop(1)
        codes[0] = ("equal", first[1], second[2], first[3], second[4])
    if len(codes) > 1 and codes[-1][0] == codes[-2][0] == "equal":
        last, before = codes.pop(), codes[-1]
        codes[-1] = ("equal", before[1], last[2], before[3], last[4])
    return codes


def _grouped(codes: list[Opcode], context: int) -> list[list[Opcode]]:
    """The change hunks with *context* lines around each, as ``SequenceMatcher.get_grouped_opcodes`` makes them."""
    codes = list(codes) or [("equal", 0, 1, 0, 1)]
    if codes[0][0] == "equal":
        tag, i1, i2, j1, j2 = codes[0]
        codes[0] = tag, max(i1, i2 - context), i2, max(j1, j2 - context), j2
    if codes[-1][0] == "equal":
        tag, i1, i2, j1, j2 = codes[-1]
        codes[-1] = tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)
    groups: list[list[Opcode]] = []
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > context * 2:  # a long stretch between changes ends one hunk
            group.append((tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)))
            groups.append(group)
            group = []
            i1, j1 = max(i1, i2 - context), max(j1, j2 - context)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        groups.append(group)
    return groups


def diff_bytes(old: bytes | None, new: bytes | None) -> FileDiff:
    """The diff from *old* to *new* (``None``: the file does not exist on that side)."""
    old_data, new_data = old or b"", new or b""
    if is_binary(old_data) or is_binary(new_data) or len(old_data) > MAX_DIFF_BYTES or len(new_data) > MAX_DIFF_BYTES:
        return FileDiff(True, (), 0, 0, len(old_data), len(new_data))
    a = split_lines(old_data.decode("utf-8"))
    b = split_lines(new_data.decode("utf-8"))
    out: list[str] = []
    added = removed = 0
    for group in _grouped(_opcodes(a, b), CONTEXT):
        first, last = group[0], group[-1]
        out.append(f"@@ -{_range(first[1], last[2] - first[1])} +{_range(first[3], last[4] - first[3])} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for line in a[i1:i2]:
                    _emit(" ", line, out)
                continue
            for line in a[i1:i2]:
                _emit("-", line, out)
                removed += 1
            for line in b[j1:j2]:
                _emit("+", line, out)
                added += 1
    return FileDiff(False, tuple(out), added, removed, len(old_data), len(new_data))


def diff_states(before: FileState | None, after: FileState | None, load: Callable[[BlobId], bytes]) -> FileDiff:
    """The diff between two recorded states; content over ``MAX_DIFF_BYTES`` is not even loaded."""
    sizes = [(state.size or 0) if state is not None and state.kind == "file" else 0 for state in (before, after)]
    if max(sizes) > MAX_DIFF_BYTES:
        return FileDiff(True, (), 0, 0, sizes[0], sizes[1], too_large=True)

    def content(state: FileState | None) -> bytes | None:
        if state is None or state.kind != "file" or state.blob is None:
            return None
        return load(state.blob)

    return diff_bytes(content(before), content(after))


def file_headers(path: str, *, old_exists: bool, new_exists: bool) -> list[str]:
    """``--- a/PATH`` and ``+++ b/PATH``, the name quoted as git quotes it when it holds a control character."""
    return [
        f"--- {quote('a/' + path)}" if old_exists else "--- /dev/null",
        f"+++ {quote('b/' + path)}" if new_exists else "+++ /dev/null",
    ]


def clip_lines(lines: list[str], limit: int) -> list[str]:
    """The first *limit* lines, then ``… N more lines``; a *limit* of 0 shows no diff at all."""
    if limit == 0:
        return []
    if len(lines) <= limit:
        return lines
    more = len(lines) - limit
    return [*lines[:limit], Dim(say("more_lines", count=more))]


__all__ = [
    "FileDiff",
    "clip_lines",
    "diff_bytes",
    "diff_states",
    "file_headers",
    "human_size",
    "is_binary",
    "split_lines",
]

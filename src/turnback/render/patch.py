"""A patch in git's own ``diff --git`` format, for ``git apply`` and ``git apply -R``.

``turnback diff`` into a pipe must be a patch that git takes back exactly:
``turnback diff | git apply -R`` on the after-state gives the before-state,
byte for byte, with modes and symbolic links. So this module writes what
``git diff --binary --full-index`` writes, and where git has a choice it
takes the one that applies in both directions:

- every file that is not text gets a ``GIT binary patch`` with a forward and a
  reverse ``literal`` hunk (never a ``delta``, which would need the other side's
  content to be reproduced exactly by us), and full 40-hex blob ids in the
  ``index`` line, because git refuses a binary patch without them and checks
  both ids before and after it writes;
- text is what :func:`turnback.render.diff.diff_bytes` makes (lines split on
  ``\\n`` only, ``\\ No newline at end of file``), with content that holds a
  NUL anywhere, or is too large to diff, sent as binary instead;
- a change between a file and a symbolic link is a deletion then a creation,
  as git writes it, since one hunk cannot change what kind of thing a path is;
- paths are quoted as git quotes them with ``core.quotePath`` on (its
  default), so non-ASCII and control bytes never reach the patch raw.

Blob ids are SHA-1 ids, which is what ``git apply`` expects outside a
repository and in every SHA-1 repository.
"""

from __future__ import annotations

import base64
import hashlib
import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from turnback.render.diff import diff_bytes, is_binary
from turnback.render.terminal import octal

MODE_FILE = 0o100644
MODE_EXECUTABLE = 0o100755
MODE_SYMLINK = 0o120000
NULL_ID = "0" * 40
BINARY_LINE_BYTES = 52
# git deflates binary patches at its default core.compression, Z_BEST_SPEED; any
# level applies, the same one keeps our output equal to git's for the same content.
ZLIB_LEVEL = 1


@dataclass(frozen=True, slots=True)
class PatchFile:
    """One path's two sides; a side is content, a link target, or nothing (``None`` for both)."""

    path: str
    old: bytes | None
    new: bytes | None
    old_mode: int | None = None
    new_mode: int | None = None
    old_link: str | None = None
    new_link: str | None = None

    def __post_init__(self) -> None:
        if self.old is not None and self.old_link is not None:
            raise ValueError(f"{self.path}: the old side is both content and a symbolic link")
        if self.new is not None and self.new_link is not None:
            raise ValueError(f"{self.path}: the new side is both content and a symbolic link")


@dataclass(frozen=True, slots=True)
class _Side:
    """What one side of a path holds, as git sees it: a mode and the bytes it hashes."""

    mode: int
    data: bytes


def _side(content: bytes | None, mode: int | None, link: str | None) -> _Side | None:
    if link is not None:
        # git stores a link as its target, with no trailing newline, under mode 120000.
        return _Side(MODE_SYMLINK, os.fsencode(link))
    if content is None:
        return None
    # git records one permission bit, "executable"; any x bit in the mode counts.
    return _Side(MODE_EXECUTABLE if mode is not None and mode & 0o111 else MODE_FILE, content)


def blob_id(data: bytes) -> str:
    """The git (SHA-1) blob id of *data*, which ``git apply`` checks a binary patch against."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _needs_quote(byte: int) -> bool:
    return byte < 0x20 or byte == 0x7F or byte >= 0x80 or byte in (0x22, 0x5C)


def quote_path(prefix: str, path: str) -> str:
    """*prefix* + *path* as git writes it in a patch: C-style in double quotes when a byte needs it.

    git quotes ``"`` and ``\\``, control bytes, DEL and (with ``core.quotePath``,
    its default) every byte from 0x80 up, as ``\\a``-style escapes or octal.
    A name that is not UTF-8 arrives with surrogate escapes and goes back to
    its real bytes through :func:`os.fsencode`, so git recreates that very name.
    """
    raw = os.fsencode(prefix + path)
    if not any(_needs_quote(byte) for byte in raw):
        return raw.decode("ascii")
    out = ['"']
    for byte in raw:
        out.append(octal(byte) if _needs_quote(byte) else chr(byte))
    out.append('"')
    return "".join(out)


def _file_label(prefix: str, path: str) -> str:
    """A ``---``/``+++`` name; git ends one that holds a space with a tab, so GNU patch reads it whole."""
    label = quote_path(prefix, path)
    return label + "\t" if " " in label else label


def _base85_lines(data: bytes) -> list[str]:
    """git's base85 lines: a length letter (A-Z: 1-26 bytes, a-z: 27-52), then the bytes.

    git encodes every group of four bytes as five characters, a short last
    group padded with zero bytes, which is ``b85encode(pad=True)``; the length
    letter tells the reader how many of the decoded bytes are real.
    """
    lines = []
    for start in range(0, len(data), BINARY_LINE_BYTES):
        chunk = data[start : start + BINARY_LINE_BYTES]
        size = len(chunk)
        letter = chr(ord("A") + size - 1) if size <= 26 else chr(ord("a") + size - 27)
        lines.append(letter + base64.b85encode(chunk, pad=True).decode("ascii"))
    return lines


def _literal(data: bytes) -> list[str]:
    return [f"literal {len(data)}", *_base85_lines(zlib.compress(data, ZLIB_LEVEL)), ""]


def _is_text(data: bytes) -> bool:
    # is_binary looks for a NUL in the first 8 KiB only; a text hunk must hold none at all.
    return not is_binary(data) and b"\0" not in data


def _section(path: str, old: _Side | None, new: _Side | None) -> list[str]:
    """The lines of one ``diff --git`` section: a creation, a deletion, or a change of one kind of thing."""
    old_data = old.data if old is not None else b""
    new_data = new.data if new is not None else b""
    lines = [f"diff --git {quote_path('a/', path)} {quote_path('b/', path)}"]
    if old is None and new is not None:
        lines.append(f"new file mode {new.mode:06o}")
    elif new is None and old is not None:
        lines.append(f"deleted file mode {old.mode:06o}")
    elif old is not None and new is not None and old.mode != new.mode:
        lines += [f"old mode {old.mode:06o}", f"new mode {new.mode:06o}"]
    if old_data == new_data and old is not None and new is not None:
        return lines  # a mode change alone: git writes no index line and no hunk
    old_id = blob_id(old_data) if old is not None else NULL_ID
    new_id = blob_id(new_data) if new is not None else NULL_ID
    index = f"index {old_id}..{new_id}"
    if old is not None and new is not None and old.mode == new.mode:
        index += f" {old.mode:06o}"
    lines.append(index)

    diff = diff_bytes(old_data, new_data) if _is_text(old_data) and _is_text(new_data) else None
    if diff is None or diff.binary:
        lines.append("GIT binary patch")
        lines += _literal(new_data)
        lines += _literal(old_data)  # the reverse hunk, which `git apply -R` uses
        return lines
    if diff.lines:  # an empty file created or deleted has no hunk, and then git writes no ---/+++
        lines.append(f"--- {_file_label('a/', path)}" if old is not None else "--- /dev/null")
        lines.append(f"+++ {_file_label('b/', path)}" if new is not None else "+++ /dev/null")
        lines += diff.lines
    return lines


def git_patch(files: Sequence[PatchFile]) -> str:
    """One patch text for all files, in the order given, that ``git apply`` (and ``git apply -R``) accepts.

    A file whose two sides are equal (content, link target and git mode) is
    left out, so an empty patch means nothing git can see changed.
    """
    lines: list[str] = []
    for file in files:
        old = _side(file.old, file.old_mode, file.old_link)
        new = _side(file.new, file.new_mode, file.new_link)
        if old == new:
            continue
        if old is not None and new is not None and (old.mode == MODE_SYMLINK) != (new.mode == MODE_SYMLINK):
            lines += _section(file.path, old, None)
            lines += _section(file.path, None, new)
        else:
            lines += _section(file.path, old, new)
    return "".join(line + "\n" for line in lines)


__all__ = ["PatchFile", "blob_id", "git_patch", "quote_path"]

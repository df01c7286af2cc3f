"""Project-relative paths, validated once when built.

A :data:`RelPath` is a POSIX path relative to a project root: no leading
``/``, no empty, ``.`` or ``..`` component, no NUL, and never inside a
``.git`` folder. Names that are not UTF-8 are carried as ``str`` with
``surrogateescape`` (as :func:`os.fsdecode` gives them), so they round-trip
to the same bytes on disk.
"""

from __future__ import annotations

import os
from typing import NewType

from turnback.errors import UnsafePathError, UsageError

RelPath = NewType("RelPath", str)

GIT_DIR_NAME = ".git"


def make_rel_path(text: str) -> RelPath:
    """Validate *text* as a project-relative path and return it as a :data:`RelPath`."""
    if not text:
        raise UsageError("an empty path names no file")
    if "\0" in text:
        raise UnsafePathError(f"the path {text!r} contains a NUL character")
    if text.startswith("/"):
        raise UnsafePathError(f"the path {text} is absolute; a project path is relative to the project root")
    parts = text.split("/")
    if parts[-1] == "":
        parts = parts[:-1]  # "dir/" names the folder itself
    for part in parts:
        if part in ("", ".", ".."):
            raise UnsafePathError(f"the path {text} has an empty, '.' or '..' part")
        if part == GIT_DIR_NAME:
            raise UnsafePathError(f"{text} is inside a .git folder, which turnback never writes")
    return RelPath("/".join(parts))


def split_rel_path(path: RelPath) -> tuple[list[str], str]:
    """Split *path* into its parent folder names and its own name."""
    parts = path.split("/")
    return parts[:-1], parts[-1]


def parent_paths(path: RelPath) -> list[RelPath]:
    """The folders above *path* inside the project, outermost first."""
    parts = path.split("/")
    return [RelPath("/".join(parts[:i])) for i in range(1, len(parts))]


def absolute_user_path(cwd: str, user_path: str) -> str:
    """A path a user typed (absolute, or relative to *cwd*), made absolute lexically.

    ``..`` is collapsed without following links; *cwd* is taken as its real
    path. A NUL or an empty path is refused.
    """
    if "\0" in user_path:
        raise UnsafePathError(f"the path {user_path!r} contains a NUL character")
    if not user_path:
        raise UsageError("an empty path names no file")
    return os.path.normpath(os.path.join(os.path.realpath(cwd), user_path))


def resolve_user_path(root: str, cwd: str, user_path: str) -> RelPath:
    """Turn a path a user typed (absolute, or relative to *cwd*) into a path relative to *root*.

    *root* is the project's real path. The path is made absolute lexically
    (``..`` is collapsed without following links, so a link inside the
    project can never carry the result outside it); a result outside *root*
    is refused before anything is read or written.
    """
    absolute = absolute_user_path(cwd, user_path)
    root = os.path.normpath(root)
    if absolute == root:
        raise UsageError(f"{user_path} is the project root itself, not a file in it")
    if not absolute.startswith(root.rstrip("/") + "/"):
        raise UnsafePathError(f"{user_path} is outside the project {root}; turnback refuses to write it")
    return make_rel_path(absolute[len(root.rstrip("/")) + 1 :])


__all__ = [
    "GIT_DIR_NAME",
    "RelPath",
    "absolute_user_path",
    "make_rel_path",
    "parent_paths",
    "resolve_user_path",
    "split_rel_path",
]

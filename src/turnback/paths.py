"""Project-relative paths, validated once when built.

A :data:`RelPath` is a POSIX path relative to a project root: no leading
``/``, no empty, ``.`` or ``..`` component, no NUL, and never inside a
``.git`` folder. Names that are not UTF-8 are carried as ``str`` with
``surrogateescape`` (as :func:`os.fsdecode` gives them), so they round-trip
to the same bytes on disk.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import NewType

from turnback.catalog import Message
from turnback.errors import UnsafePathError, UsageError

RelPath = NewType("RelPath", str)

GIT_DIR_NAME = ".git"
DATABASE_URL_SCHEMES = ("postgresql", "postgres")


def make_rel_path(text: str) -> RelPath:
    """Validate *text* as a project-relative path and return it as a :data:`RelPath`."""
    if not text:
        raise UsageError(Message("empty_path"))
    if "\0" in text:
        raise UnsafePathError(Message("path_has_nul", path=repr(text)))
    if text.startswith("/"):
        raise UnsafePathError(Message("path_absolute", path=text))
    parts = text.split("/")
    if parts[-1] == "":
        parts = parts[:-1]  # "dir/" names the folder itself
    for part in parts:
        if part in ("", ".", ".."):
            raise UnsafePathError(Message("path_dot_part", path=text))
        if part == GIT_DIR_NAME:
            raise UnsafePathError(Message("path_in_git", path=text))
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
        raise UnsafePathError(Message("path_has_nul", path=repr(user_path)))
    if not user_path:
        raise UsageError(Message("empty_path"))
    return os.path.normpath(os.path.join(os.path.realpath(cwd), user_path))


def is_database_url(location: str) -> bool:
    """Whether a store's *location* names a PostgreSQL database (``postgresql://…``) rather than a folder."""
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme.lower() in DATABASE_URL_SCHEMES


def shown_location(location: str) -> str:
    """A store's *location* as a message may show it: a database URL without its password."""
    if not is_database_url(location):
        return location
    parts = urllib.parse.urlsplit(location)
    if parts.password is None:
        return location
    netloc = (f"{parts.username}@" if parts.username else "") + (parts.hostname or "")
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


__all__ = [
    "GIT_DIR_NAME",
    "RelPath",
    "absolute_user_path",
    "is_database_url",
    "make_rel_path",
    "parent_paths",
    "shown_location",
    "split_rel_path",
]

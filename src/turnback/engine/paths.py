"""Where a path typed by a user or agent may be read or written: the one rule for the CLI, hooks and MCP.

A path is made absolute against the caller's folder; the store itself is
never touched, nor a ``.git`` folder; a path outside the project is
written per ``mode`` (copied, or recorded as not covered), or refused by a
confined engine (an MCP server's root). A path that names no place on this
host (``~/x``, ``C:\\x``, a URL) is refused: taken literally it would make a
folder ``~`` or ``C:\\...`` in the project, where nobody looks.

A confined engine serves tools shaped like the reference filesystem
server's, which act on what a link inside the root leads to; everywhere
else turnback acts on the link itself and refuses a path through one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from turnback.capture.calls import Location
from turnback.catalog import Message
from turnback.errors import UnsafePathError, UsageError
from turnback.fsio import ROOT_TREE, Tree
from turnback.model import Project
from turnback.paths import GIT_DIR_NAME, RelPath, absolute_user_path, make_rel_path

_WINDOWS_PATH = re.compile(r"^[A-Za-z]:([\\/]|$)")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def foreign_path_problem(path: str) -> Message | None:
    """Why *path* is not a path on this host (a ``~``, a Windows drive, a URL), else ``None``."""
    if path == "~" or path.startswith(("~/", "~\\")):
        return Message("path_tilde", path=path)
    if _WINDOWS_PATH.match(path):
        return Message("path_windows", path=path)
    if _URL.match(path):
        return Message("path_url", path=path)
    return None


class PathPolicy:
    """The rule for every path a front end hands the engine; *mode_of* tells a project's ``mode``."""

    def __init__(self, store_home: str, *, confined: bool, mode_of: Callable[[Project], str]):
        self.store_home = os.path.realpath(store_home)
        self.confined = confined  # paths outside a project are refused whatever the mode (an MCP server's roots)
        self._mode_of = mode_of

    def in_store(self, real: str) -> bool:
        """Whether the real path *real* is the store folder or inside it."""
        return real == self.store_home or real.startswith(self.store_home + os.sep)

    def project_root(self, root: str) -> str:
        """The real path of a folder to register as a project; refused when it is no folder, or in the store."""
        real = os.path.realpath(root)
        if not os.path.isdir(real):
            raise UsageError(Message("project_not_a_folder", path=root))
        if self.in_store(real):
            raise UnsafePathError(Message("project_in_store", path=root))
        return real

    def _absolute(self, project: Project, path: str, cwd: str | None, *, follow_last: bool) -> tuple[str, bool]:
        """*path* made absolute; in a confined engine, with the links inside the root it passes through
        followed (*follow_last* False keeps a link at the end: a move or delete acts on the link itself).
        And whether its folder is a real path (its links followed): then it need not be resolved again."""
        problem = foreign_path_problem(path)
        if problem:
            raise UsageError(problem)
        absolute = absolute_user_path(cwd or project.root, path)
        if not self.confined:
            return absolute, False
        head, tail = (absolute, "") if follow_last else os.path.split(absolute)
        real = os.path.realpath(head)
        root = project.root.rstrip("/")
        if real != project.root and not real.startswith(root + "/"):
            return absolute, False  # a link out of the root: left as it is, to be refused
        return (os.path.join(real, tail) if tail else real), True

    def locate(self, project: Project, path: str, cwd: str | None, *, follow_last: bool = True) -> Location:
        """Where a path typed by a user or agent is written: in the project, or outside it per ``mode``.

        Outside the project, ``auto`` and ``full`` keep a copy, ``manual`` and
        ``cautious`` keep none (the write is recorded as not covered). The
        store itself, and any ``.git`` folder, are refused.
        """
        absolute, resolved = self._absolute(project, path, cwd, follow_last=follow_last)
        parent, name = os.path.split(absolute)
        real = os.path.join(os.path.realpath(parent), name) if name and not resolved else absolute
        if self.in_store(real):
            raise UnsafePathError(Message("path_in_store_untouched", path=path))
        root = project.root.rstrip("/")
        if absolute == root or real == root:
            raise UsageError(Message("path_is_project_root", path=path))
        if absolute.startswith(root + "/"):
            return Location(Tree(project.root), make_rel_path(absolute[len(root) + 1 :]))
        if real.startswith(root + "/"):
            raise UnsafePathError(Message("path_through_link_into_project", path=path))
        if self.confined:
            raise UnsafePathError(Message("path_outside_allowed", path=path, root=project.root))
        mode = self._mode_of(project)
        uncovered = None if mode in ("auto", "full") else Message("mode_copies_nothing_outside", mode=mode)
        return Location(ROOT_TREE, make_rel_path(real.lstrip("/")), outside=True, uncovered=uncovered)

    def browse(
        self, project: Project, path: str, cwd: str | None, *, follow_last: bool = True
    ) -> tuple[Tree, RelPath | None]:
        """Where a read-only tool looks: the project's tree and the path in it (``None``: the root itself)."""
        absolute, _ = self._absolute(project, path, cwd, follow_last=follow_last)
        root = project.root.rstrip("/")
        if absolute == root:
            return Tree(project.root), None
        if not absolute.startswith(root + "/"):
            raise UnsafePathError(Message("path_outside_allowed", path=path, root=project.root))
        rel = make_rel_path(absolute[len(root) + 1 :])
        if self.in_store(absolute):
            raise UnsafePathError(Message("path_in_store", path=path))
        return Tree(project.root), rel

    def unlisted(self, project: Project) -> Callable[[str], bool]:
        """Whether a path of *project* (relative to its root) is never listed, walked or searched: a ``.git``
        folder, or the store when it lives in the project."""
        store = self.store_in(project)
        return lambda rel: os.path.basename(rel) == GIT_DIR_NAME or rel == store

    def store_in(self, project: Project) -> str | None:
        """The store's folder as a path of *project*, when the store lives inside it (a scan skips it)."""
        root = project.root.rstrip("/") + "/"
        return self.store_home[len(root) :] if self.store_home.startswith(root) else None

    def workdir(self, project: Project, cwd: str | None) -> str:
        """The real folder a command runs in; a confined engine refuses one outside the project, or in the store.

        Its real path, not the path given: a link inside the project may lead anywhere.
        """
        workdir = os.path.realpath(cwd or project.root)
        if self.confined:
            if self.in_store(workdir):
                raise UnsafePathError(Message("path_in_store_untouched", path=cwd))
            root = project.root.rstrip("/")
            if workdir != root and not workdir.startswith(root + "/"):
                raise UnsafePathError(Message("workdir_outside_allowed", path=cwd, root=project.root))
        return workdir


__all__ = ["PathPolicy", "foreign_path_problem"]

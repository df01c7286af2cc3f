"""The three glob rules of ``[diff.groups]`` and ``snapshot.exclude``.

A glob without ``/`` matches a file name in any folder; a glob that ends in
``/`` matches every path below a folder of that name; any other glob matches
the whole path from the project root.
"""

from __future__ import annotations

from fnmatch import fnmatchcase


def glob_matches(glob: str, path: str) -> bool:
    """Whether project path *path* matches *glob* by the three rules."""
    parts = path.split("/")
    if glob.endswith("/"):
        folder = glob.rstrip("/")
        depth = folder.count("/") + 1
        folders = parts[:-1]
        return any(fnmatchcase("/".join(folders[i : i + depth]), folder) for i in range(len(folders) - depth + 1))
    if "/" not in glob:
        return fnmatchcase(parts[-1], glob)
    return fnmatchcase(path, glob)


def folder_matches(glob: str, folder: str) -> bool:
    """Whether everything below the folder *folder* is matched by *glob* (so a scan need not enter it)."""
    if glob.endswith("/"):
        return glob_matches(glob, folder + "/x")
    return glob_matches(glob, folder)


__all__ = ["folder_matches", "glob_matches"]

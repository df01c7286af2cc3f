"""Safe file I/O: the only code that writes a project's files or the trash.

Every access goes through :class:`Tree`, which walks from an open folder of
the root with ``dir_fd`` and ``O_NOFOLLOW`` one name at a time, so no
symbolic link on the way is ever followed and nothing outside the root is
read or written. Writes are atomic: a temp file in the same folder, fsync,
rename over the name, fsync the folder.

Its parts: :mod:`~turnback.fsio.tree` (the walks, reads and atomic writes), :mod:`~turnback.fsio.batch`
(syncs made in batches), :mod:`~turnback.fsio.entry` (what a path is) and :mod:`~turnback.fsio.steps` (the
fault injection the reliability tests use to prove an interrupted or failing undo resumes and loses nothing).
"""

from __future__ import annotations

from turnback.fsio.batch import SYNCFS_MIN, OpenFolders, SyncBatch
from turnback.fsio.entry import Entry, current_umask, default_file_mode
from turnback.fsio.steps import STEPS
from turnback.fsio.tree import (
    ROOT_TREE,
    TEMP_PREFIX,
    TEMP_SUFFIX,
    StagedFile,
    Tree,
    ensure_private_dir,
    link_file,
    open_regular_at,
    write_temp,
)

__all__ = [
    "ROOT_TREE",
    "STEPS",
    "SYNCFS_MIN",
    "TEMP_PREFIX",
    "TEMP_SUFFIX",
    "Entry",
    "OpenFolders",
    "StagedFile",
    "SyncBatch",
    "Tree",
    "current_umask",
    "default_file_mode",
    "ensure_private_dir",
    "link_file",
    "open_regular_at",
    "write_temp",
]

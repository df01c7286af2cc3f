"""What changed between two snapshots, in the order a record wants it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from turnback.capture.scan.entries import Entry, Snapshot


class TreeChange(NamedTuple):
    path: str
    before: Entry | None
    after: Entry | None


def diff_snapshots(before: Snapshot, after: Snapshot, paths: Iterable[str] | None = None) -> list[TreeChange]:
    """What changed from *before* to *after* (at *paths* only, when a partial scan knows where), in the order
    a record wants it.

    Removed paths come deepest first and created paths outermost first, so
    an undo (which takes changes back last first) makes a folder before
    what goes in it and empties a folder before removing it.
    """
    removed, modified, created = [], [], []
    for path in before.keys() | after.keys() if paths is None else paths:
        old, new = before.get(path), after.get(path)
        if old is new:
            continue  # the scan kept the entry it had: the common case, and the cheapest test
        if old is not None and new is not None:
            if not old.same_content(new):
                modified.append(TreeChange(path, old, new))
        elif new is None:
            removed.append(TreeChange(path, old, None))
        else:
            created.append(TreeChange(path, None, new))
    removed.sort(key=lambda c: (-c.path.count("/"), c.path))
    modified.sort(key=lambda c: c.path)
    created.sort(key=lambda c: (c.path.count("/"), c.path))
    return removed + modified + created

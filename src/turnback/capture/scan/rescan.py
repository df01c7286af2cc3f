"""Partial rescans: a snapshot brought up to date by visiting only the paths a watcher reports changed (or
that ``find_changes`` found).

What a rescan costs grows with the paths it visits, not with the tree: it records into a new layer on the
previous snapshot (``layers.Layered``: no copy of it), and what it must know of the whole tree (the files read
again every time, what is below a folder gone) is kept with the full snapshot the layers share.
"""

from __future__ import annotations

import os

from turnback.capture.holds import BlobHold
from turnback.capture.scan.entries import Entry, ScanResult, ScanRules, Snapshot
from turnback.capture.scan.layers import Layered
from turnback.capture.scan.walk import DIR_FLAGS, BatchedWriter, NotKnown, Scanner, open_folder
from turnback.store.api import StoreBackend


def _units(previous: Layered, changed: dict[str, bool], rules: ScanRules, *, walked: bool) -> dict[str, bool]:
    """The paths a partial scan visits (and whether all below each, too) for the paths a watcher reports
    (or, *walked*, the paths a walk found changed).

    A path below a folder the snapshot does not list as a folder (a new one,
    an excluded one whose fingerprint it keeps) makes that folder the unit;
    for a watcher's paths, racy files are read again as a full scan would, and
    files with more than one name are visited every time (a write through
    another name is reported under that name only). A walk has compared the
    stat of each of those already.
    """
    units: dict[str, bool] = {}
    for path, deep in changed.items():
        parts = path.split("/")
        if not path or ".git" in parts or any("/".join(parts[:i]) in rules.skip for i in range(1, len(parts) + 1)):
            continue
        unit = path
        for i in range(1, len(parts)):
            entry = previous.get("/".join(parts[:i]))
            if entry is None or entry.kind != "dir":
                unit, deep = "/".join(parts[:i]), True
                break
        units[unit] = units.get(unit, False) or deep
    for path in () if walked else previous.reread():  # racy files; linked ones (inotify names only the link used)
        units.setdefault(path, False)
    return units


def _below(path: str, folders: set[str]) -> bool:
    while "/" in path:
        path = path.rsplit("/", 1)[0]
        if path in folders:
            return True
    return False


def rescan_tree(
    store: StoreBackend,
    root: str,
    rules: ScanRules,
    previous: Snapshot,
    changed: dict[str, bool],
    *,
    now_ns: int,
    walked: bool = False,
    hold: BlobHold | None = None,
) -> ScanResult | None:
    """*previous* brought up to date by visiting only *changed* (path: whether all below it too), as a
    watcher reports them (or, *walked*, as ``find_changes`` does); ``None`` when only a full scan can tell.
    *hold*: as ``scan_tree``'s."""
    snapshot = Layered.over(previous)
    units = _units(snapshot, changed, rules, walked=walked)
    writer = BatchedWriter(store, hold=hold)
    scanner = Scanner(rules, previous, writer.put, now_ns, None, root)
    scanner.snapshot = snapshot
    cleared: set[str] = set()  # folders whose earlier contents go: gone, no longer folders, or walked anew
    emptied: list[str] = []  # those of them that were folders (nothing is below a path that was none)
    walks: list[str] = []
    touched: set[str] = set(units)
    try:
        root_fd = os.open(root, DIR_FLAGS)
        try:
            for unit in sorted(units, key=lambda p: (p.count("/"), p)):  # outermost first
                if _below(unit, cleared):
                    continue  # inside a folder walked whole
                old = scanner.snapshot.pop(unit, None)
                parent, _, name = unit.rpartition("/")
                parent_fd = open_folder(root_fd, parent)
                was_folder = old is not None and old.kind == "dir"
                if parent_fd is None:
                    if was_folder:
                        cleared.add(unit)
                        emptied.append(unit)
                    continue
                try:
                    scanner.scan_entry(parent_fd, name, unit)
                finally:
                    os.close(parent_fd)
                new = scanner.snapshot.get(unit)
                if new is None or new.kind != "dir":
                    if was_folder:  # what was below it goes (a file's unit has nothing below it)
                        cleared.add(unit)
                        emptied.append(unit)
                elif units[unit] or not was_folder:
                    cleared.add(unit)
                    walks.append(unit)
                    if was_folder:
                        emptied.append(unit)
            gone = {path for folder in emptied for path in snapshot.below(folder)}
            for path in gone:
                del snapshot[path]
            touched.update(gone)
            for unit in walks:
                folder_fd = open_folder(root_fd, unit)
                if folder_fd is not None:
                    # Walked into a dict of its own (what was below the folder was cleared above): its keys are
                    # what the walk found. The folder's own entry goes with it, for the walk to mark unreadable.
                    walked_entries: dict[str, Entry] = {unit: snapshot[unit]}
                    scanner.snapshot = walked_entries
                    try:
                        scanner.walk_from(folder_fd, unit + "/")
                    finally:
                        os.close(folder_fd)
                        scanner.snapshot = snapshot
                        snapshot.update(walked_entries)
                        touched.update(walked_entries)
        finally:
            os.close(root_fd)
    except NotKnown:
        writer.commit()
        return None
    except BaseException as exc:
        writer.abort(exc)
        raise
    writer.commit()
    return ScanResult(snapshot, scanner.files_read, scanner.bytes_read, touched)

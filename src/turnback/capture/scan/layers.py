"""A snapshot kept in memory as the stored cache is: a full snapshot, shared and never changed, and the entries
that differ from it (``Layered``).

A partial scan (the watcher's paths) starts a new layer over the last one: it copies only the entries that
differ, so a scan that visits a few paths of a 100,000-path tree costs a few paths, not a copy of the tree.
What a scan needs to know of the whole tree is kept with the full snapshot, computed once per process: the
files read again at every scan (racy, or with several names), and the paths in order (what is below a folder).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping, MutableMapping

from turnback.capture.scan.entries import Entry, Snapshot

_GONE = object()  # (a changes' value for a path not there: None; this: not in the changes at all)


class FullSnapshot:
    """A full snapshot shared by the layers built on it, with what is computed once of it."""

    __slots__ = ("_ordered", "_reread", "entries")

    def __init__(self, entries: dict[str, Entry]):
        self.entries = entries  # never changed: every layer on it, and callers holding it, read it
        self._reread: frozenset[str] | None = None
        self._ordered: list[str] | None = None

    def reread(self) -> frozenset[str]:
        """Its files a scan the watcher vouches for visits anyway: racy ones, and those with other names (a
        write through another name is reported under that name only)."""
        if self._reread is None:
            self._reread = frozenset(path for path, entry in self.entries.items() if entry.racy or entry.linked)
        return self._reread

    def below(self, folder: str) -> list[str]:
        """Its paths below *folder*."""
        if self._ordered is None:
            self._ordered = sorted(self.entries)
        prefix = folder + "/"
        start = bisect.bisect_left(self._ordered, prefix)
        end = bisect.bisect_left(self._ordered, folder + "0", start)  # "0" follows "/"
        return self._ordered[start:end]


class Layered(MutableMapping[str, Entry]):
    """A snapshot: *full*'s entries, less and replaced by *changes* (path: its entry, or None where it went)."""

    __slots__ = ("_size", "changes", "full")

    def __init__(self, full: FullSnapshot, changes: dict[str, Entry | None] | None = None):
        self.full = full
        self.changes: dict[str, Entry | None] = changes if changes is not None else {}
        size = len(full.entries)
        for path, entry in self.changes.items():
            size += (entry is not None) - (path in full.entries)
        self._size = size

    @classmethod
    def over(cls, snapshot: Snapshot) -> Layered:
        """A new layer on *snapshot* (a layer of its own: changing it leaves *snapshot* as it was)."""
        below = layered(snapshot)
        return cls(below.full, dict(below.changes))

    def __getitem__(self, path: str) -> Entry:
        entry = self.changes.get(path, _GONE)
        if entry is _GONE:
            return self.full.entries[path]
        if entry is None:
            raise KeyError(path)
        return entry  # type: ignore[return-value]  # an Entry: neither marker

    def get(self, path: str, default: Entry | None = None) -> Entry | None:  # type: ignore[override]
        entry = self.changes.get(path, _GONE)
        if entry is _GONE:
            return self.full.entries.get(path, default)
        return default if entry is None else entry  # type: ignore[return-value]

    def __contains__(self, path: object) -> bool:
        entry = self.changes.get(path, _GONE)  # type: ignore[call-overload]
        return path in self.full.entries if entry is _GONE else entry is not None

    def __setitem__(self, path: str, entry: Entry) -> None:
        if path not in self:
            self._size += 1
        self.changes[path] = entry

    def __delitem__(self, path: str) -> None:
        if path not in self:
            raise KeyError(path)
        self._size -= 1
        if path in self.full.entries:
            self.changes[path] = None
        else:
            del self.changes[path]

    def __iter__(self) -> Iterator[str]:
        changes = self.changes
        yield from (path for path in self.full.entries if path not in changes)
        yield from (path for path, entry in changes.items() if entry is not None)

    def __len__(self) -> int:
        return self._size

    def flat(self) -> dict[str, Entry]:
        """The snapshot as one plain dict (a copy: the full snapshot is shared)."""
        if not self.changes:
            return self.full.entries
        flat = dict(self.full.entries)
        for path, entry in self.changes.items():
            if entry is None:
                flat.pop(path, None)
            else:
                flat[path] = entry
        return flat

    def reread(self) -> set[str]:
        """The paths a scan the watcher vouches for visits anyway (``FullSnapshot.reread``), as they are now."""
        changes = self.changes
        found = {path for path in self.full.reread() if path not in changes}
        found.update(path for path, entry in changes.items() if entry is not None and (entry.racy or entry.linked))
        return found

    def below(self, folder: str) -> list[str]:
        """The paths below *folder*."""
        prefix = folder + "/"
        changes = self.changes
        found = [path for path in self.full.below(folder) if changes.get(path, _GONE) is not None]
        found.extend(
            path
            for path, entry in changes.items()
            if entry is not None and path.startswith(prefix) and path not in self.full.entries
        )
        return found


def flat(snapshot: Snapshot) -> dict[str, Entry]:
    """*snapshot* as one plain dict, for a scan that visits every path (a dict's lookups run at C speed)."""
    if isinstance(snapshot, Layered):
        return snapshot.flat()
    return snapshot if isinstance(snapshot, dict) else dict(snapshot)


def layered(snapshot: Mapping[str, Entry]) -> Layered:
    """*snapshot* as a ``Layered`` (itself when it is one; a full one on it, not copied, when it is a dict)."""
    if isinstance(snapshot, Layered):
        return snapshot
    return Layered(FullSnapshot(snapshot if isinstance(snapshot, dict) else dict(snapshot)))


__all__ = ["FullSnapshot", "Layered", "flat", "layered"]

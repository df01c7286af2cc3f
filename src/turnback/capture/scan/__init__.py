"""Tree snapshots of a project: a stat cache that re-reads only what changed.

- ``entries``: a snapshot's entries, the rules a scan follows and what it gives back;
- ``encoding``: a stat cache as saved (whole, or a delta from a whole one) and the ones kept decoded;
- ``layers``: a snapshot in memory as a full one and a layer of what differs, which a partial scan copies;
- ``walk``: the walk that stats every path and stores what changed;
- ``split``: a large tree's scan split over processes that only find what changed;
- ``rescan``: a partial scan, visiting only the paths a watcher (or ``split``) names;
- ``tree``: ``scan_tree``, which picks among them;
- ``diff``: what changed between two snapshots.

Callers import from here.
"""

from turnback.capture.scan.diff import TreeChange, diff_snapshots
from turnback.capture.scan.encoding import (
    Delta,
    StoredSnapshot,
    content_bytes,
    decode_snapshot,
    decode_snapshot_delta,
    encode_snapshot,
    encode_snapshot_delta,
    load_snapshot,
    remember_snapshot,
    stored_entries,
    stored_snapshot,
)
from turnback.capture.scan.entries import Entry, EntryKind, ScanResult, ScanRules, Snapshot
from turnback.capture.scan.heap import trim_heap
from turnback.capture.scan.layers import Layered, flat
from turnback.capture.scan.rescan import rescan_tree
from turnback.capture.scan.split import (
    SPLIT_MAX_PROCESSES,
    find_changes,
    holds_at_least,
    scan_processes,
    split_only_elsewhere,
)
from turnback.capture.scan.tree import SPLIT_MIN_ENTRIES, scan_tree
from turnback.capture.scan.walk import DICT_SAMPLES, FINE_RACY_WINDOW_NS, RACY_WINDOW_NS, folder_fingerprint

__all__ = [
    "DICT_SAMPLES",
    "FINE_RACY_WINDOW_NS",
    "RACY_WINDOW_NS",
    "SPLIT_MAX_PROCESSES",
    "SPLIT_MIN_ENTRIES",
    "Delta",
    "Entry",
    "EntryKind",
    "Layered",
    "ScanResult",
    "ScanRules",
    "Snapshot",
    "StoredSnapshot",
    "TreeChange",
    "content_bytes",
    "decode_snapshot",
    "decode_snapshot_delta",
    "diff_snapshots",
    "encode_snapshot",
    "encode_snapshot_delta",
    "find_changes",
    "flat",
    "folder_fingerprint",
    "holds_at_least",
    "load_snapshot",
    "remember_snapshot",
    "rescan_tree",
    "scan_processes",
    "scan_tree",
    "split_only_elsewhere",
    "stored_entries",
    "stored_snapshot",
    "trim_heap",
]

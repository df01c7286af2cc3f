"""``scan_tree``: a snapshot of a whole tree (or one name in it), split over processes when it is large."""

from __future__ import annotations

from turnback.capture.gitindex import GitIndex
from turnback.capture.holds import BlobHold
from turnback.capture.scan.cold import scan_cold
from turnback.capture.scan.entries import ScanResult, ScanRules, Snapshot
from turnback.capture.scan.layers import flat
from turnback.capture.scan.rescan import rescan_tree
from turnback.capture.scan.split import find_changes, scan_processes
from turnback.capture.scan.walk import BatchedWriter, Scanner
from turnback.store.api import StoreBackend

# A scan of a tree this large is split over processes: a fork costs a few ms, a 50k-path walk ~0.4 s.
SPLIT_MIN_ENTRIES = 20_000


def scan_tree(
    store: StoreBackend,
    root: str,
    rules: ScanRules,
    previous: Snapshot | None,
    *,
    now_ns: int,
    only: str | None = None,
    git_index: GitIndex | None = None,
    hold: BlobHold | None = None,
) -> ScanResult:
    """Snapshot the tree at *root*, storing the content of every file whose stat changed since *previous*.

    With *only*, just that one name in *root* (a file, link, or folder and all below it). With
    *git_index*, a file git's index vouches for is recorded as its git object, not read. A first
    snapshot is read by several processes (``scan_cold``). A large tree scanned again is walked by
    several processes that only find what changed (``find_changes``); the changed paths are then
    recorded as a watcher's are. *hold*: spares what it stores from a gc until the caller releases it (in the
    transaction that keeps the result); without one, a gc meanwhile may delete what no record names yet.
    """
    previous = flat(previous) if previous is not None else None  # looked up at every path: a plain dict
    if previous and only is None and len(previous) >= SPLIT_MIN_ENTRIES and (processes := scan_processes()) > 1:
        changed = find_changes(root, rules, previous, now_ns=now_ns, processes=processes)
        if changed is not None:
            result = rescan_tree(store, root, rules, previous, changed, now_ns=now_ns, walked=True, hold=hold)
            if result is not None:
                return result
    if previous is None and only is None and (processes := scan_processes()) > 1:
        result = scan_cold(store, root, rules, now_ns=now_ns, processes=processes, git_index=git_index, hold=hold)
        if result is not None:
            return result
    writer = BatchedWriter(store, teach=previous is None and only is None, hold=hold)
    scanner = Scanner(rules, previous or {}, writer.put, now_ns, only, root, git_index)
    try:
        scanner.walk(root)
    except BaseException as exc:
        writer.abort(exc)
        raise
    writer.commit()
    return ScanResult(scanner.snapshot, scanner.files_read, scanner.bytes_read)

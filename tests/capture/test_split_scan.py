"""A full scan of a large tree split over processes (``find_changes``) records exactly what one process would.

The split is taken for trees of ``SPLIT_MIN_ENTRIES`` paths or more; these
tests lower that to 0 (and the number of folders handed out, so that the
breadth-first listing, the queue and the children all take part on small
trees) and compare, entry for entry, with the same scan in one process:
random file operations (those of the watcher's property test), an
exclusion that changes between scans, racy files, turnback's own store
inside the tree. Then what a user relies on when things go wrong: no child
process or open descriptor outlives a split scan, even one cut short; a
folder it cannot read makes it give way to a full scan, which says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import turnback
from tests.capture.test_watch import OPERATION, PROPERTY, Operation, Playground, set_old_mtimes
from tests.conftest import ROOT, TEST_KEY, unprivileged_prefix
from turnback.capture import scan
from turnback.capture.scan import ScanResult, ScanRules, Snapshot, find_changes, scan_tree, split
from turnback.catalog import Message

RULES = ScanRules(max_file_bytes=16 << 20)
RULE_SETS = (
    RULES,
    RULES._replace(exclude=("a/a/",)),
    RULES._replace(exclude=("b",)),
    RULES._replace(max_file_bytes=2, max_file_mib=0),
)


@pytest.fixture(autouse=True)
def split_small_trees(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan.tree, "SPLIT_MIN_ENTRIES", 0)
    monkeypatch.setenv("TURNBACK_SCAN_PROCESSES", "2")


@contextlib.contextmanager
def one_process() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TURNBACK_SCAN_PROCESSES", "1")
        yield


def scan_both(
    store: turnback.Store, root: Path, rules: ScanRules, previous: Snapshot, now_ns: int
) -> tuple[ScanResult, ScanResult]:
    """The same scan split over processes and in one process."""
    split = scan_tree(store, str(root), rules, previous, now_ns=now_ns)
    with one_process():
        alone = scan_tree(store, str(root), rules, previous, now_ns=now_ns)
    assert split.touched is not None, "the split scan gave way to a full one"
    assert alone.touched is None
    return split, alone


def assert_same(split: ScanResult, alone: ScanResult, previous: Snapshot) -> None:
    assert split.snapshot == alone.snapshot
    assert (split.files_read, split.bytes_read) == (alone.files_read, alone.bytes_read)
    differ = {p for p in previous.keys() | split.snapshot.keys() if previous.get(p) != split.snapshot.get(p)}
    assert split.touched is not None and differ <= split.touched  # the cache is saved as what the scan touched


@PROPERTY
@given(
    ops=st.lists(OPERATION, max_size=12),
    processes=st.sampled_from([2, 3]),
    units=st.sampled_from([1, 2, 8]),
    before=st.sampled_from(RULE_SETS),
    after=st.sampled_from(RULE_SETS),
)
@example(ops=[], processes=2, units=1, before=RULES, after=RULES)
@example(ops=[("delete", "a/a")], processes=2, units=1, before=RULES, after=RULES)
@example(ops=[("to_file", "a")], processes=3, units=2, before=RULES, after=RULES)
@example(ops=[("to_dir", "b"), ("move_in", "a/c")], processes=2, units=8, before=RULES, after=RULES)
@example(ops=[("append", "a/a/a")], processes=2, units=1, before=RULES, after=RULE_SETS[1])
@example(ops=[("append", "a/a/a")], processes=2, units=1, before=RULE_SETS[1], after=RULES)
def test_a_split_scan_records_what_one_process_records(
    engine: turnback.Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ops: list[Operation],
    processes: int,
    units: int,
    before: ScanRules,
    after: ScanRules,
) -> None:
    monkeypatch.setenv("TURNBACK_SCAN_PROCESSES", str(processes))
    monkeypatch.setattr(scan.split, "SPLIT_UNITS", units)
    future = time.time_ns() + 10**15  # nothing racy: what is unchanged is decided by its stat alone
    with tempfile.TemporaryDirectory(dir=tmp_path) as base:
        play = Playground(Path(base))
        play.watcher.notify.close()
        previous = scan_tree(engine.store, str(play.root), before, None, now_ns=future).snapshot
        for op in ops:
            play.play(op)
        split, alone = scan_both(engine.store, play.root, after, previous, future)
        assert_same(split, alone, previous)


def test_as_many_paths_gone_as_made_are_both_recorded(engine: turnback.Engine, tmp_path: Path) -> None:
    """A split scan counts the paths it came across to know whether any went: one made must not hide one gone."""
    root = tmp_path / "tree"
    make_wide_tree(root, 20, 3)
    previous = scan_tree(engine.store, str(root), RULES, None, now_ns=time.time_ns()).snapshot
    (root / "d1" / "e11" / "f0").unlink()
    (root / "d1" / "e11" / "new").write_bytes(b"made")
    shutil.rmtree(root / "d2" / "e2")  # 4 paths gone (5 in all) ...
    (root / "d3" / "e3" / "n").mkdir()  # ... and 4 made, of which the walk meets only the folder (5 met in all)
    for name in ("p", "q", "r"):
        (root / "d3" / "e3" / "n" / name).write_bytes(b"made")
    for name in ("new", "also new", "third"):
        (root / "d4" / "e4" / name).write_bytes(b"made")
    split, alone = scan_both(engine.store, root, RULES, previous, time.time_ns())
    assert_same(split, alone, previous)
    assert not {"d1/e11/f0", "d2/e2", "d2/e2/f1"} & split.snapshot.keys()
    assert {"d1/e11/new", "d3/e3/n/r", "d4/e4/also new"} <= split.snapshot.keys()


def test_a_path_gone_from_a_folder_whose_stat_did_not_change_is_still_found(
    engine: turnback.Engine, tmp_path: Path
) -> None:
    """Gone paths are looked for in the folders whose stat changed; one that went otherwise (a file system
    that keeps no folder times, a cache out of step with the tree) is not lost: the count of paths met is
    short, and the scan is done in one process instead."""
    root = tmp_path / "tree"
    make_wide_tree(root, 20, 3)
    previous = scan_tree(engine.store, str(root), RULES, None, now_ns=time.time_ns()).snapshot
    previous["d1/e11/phantom"] = previous["d1/e11/f0"]  # a path the folder's stat knows nothing of
    assert find_changes(str(root), RULES, previous, now_ns=time.time_ns(), processes=2) is None
    result = scan_tree(engine.store, str(root), RULES, previous, now_ns=time.time_ns())
    assert "d1/e11/phantom" not in result.snapshot and "d1/e11/f0" in result.snapshot


def test_a_racy_file_rewritten_with_its_size_and_mtime_is_read_again(engine: turnback.Engine, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_bytes(b"one")
    (root / "g").write_bytes(b"other")
    first = scan_tree(engine.store, str(root), RULES, None, now_ns=time.time_ns())
    assert first.snapshot["d/f"].racy  # written within the racy window of the scan
    mtime = os.stat(root / "d" / "f").st_mtime_ns
    (root / "d" / "f").write_bytes(b"two")
    os.utime(root / "d" / "f", ns=(mtime, mtime))  # same size, same mtime: only reading it tells
    split, alone = scan_both(engine.store, root, RULES, first.snapshot, time.time_ns())
    assert_same(split, alone, first.snapshot)
    assert split.snapshot["d/f"].state().blob != first.snapshot["d/f"].state().blob


def test_turnbacks_own_store_inside_the_tree_is_never_listed(engine: turnback.Engine, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / ".turnback" / "blobs").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "src" / "a.py").write_bytes(b"a = 1\n")
    set_old_mtimes(root)
    rules = RULES._replace(skip=frozenset([".turnback"]))
    previous = scan_tree(engine.store, str(root), rules, None, now_ns=time.time_ns()).snapshot
    (root / ".turnback" / "blobs" / "new").write_bytes(b"store bytes")
    (root / "src" / "b.py").write_bytes(b"b = 2\n")
    changed = find_changes(str(root), rules, previous, now_ns=time.time_ns(), processes=2)
    assert changed == {"src": False, "src/b.py": False}
    split, alone = scan_both(engine.store, root, rules, previous, time.time_ns())
    assert_same(split, alone, previous)
    assert not any(path.startswith(".turnback") for path in split.snapshot)


def make_wide_tree(root: Path, folders: int, files: int) -> None:
    for n in range(folders):
        folder = root / f"d{n % 10}" / f"e{n}"
        folder.mkdir(parents=True, exist_ok=True)
        for m in range(files):
            (folder / f"f{m}").write_bytes(b"x")
    set_old_mtimes(root)


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def child_pids() -> set[int]:
    """This process's children, running or not yet reaped (other tests may have left some of their own)."""
    pids: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            pids.update(int(pid) for pid in Path(f"/proc/self/task/{task}/children").read_text().split())
    return pids


def test_no_child_or_descriptor_outlives_a_split_scan(engine: turnback.Engine, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    make_wide_tree(root, 200, 5)
    previous = scan_tree(engine.store, str(root), RULES, None, now_ns=time.time_ns()).snapshot
    (root / "d3" / "e3" / "f0").write_bytes(b"changed")
    (root / "d4" / "e4" / "f1").unlink()
    fds, children = open_descriptors(), child_pids()
    changed = find_changes(str(root), RULES, previous, now_ns=time.time_ns(), processes=3)
    assert changed == {"d3/e3/f0": False, "d4/e4": False, "d4/e4/f1": False}
    assert open_descriptors() == fds
    assert child_pids() <= children


class CutShort(Exception):
    pass


def test_a_split_scan_cut_short_leaves_no_child(engine: turnback.Engine, tmp_path: Path) -> None:
    """A signal handler raising while the parent walks (as Ctrl-C does) ends the scan; its children go with it.

    (Its descriptors are closed too, but not all of them in every case: one that ``os.open`` returns in the
    instant the handler runs is never seen by Python code.)
    """
    root = tmp_path / "tree"
    make_wide_tree(root, 1000, 4)
    previous = scan_tree(engine.store, str(root), RULES, None, now_ns=time.time_ns()).snapshot
    children = child_pids()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, ())

    def interrupt(signum: int, frame: object) -> None:
        raise CutShort

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        for delay in (0.02, 0.01, 0.005, 0.002, 0.001):  # a slower machine needs a later signal, a faster an earlier
            signal.setitimer(signal.ITIMER_REAL, delay)
            try:
                find_changes(str(root), RULES, previous, now_ns=time.time_ns(), processes=2)
            except CutShort:
                break
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        else:
            pytest.fail("the scan always finished before the signal came")
    finally:
        signal.signal(signal.SIGALRM, old)
    assert child_pids() <= children
    assert signal.pthread_sigmask(signal.SIG_BLOCK, ()) == mask  # nothing left blocked: a ^C still ends the process


def test_ending_the_workers_of_a_scan_cut_short_right_after_one_was_reaped_kills_only_the_others() -> None:
    """A signal's handler that was due before ``reap_worker`` held the signals runs as soon as its wait returns:
    the worker is reaped but still listed. Ending the workers then forgets it (its id may be another process's
    now: never signalled) and kills and reaps the ones still running."""
    reaped = os.fork()
    if reaped == 0:
        os._exit(0)
    os.waitpid(reaped, 0)
    running = os.fork()
    if running == 0:
        time.sleep(60)
        os._exit(0)
    read, write = os.pipe()
    os.close(write)
    split.end_workers({reaped: -1, running: read})
    with pytest.raises(ChildProcessError):
        os.waitpid(running, os.WNOHANG)  # killed and reaped
    with pytest.raises(OSError):
        os.fstat(read)  # its pipe closed


UNREADABLE_SCRIPT = """
import json, sys, time
from turnback.capture import scan
from turnback.store import Store
scan.tree.SPLIT_MIN_ENTRIES = 0
root, home, previous_file, KEY = sys.argv[1:]
rules = scan.ScanRules(max_file_bytes=1 << 20)
with open(previous_file, "rb") as f:
    previous = scan.decode_snapshot(f.read())
changed = scan.find_changes(root, rules, previous, now_ns=time.time_ns(), processes=2)
with Store.open(home, key_secret=KEY, try_keyring=False) as store:
    result = scan.scan_tree(store, root, rules, previous, now_ns=time.time_ns())
locked = result.snapshot["locked"]._asdict()
print(json.dumps({"changed": changed, "touched": result.touched is not None, "locked": locked}))
"""


def test_an_unreadable_folder_makes_a_split_scan_give_way_to_a_full_one(
    engine: turnback.Engine, tmp_path: Path, home: Path
) -> None:
    prefix = unprivileged_prefix()
    if prefix is None:
        pytest.skip("running as root without setpriv: root reads a mode-000 folder")
    root = tmp_path / "tree"
    make_wide_tree(root, 20, 2)
    (root / "locked").mkdir()
    (root / "locked" / "inside").write_bytes(b"secret")
    previous = scan_tree(engine.store, str(root), RULES, None, now_ns=time.time_ns()).snapshot
    snapshot_file = tmp_path / "previous"
    snapshot_file.write_bytes(scan.encode_snapshot(previous))
    os.chmod(root / "locked", 0)
    try:
        proc = subprocess.run(
            [*prefix, sys.executable, "-c", UNREADABLE_SCRIPT, str(root), str(home), str(snapshot_file), TEST_KEY],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
            timeout=60,
        )
    finally:
        os.chmod(root / "locked", 0o755)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["changed"] is None  # only a full scan records what it could not read
    assert found["touched"] is False  # ... and the full scan is what ran
    reason = str(Message.loads(found["locked"]["reason"]))
    assert (found["locked"]["kind"], reason) == ("uncovered", "unreadable: Permission denied")


def test_scans_stay_in_one_process_when_asked_or_when_threads_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNBACK_SCAN_PROCESSES", "3")
    assert scan.scan_processes() == 3
    monkeypatch.setenv("TURNBACK_SCAN_PROCESSES", "1")
    assert scan.scan_processes() == 1
    monkeypatch.delenv("TURNBACK_SCAN_PROCESSES")
    assert scan.scan_processes() == min(len(os.sched_getaffinity(0)), scan.SPLIT_MAX_PROCESSES)
    monkeypatch.setenv("TURNBACK_SCAN_PROCESSES", "3")
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert scan.scan_processes() == 1  # a fork copies one thread: whatever another one held stays held
    finally:
        release.set()
        other.join()


def test_a_file_tool_write_a_moment_ago_does_not_keep_scans_in_one_process(
    engine: turnback.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "p"
    root.mkdir()
    session = engine.new_session(str(root))
    with engine.tool_turn(session.id, gap_s=0):
        engine.write(session.id, "a.txt", b"one\n", cwd=str(root))  # leaves its staged-write thread waiting
    assert any(thread.name == "turnback-staged-write" for thread in threading.enumerate())
    monkeypatch.setenv("TURNBACK_SCAN_PROCESSES", "3")
    assert scan.scan_processes() == 3

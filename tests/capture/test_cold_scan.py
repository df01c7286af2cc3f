"""A first snapshot read by forked workers (``scan_cold``) records and stores exactly what one process would.

The workers get the folders the scanning process hands out (``SPLIT_UNITS`` is lowered so that small trees
are split too); each test then checks what a user relies on, against the same scan in one process where
that is what tells: every entry, every blob (the same ids, each opening to the file's bytes), a file changed
while a worker reads it, a folder swapped for a link to outside the tree while the walk is on its way to it,
an unreadable file, a worker that dies; and that no worker or descriptor outlives a scan.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

import turnback
from tests.capture.test_split_scan import child_pids, open_descriptors
from tests.capture.test_watch import set_old_mtimes
from tests.conftest import ROOT, TEST_KEY, unprivileged_prefix
from turnback.capture import scan
from turnback.capture.scan import ScanResult, ScanRules, cold, scan_tree, split, walk
from turnback.catalog import Message
from turnback.store.blobs import CHUNK_SIZE, KIND_CHUNKS, KIND_DATA_DICT

MAX_FILE_BYTES = 2 * CHUNK_SIZE + (1 << 20)
RULES = ScanRules(max_file_bytes=MAX_FILE_BYTES, max_file_mib=MAX_FILE_BYTES >> 20)
LARGE_BYTES = 2 * CHUNK_SIZE + 123  # three chunks, under the limit
SMALL_FILES = 600  # at the top, where the scanning process walks itself: enough to train the dictionary on


@pytest.fixture(autouse=True)
def workers_take_part(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(split, "SPLIT_UNITS", 4)


def make_tree(root: Path, outside: Path) -> None:
    """Small files near the top, nested folders below (what the workers get), and one of each thing a scan
    treats its own way: a chunked file, one over the limit, an empty one, two with the same bytes, links,
    a FIFO."""
    root.mkdir()
    for n in range(SMALL_FILES):
        (root / f"top{n}.py").write_bytes(f"def f{n}(x):\n    return x * {n}  # small file {n}\n".encode())
    for a in range(6):
        for b in range(4):
            folder = root / f"a{a}" / f"b{b}" / "c"
            folder.mkdir(parents=True)
            for m in range(3):
                (folder / f"f{m}.txt").write_bytes(f"folder {a}/{b}, file {m}\n".encode() * (m + 1))
    deep = root / "a0" / "b0" / "c"
    (deep / "large.bin").write_bytes(os.urandom(LARGE_BYTES))
    with open(deep / "over.bin", "wb") as over:  # sparse: over the limit, so never read
        over.truncate(MAX_FILE_BYTES + 1)
    (deep / "empty").write_bytes(b"")
    (root / "a1" / "same1").write_bytes(b"the same bytes\n")
    (root / "a2" / "b1" / "same2").write_bytes(b"the same bytes\n")
    (root / "a3" / "b2" / "link").symlink_to(outside)
    (root / "a3" / "b2" / "dangling").symlink_to("nowhere")
    os.mkfifo(root / "a4" / "fifo")
    set_old_mtimes(root)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"outside the project")
    make_tree(tmp_path / "tree", outside)
    return tmp_path / "tree"


def cold_scan(store: turnback.Store, root: Path, rules: ScanRules = RULES) -> ScanResult:
    result = cold.scan_cold(store, str(root), rules, now_ns=time.time_ns(), processes=2)
    assert result is not None, "a worker failed"
    return result


def one_process(store: turnback.Store, root: Path, rules: ScanRules = RULES) -> ScanResult:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TURNBACK_SCAN_PROCESSES", "1")
        return scan_tree(store, str(root), rules, None, now_ns=time.time_ns())


def files_in(root: Path) -> Iterator[tuple[str, bytes]]:
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) <= MAX_FILE_BYTES:
                with open(path, "rb") as f:
                    yield os.path.relpath(path, root), f.read()


def test_nothing_of_the_scan_but_its_result_holds_the_snapshot(engine: turnback.Engine, tree: Path) -> None:
    """Once the scan has returned, only its result refers to the snapshot, even with the cycle collector off (it
    may not run for a long while): at 120k entries a snapshot kept alive that way was 95 MB more in the process
    (the wait for the background copy of git objects, which decodes the next cache beside it)."""
    gc.collect()
    gc.disable()
    try:
        result = cold_scan(engine.store, tree)
        holders = [
            type(holder).__name__
            for holder in gc.get_referrers(result.snapshot)
            if holder is not result and not isinstance(holder, types.FrameType)
        ]
    finally:
        gc.enable()
    assert result.files_read > SMALL_FILES  # the workers read the folders below the top
    assert holders == []


def test_workers_record_and_store_what_one_process_does(engine: turnback.Engine, tree: Path) -> None:
    store = engine.store
    forks: list[int] = []
    real_fork = cold.fork_worker
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cold, "fork_worker", lambda *args: (forks.append(1), real_fork(*args)))
        split_result = cold_scan(store, tree)
    assert len(forks) == 2  # the scan was split: two workers read the folders below the top
    blobs = store.blobs.ids()
    alone = one_process(store, tree)
    assert split_result.snapshot == alone.snapshot  # every path, its stat, content id, link target, reason
    assert (split_result.files_read, split_result.bytes_read) == (alone.files_read, alone.bytes_read)
    assert store.blobs.ids() == blobs  # one process stores not one blob the workers had not stored
    for path, data in files_in(tree):  # each file's blob opens to its bytes
        assert store.blobs.read_bytes(split_result.snapshot[path].blob) == data, path
    snapshot = split_result.snapshot
    assert snapshot["a0/b0/c/large.bin"].size == LARGE_BYTES
    assert snapshot["a1/same1"].blob == snapshot["a2/b1/same2"].blob
    assert snapshot["a3/b2/link"].kind == "symlink" and snapshot["a3/b2/link"].target == str(tree.parent / "outside")
    over_reason = Message.loads(snapshot["a0/b0/c/over.bin"].reason or "")
    assert (snapshot["a0/b0/c/over.bin"].kind, over_reason.code) == ("uncovered", "larger_than_max_file_mib")
    assert snapshot["a4/fifo"].kind == "uncovered"
    kinds = {row["kind"] for row in store.db.all("SELECT kind FROM blobs")}  # type: ignore[attr-defined]
    assert {KIND_CHUNKS, KIND_DATA_DICT} <= kinds  # the large file chunked; small ones against the dictionary


def test_an_excluded_folder_is_fingerprinted_by_a_worker_as_by_one_process(engine: turnback.Engine, tree: Path) -> None:
    rules = RULES._replace(exclude=("a2/b1/",))
    split_result = cold_scan(engine.store, tree, rules)
    assert split_result.snapshot["a2/b1"].kind == "uncovered"
    assert not any(path.startswith("a2/b1/") for path in split_result.snapshot)
    assert split_result.snapshot == one_process(engine.store, tree, rules).snapshot


def test_a_file_changed_while_a_worker_reads_it_is_read_again_and_kept_as_racy(
    engine: turnback.Engine, tree: Path
) -> None:
    """The worker reads a file, sees its stat change under it, reads it again; one that keeps changing is kept
    as read but racy (read again by the next scan), as one process does."""
    appends = {"a1/b1/c/f0.txt": 1, "a5/b3/c/f2.txt": walk.READ_ATTEMPTS}  # changed once / on every read
    real_chunks = walk._chunks

    def changing(fd: int, also: object = None) -> Iterator[bytes]:
        path = os.path.relpath(os.readlink(f"/proc/self/fd/{fd}"), tree)
        for piece in real_chunks(fd, also):  # type: ignore[arg-type]
            yield piece
            if appends.get(path, 0) > 0:  # a write by someone else, to the real file, while it is read
                appends[path] -= 1
                with open(tree / path, "ab") as out:
                    out.write(b"appended while read\n")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(walk, "_chunks", changing)  # the workers are forked after this: they read through it
        snapshot = cold_scan(engine.store, tree).snapshot
    once, always = snapshot["a1/b1/c/f0.txt"], snapshot["a5/b3/c/f2.txt"]
    assert engine.store.blobs.read_bytes(once.blob) == (tree / "a1/b1/c/f0.txt").read_bytes()  # the second read
    assert once.size == (tree / "a1/b1/c/f0.txt").stat().st_size  # (racy too: it was written just now)
    assert always.racy  # what was read is kept, and the next scan reads it again whatever its stat says
    assert engine.store.blobs.read_bytes(always.blob).startswith(b"folder 5/3, file 2\n")
    assert (tree / "a5/b3/c/f2.txt").read_bytes().endswith(b"appended while read\n" * walk.READ_ATTEMPTS)


def test_a_folder_swapped_for_a_link_to_outside_is_never_followed(engine: turnback.Engine, tree: Path) -> None:
    """A folder a worker listed is replaced by a link to a folder outside the tree before it enters it: the
    walk opens it without following links, so nothing outside is read or recorded, as in one process."""
    outside = tree.parent / "outside"
    real_enter = walk.Scanner.enter_folder

    def swapped(self: walk.Scanner, fd: int, prefix: str, name: str) -> int | None:
        if prefix + name == "a5/b2/c":
            (tree / "a5/b2/c").rename(tree.parent / "moved-away")
            (tree / "a5/b2/c").symlink_to(outside)
        return real_enter(self, fd, prefix, name)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(walk.Scanner, "enter_folder", swapped)
        snapshot = cold_scan(engine.store, tree).snapshot
    entry = snapshot["a5/b2/c"]
    assert entry.kind == "uncovered"  # listed as a folder, not entered: its open refused the link
    assert Message.loads(entry.reason or "").code == "unreadable_because"
    assert not any(path.startswith("a5/b2/c/") for path in snapshot)
    secret = engine.store.crypto.content_id(b"outside the project")
    assert not engine.store.blobs.has(secret)
    assert not any(entry.blob == secret for entry in snapshot.values())


UNREADABLE_SCRIPT = """
import json, sys, time
from turnback.capture import scan
from turnback.capture.scan import cold, split
from turnback.store import Store
split.SPLIT_UNITS = 4
root, home, KEY = sys.argv[1:]
rules = scan.ScanRules(max_file_bytes=1 << 20)
with Store.open(home, key_secret=KEY, try_keyring=False) as store:
    result = cold.scan_cold(store, root, rules, now_ns=time.time_ns(), processes=2)
    alone = scan.scan_tree(store, root, rules, None, now_ns=time.time_ns(), only=None)
    blob = store.blobs.read_bytes(result.snapshot["a2/b0/c/f1.txt"].blob)
print(json.dumps({
    "locked": result.snapshot["a3/b1/c/f0.txt"]._asdict(),
    "same": result.snapshot == alone.snapshot,
    "readable": blob.decode(),
}))
"""


def test_an_unreadable_file_is_recorded_as_one_process_records_it(
    engine: turnback.Engine, tree: Path, home: Path
) -> None:
    prefix = unprivileged_prefix()
    if prefix is None:
        pytest.skip("running as root without setpriv: root reads a mode-000 file")
    os.chmod(tree / "a3/b1/c/f0.txt", 0)
    try:
        proc = subprocess.run(
            [*prefix, sys.executable, "-c", UNREADABLE_SCRIPT, str(tree), str(home), TEST_KEY],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "TURNBACK_SCAN_PROCESSES": "1"},
            timeout=120,
        )
    finally:
        os.chmod(tree / "a3/b1/c/f0.txt", 0o644)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["same"] is True
    assert found["locked"]["kind"] == "uncovered" and found["locked"]["blob"] is None
    assert str(Message.loads(found["locked"]["reason"])) == "unreadable: permission denied"
    assert found["readable"] == "folder 2/0, file 1\n" * 2  # the files around it are read as ever


def test_a_worker_that_dies_makes_the_scan_run_in_one_process(
    engine: turnback.Engine, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_walk = cold._SealingScanner.walk_unit

    def dies(self: cold._SealingScanner, fd: int, prefix: str) -> None:
        if prefix == "a3/":
            os._exit(9)  # killed halfway through its folders
        real_walk(self, fd, prefix)

    descriptors, children = open_descriptors(), child_pids()
    monkeypatch.setattr(cold._SealingScanner, "walk_unit", dies)
    assert cold.scan_cold(engine.store, str(tree), RULES, now_ns=time.time_ns(), processes=2) is None
    monkeypatch.setenv("TURNBACK_SCAN_PROCESSES", "2")
    result = scan_tree(engine.store, str(tree), RULES, None, now_ns=time.time_ns())  # the fall back
    monkeypatch.undo()
    assert result.snapshot == one_process(engine.store, tree).snapshot
    assert "a3/b2/link" in result.snapshot
    assert open_descriptors() == descriptors and child_pids() == children  # no worker, no pipe left


def wide_tree(root: Path, folders: int) -> None:
    for n in range(folders):
        (root / "many" / f"d{n}").mkdir(parents=True)
    (root / "many" / f"d{folders - 1}" / "last").write_bytes(b"the last folder's file\n")
    set_old_mtimes(root)  # not racy: a scan again reads it only if it changed


def test_more_folders_at_the_top_than_a_pipe_holds_are_handed_out_and_none_waits_forever(
    engine: turnback.Engine, tmp_path: Path
) -> None:
    """The folders handed out are queued on a pipe before any worker reads it: 17,000 of them (a pipe holds
    16,384 unless asked for more) are scanned split, by the first snapshot and by a scan again."""
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 17_500:
        pytest.skip("this process may not open 17,500 files at once (ulimit -n): the units are open folders")
    root = tmp_path / "wide"
    wide_tree(root, 17_000)
    first = cold.scan_cold(engine.store, str(root), RULES, now_ns=time.time_ns(), processes=2)
    assert first is not None and len(first.snapshot) == 17_002
    assert engine.store.blobs.read_bytes(first.snapshot["many/d16999/last"].blob) == b"the last folder's file\n"
    (root / "many" / "d7" / "new").write_bytes(b"new\n")
    changed = scan.find_changes(str(root), RULES, first.snapshot, now_ns=time.time_ns(), processes=2)
    assert changed == {"many/d7": False, "many/d7/new": False}


def test_a_top_with_more_folders_than_may_be_open_gives_way_to_one_process(
    engine: turnback.Engine, tmp_path: Path
) -> None:
    """Each folder handed out is kept open until a worker takes it: when they are more than the process may
    keep open, no folder is recorded as unreadable for it; the snapshot is taken in one process."""
    root = tmp_path / "wide"
    wide_tree(root, 1_500)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1_024, hard))
    try:
        assert cold.scan_cold(engine.store, str(root), RULES, now_ns=time.time_ns(), processes=2) is None
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TURNBACK_SCAN_PROCESSES", "2")
            snapshot = scan_tree(engine.store, str(root), RULES, None, now_ns=time.time_ns()).snapshot
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert len(snapshot) == 1_502 and not [path for path, entry in snapshot.items() if entry.kind == "uncovered"]
    assert snapshot == one_process(engine.store, root).snapshot

"""What keeps a scan of a large tree within its memory (issue 18: at most 200 MB on the 100,000-file tree), and
that it still sees every change.

A scan compares each path's stat with its cache entry as one tuple against two (so that a forked split scan
does not write, and so copy, the entries' numbers): a file that differs from its entry in any one of those
numbers, by as little as one, is read again. git's index is kept as its own bytes per file, not decoded.
"""

from __future__ import annotations

import os
import subprocess
import time
import tracemalloc
from pathlib import Path

import pytest

import turnback
from turnback.capture import gitindex
from turnback.capture.scan import ScanRules, scan_tree

RULES = ScanRules(max_file_bytes=16 << 20)
STAT_FIELDS = ("size", "mtime_ns", "ctime_ns", "ino", "mode")


@pytest.mark.parametrize("field", STAT_FIELDS)
@pytest.mark.parametrize("by", [1, -1])
def test_a_file_whose_entry_differs_in_one_stat_number_by_one_is_read_again(
    engine: turnback.Engine, tmp_path: Path, field: str, by: int
) -> None:
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "main.py").write_bytes(b"print('hello')\n")
    (tree / "README.md").write_bytes(b"readme\n")
    then = time.time_ns() - 86_400 * 10**9  # not racy: the cache entry alone decides
    for path in (tree / "src" / "main.py", tree / "README.md", tree / "src", tree):
        os.utime(path, ns=(then, then))
    first = scan_tree(engine.store, str(tree), RULES, None, now_ns=time.time_ns())
    again = scan_tree(engine.store, str(tree), RULES, first.snapshot, now_ns=time.time_ns())
    assert again.files_read == 0  # nothing changed: nothing read

    cached = first.snapshot["src/main.py"]
    previous = dict(first.snapshot)
    previous["src/main.py"] = cached._replace(**{field: getattr(cached, field) + by})
    scanned = scan_tree(engine.store, str(tree), RULES, previous, now_ns=time.time_ns())
    assert scanned.files_read == 1
    assert scanned.snapshot["src/main.py"] == cached  # read again: the entry the stat and the bytes make
    assert scanned.snapshot["README.md"] is previous["README.md"]  # the others kept as they were


def git(root: Path, *args: str) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env |= {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    env |= {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def test_git_s_index_of_a_checkout_is_held_in_its_own_bytes_per_file(tmp_path: Path) -> None:
    files = 3000
    then = (
        time.time_ns() - 86_400 * 10**9
    )  # git's racy rule: a file of the second the index was written is not vouched for
    for n in range(files):
        folder = tmp_path / f"d{n % 30}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{n}.txt").write_bytes(f"file {n}\n".encode())
        os.utime(folder / f"f{n}.txt", ns=(then, then))
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "base")

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        index = gitindex.read_index(str(tmp_path))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert index is not None and len(index.entries) == files
    # Per file: its path (about 60 bytes as a str), its slot in the dict, its 62 bytes of the index (95 as a
    # bytes object). Decoded (a tuple, its numbers and a hex id), it took about 400 bytes.
    assert held / files < 260, f"{held / files:.0f} bytes per file"
    st = os.lstat(tmp_path / "d7" / "f7.txt")
    entry = index.entry("d7/f7.txt")
    assert entry is not None and (entry.size, entry.mtime_ns, entry.ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert gitindex.object_for(index, "d7/f7.txt", st) == gitindex.blob_oid(b"file 7\n")

"""A large plain folder's first snapshot in a process that cannot fork scan workers (other threads run there: the
MCP server's, ``turnback serve``'s) is taken by a helper process started afresh, which splits it over the CPUs;
what the scan then holds is what one process reading every file would have held. A checkout, a small tree, a
process with no other thread and a user's ``TURNBACK_SCAN_PROCESSES=1`` start no helper, and a helper that
fails leaves the scan to the process that asked."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import turnback
from turnback.capture import commands
from turnback.capture.scan import ScanRules, scan_tree

FOLDERS = 300  # more than the 256 units a first snapshot hands out: the helper's workers take part


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "plain"
    for n in range(FOLDERS):
        folder = root / f"d{n:03}"
        folder.mkdir(parents=True)
        (folder / "a.txt").write_bytes(f"folder {n}\n".encode() * (n + 1))
        (folder / "b.py").write_bytes(f"def f{n}():\n    return {n}\n".encode())
    (root / "d000" / "big.bin").write_bytes(os.urandom(3 << 20))
    return root


@pytest.fixture
def server_thread() -> Iterator[None]:
    """A thread like a server's, running while the scan does: this process cannot fork scan workers."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="a-server-thread")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@pytest.fixture
def helpers(monkeypatch: pytest.MonkeyPatch) -> list[Sequence[str]]:
    """The helper processes the scan starts (each is started for real)."""
    started: list[Sequence[str]] = []
    real = commands.spawn_helper

    def spawn(store: Any, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(list(args))
        return real(store, args, **kwargs)

    monkeypatch.setattr(commands, "spawn_helper", spawn)
    monkeypatch.setattr(commands, "SPLIT_MIN_ENTRIES", 40)  # the tree above is "large"
    monkeypatch.setenv("TURNBACK_SCAN_PROCESSES", "2")  # two wanted, whatever this machine's CPUs
    return started


def project_of(engine: turnback.Engine, root: Path) -> turnback.Project:
    return engine.project_of(engine.new_session(str(root)))


def one_process_snapshot(engine: turnback.Engine, root: Path) -> dict[str, tuple[object, ...]]:
    rules = ScanRules(max_file_bytes=engine.config_for(project_of(engine, root)).max_file_bytes)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TURNBACK_SCAN_PROCESSES", "1")
        result = scan_tree(engine.store, str(root), rules, None, now_ns=0)
    return {path: (entry.kind, entry.size, entry.blob) for path, entry in result.snapshot.items()}


def kept_snapshot(engine: turnback.Engine, root: Path) -> dict[str, tuple[object, ...]]:
    project = project_of(engine, root)
    cached = engine.store.latest_snapshot(project.id, data=False)
    assert cached is not None
    loaded = commands.load_snapshot(engine.store, cached.id)
    assert loaded is not None
    return {path: (entry.kind, entry.size, entry.blob) for path, entry in loaded.snapshot.items()}


def packs(engine: turnback.Engine) -> list[str]:
    folder = engine.store.blobs.packs
    return sorted(os.listdir(folder)) if folder is not None and os.path.isdir(folder) else []


def test_a_helper_splits_a_large_plain_folders_first_snapshot_where_threads_run(
    engine: turnback.Engine, tree: Path, helpers: list[Sequence[str]], server_thread: None
) -> None:
    project = project_of(engine, tree)
    assert engine.scan(project) == FOLDERS * 2 + FOLDERS + 1
    assert helpers == [["_first_snapshot", project.id]]
    if engine.store.blobs.packs is not None:  # (a shared store keeps no packs: its workers send their rows)
        assert packs(engine), "the helper's workers wrote no pack: it did not split the reading"
    kept = kept_snapshot(engine, tree)
    assert kept == one_process_snapshot(engine, tree)
    for path, (kind, _size, blob) in kept.items():
        if kind == "file":
            assert engine.load(blob) == (tree / path).read_bytes(), path  # type: ignore[arg-type]


@pytest.mark.parametrize("case", ["a checkout", "a small tree", "no other thread", "one process asked for"])
def test_no_helper_where_this_process_does_as_well(
    engine: turnback.Engine,
    tree: Path,
    helpers: list[Sequence[str]],
    monkeypatch: pytest.MonkeyPatch,
    case: str,
) -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="a-server-thread")
    if case != "no other thread":
        thread.start()
    try:
        if case == "a checkout":
            subprocess.run(["git", "init", "-q", str(tree)], check=True)
        elif case == "a small tree":
            monkeypatch.setattr(commands, "SPLIT_MIN_ENTRIES", FOLDERS * 4)
        elif case == "one process asked for":
            monkeypatch.setenv("TURNBACK_SCAN_PROCESSES", "1")
        engine.scan(project_of(engine, tree))
    finally:
        stop.set()
        if thread.is_alive():
            thread.join()
    assert helpers == []
    assert kept_snapshot(engine, tree) == one_process_snapshot(engine, tree)


def test_a_helper_that_fails_leaves_the_first_snapshot_to_this_process(
    engine: turnback.Engine,
    tree: Path,
    helpers: list[Sequence[str]],
    monkeypatch: pytest.MonkeyPatch,
    server_thread: None,
) -> None:
    def failing(store: Any, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        helpers.append(list(args))
        return subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])

    monkeypatch.setattr(commands, "spawn_helper", failing)
    project = project_of(engine, tree)
    assert engine.scan(project) == FOLDERS * 3 + 1
    assert helpers == [["_first_snapshot", project.id]]
    assert packs(engine) == []  # read here, in one process
    assert kept_snapshot(engine, tree) == one_process_snapshot(engine, tree)

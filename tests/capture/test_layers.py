"""A stat cache in memory as a full snapshot and a layer of what differs (``capture/scan/layers.py``).

What a user relies on: a scan the watcher vouches for sees exactly the tree a full snapshot would hold (each
path's entry, what is below a folder, the files read again every time), and a stat cache saved as a delta, by
this version or an older one (the same stored layout), reads back as the tree it was saved from, in a process
that never decoded it (the next CLI process) as in the one that saved it.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import turnback
from turnback.capture.scan import (
    Entry,
    Layered,
    ScanRules,
    encode_snapshot,
    encode_snapshot_delta,
    encoding,
    flat,
    load_snapshot,
    rescan_tree,
    scan_tree,
)

RULES = ScanRules(max_file_bytes=16 << 20)


def entry(kind: str = "file", size: int = 1, *, racy: bool = False, linked: bool = False) -> Entry:
    return Entry(kind, size, 1, 1, size, 0o100644, b"b" * 32, None, None, racy, linked)  # type: ignore[arg-type]


def below(snapshot: dict[str, Entry], folder: str) -> list[str]:
    return sorted(path for path in snapshot if path.startswith(folder + "/"))


def reread(snapshot: dict[str, Entry]) -> set[str]:
    return {path for path, found in snapshot.items() if found.racy or found.linked}


def test_a_layer_holds_exactly_what_the_same_changes_to_a_plain_dict_hold() -> None:
    rng = random.Random(18)
    names = [f"d{a}/e{b}/f{c}" for a in range(4) for b in range(3) for c in range(3)]
    paths = sorted({"/".join(name.split("/")[:depth]) for name in names for depth in (1, 2, 3)})
    model = {path: entry(size=rng.randrange(9), racy=rng.random() < 0.2) for path in paths if rng.random() < 0.7}
    layers = [Layered.over(dict(model))]
    for _round in range(6):
        layer = Layered.over(layers[-1])  # each a layer on the last, as one scan after another
        was = dict(model)
        for _ in range(30):
            path = rng.choice(paths + [f"new{rng.randrange(5)}/x" for _ in range(3)])
            if rng.random() < 0.4 and path in model:
                del model[path]
                del layer[path]
            elif rng.random() < 0.3:
                assert layer.pop(path, None) == model.pop(path, None)
            else:
                model[path] = layer[path] = entry(size=rng.randrange(9), linked=rng.random() < 0.2)
        assert dict(layer) == model and len(layer) == len(model)
        assert all(layer.get(path) == model.get(path) and (path in layer) == (path in model) for path in paths)
        assert layer.flat() == model and flat(layer) == model
        assert layer.reread() == reread(model)
        for folder in paths:
            assert sorted(layer.below(folder)) == below(model, folder), folder
        assert dict(layers[-1]) == was  # the layer it was built on is as it was
        layers.append(layer)


def test_a_delta_cache_reads_back_in_a_process_that_never_decoded_it(engine: turnback.Engine, tmp_path: Path) -> None:
    """The stored layout: a full cache (format 3) and a delta on it (format 4), as earlier versions wrote them."""
    store = engine.store
    with store.transaction():
        project = store.register_project(str(tmp_path)).project
    full = {"a": entry(), "b": entry("dir"), "b/c": entry(size=2), "b/d": entry(size=3, racy=True)}
    full_id = store.save_snapshot(project.id, encode_snapshot(full), len(full))
    delta: dict[str, Entry | None] = {"b/c": None, "b/e": entry(size=4), "a": entry(size=5, linked=True)}
    delta_id = store.save_snapshot(project.id, encode_snapshot_delta(full_id, delta), 4, base_id=full_id)
    encoding._LOADED.clear()  # as in the next process
    loaded = load_snapshot(store, delta_id)
    assert loaded is not None and loaded.base_id == full_id and loaded.delta == delta
    expected = {
        "a": entry(size=5, linked=True),
        "b": entry("dir"),
        "b/d": entry(size=3, racy=True),
        "b/e": entry(size=4),
    }
    assert dict(loaded.snapshot) == expected and len(loaded.snapshot) == 4
    assert sorted(loaded.snapshot.below("b")) == ["b/d", "b/e"]
    assert loaded.snapshot.reread() == {"a", "b/d"}
    base = load_snapshot(store, full_id)
    assert base is not None and dict(base.snapshot) == full
    assert loaded.snapshot.full is base.snapshot.full  # the delta is a layer on its base: not a copy of it


def test_rescans_of_a_layered_cache_match_full_scans(engine: turnback.Engine, tmp_path: Path) -> None:
    """A folder renamed, one removed, one made with files in it, a file replaced by a folder: what each rescan
    keeps is what a full scan finds, and the cache it started from is left as it was."""
    root = tmp_path / "tree"
    for folder in ("a/b/c", "keep", "gone/deep"):
        (root / folder).mkdir(parents=True)
    for name in ("a/b/c/one.txt", "a/b/two.txt", "keep/k.txt", "gone/deep/g.txt", "file.txt"):
        (root / name).write_bytes(name.encode())
    old = time.time_ns() - 60_000_000_000
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.utime(os.path.join(folder, name), ns=(old, old))  # none racy: only what changed is visited
    store = engine.store
    previous = scan_tree(store, str(root), RULES, None, now_ns=time.time_ns()).snapshot
    kept = dict(previous)
    (root / "a").rename(root / "moved")
    for folder, _dirs, files in os.walk(root / "gone", topdown=False):
        for name in files:
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)
    (root / "made" / "in").mkdir(parents=True)
    (root / "made" / "in" / "m.txt").write_bytes(b"m")
    (root / "file.txt").unlink()
    (root / "file.txt").mkdir()
    (root / "file.txt" / "inside").write_bytes(b"i")
    changed = {"a": False, "moved": True, "gone": False, "made": True, "file.txt": False}
    result = rescan_tree(store, str(root), RULES, previous, changed, now_ns=time.time_ns())
    assert result is not None and isinstance(result.snapshot, Layered)
    full = scan_tree(store, str(root), RULES, None, now_ns=time.time_ns()).snapshot
    assert {path: found.state() for path, found in result.snapshot.items()} == {
        path: found.state() for path, found in full.items()
    }
    assert result.touched is not None and {p for p in kept.keys() ^ full.keys()} <= result.touched
    assert dict(previous) == kept
    again = rescan_tree(store, str(root), RULES, result.snapshot, {"moved/b/two.txt": False}, now_ns=time.time_ns())
    assert again is not None and dict(again.snapshot) == dict(result.snapshot)


def test_a_full_cache_of_several_parts_reads_back_as_it_was_saved() -> None:
    """A full cache is encoded a part of entries at a time: one of more entries than a part (every kind of
    field, paths beyond ASCII) reads back as the same paths, in the same order, with the same entries."""
    rng = random.Random(31)
    snapshot = {}
    for n in range(encoding._ENCODE_PART * 2 + 17):
        kind = rng.choice(["file", "dir", "symlink", "uncovered"])
        snapshot[f"dossier-{n % 97}/fichier-é{n}.txt"] = Entry(
            kind,  # type: ignore[arg-type]
            rng.randrange(1 << 40),
            time.time_ns() - rng.randrange(1 << 50),
            time.time_ns(),
            rng.randrange(1 << 62),
            0o100644 if kind == "file" else 0o40755,
            rng.randbytes(32) if kind == "file" else None,
            "git:" + rng.randbytes(20).hex() if kind == "symlink" else None,
            '{"code": "special_file"}' if kind == "uncovered" else None,
            rng.random() < 0.1,
            rng.random() < 0.1,
        )
    decoded = encoding.decode_snapshot(encode_snapshot(snapshot))
    assert decoded is not None
    assert list(decoded) == list(snapshot)
    assert decoded == snapshot

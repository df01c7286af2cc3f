"""The store's compression dictionary: trained once on a project's files, then every small copy uses it."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
from pathlib import Path

import turnback
from tests.conftest import TEST_KEY
from turnback.capture.scan import DICT_SAMPLES
from turnback.store import Store
from turnback.store.blobs import DICT_META_KEY, DICT_SAMPLE_MAX, KIND_DATA, KIND_DATA_DICT

PAST_NS = 1_000_000_000 * 10**9  # 2001
WORDS = ["def", "return", "self", "import", "value", "items", "parser", "config", "result", "error", "path"]


def source_like(rng: random.Random, n: int) -> bytes:
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(3, 8))) for _ in range(n)]
    return ("\n".join(lines) + "\n").encode()


def samples(count: int, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    return [source_like(rng, rng.randint(10, 60)) for _ in range(count)]


def kinds(home: Path) -> dict[bytes, int]:
    with sqlite3.connect(home / "turnback.db") as db:
        return {bytes(row[0]): row[1] for row in db.execute("SELECT id, kind FROM blobs")}


def open_store(home: Path) -> Store:
    return Store.open(str(home), key_secret=TEST_KEY, try_keyring=False)


def test_copies_made_after_training_use_the_dictionary_and_read_back_anywhere(home: Path) -> None:
    texts = samples(700)
    with open_store(home) as store:
        with store.transaction():
            before = store.blobs.put_bytes(b"stored before the dictionary\n")
            assert store.blobs.train_dictionary(texts) is True
            assert store.blobs.train_dictionary(texts) is False  # a store's dictionary never changes
            small = store.blobs.put_bytes(texts[0] + b"one more line\n")
            large_bytes = random.Random(1).randbytes(DICT_SAMPLE_MAX + 1)  # larger than any it was trained on
            large = store.blobs.put_bytes(large_bytes)
    stored = kinds(home)
    assert stored[before] == KIND_DATA
    assert stored[small] == KIND_DATA_DICT
    assert stored[large] == KIND_DATA_DICT
    with open_store(home) as store:  # another opening (another process would do the same) reads them all
        assert store.blobs.read_bytes(before) == b"stored before the dictionary\n"
        assert store.blobs.read_bytes(small) == texts[0] + b"one more line\n"
        assert store.blobs.read_bytes(large) == large_bytes
        assert store.blobs.verify(large)


def test_the_dictionary_makes_small_copies_smaller(home: Path, tmp_path: Path) -> None:
    texts = samples(1200)
    with open_store(home) as store, store.transaction():
        plain = [store.blobs.put_bytes(text) for text in texts[600:]]
    other = tmp_path / "other"
    with open_store(other) as store, store.transaction():
        store.blobs.train_dictionary(texts[:600])
        taught = [store.blobs.put_bytes(text) for text in texts[600:]]

    def held(folder: Path) -> int:
        with sqlite3.connect(folder / "turnback.db") as db:
            return int(db.execute("SELECT SUM(stored) FROM blobs").fetchone()[0])

    assert len(taught) == len(plain) == 600
    assert held(other) < 0.8 * held(home), (held(other), held(home))


def test_too_few_samples_teach_nothing(home: Path) -> None:
    with open_store(home) as store, store.transaction():
        assert store.blobs.train_dictionary(samples(20)) is False
        assert not store.blobs.has_dictionary()


def test_the_dictionary_is_sealed_like_everything_else(home: Path) -> None:
    texts = samples(700)
    marker = b"a-line-only-this-project-has " * 3
    with open_store(home) as store, store.transaction():
        store.blobs.train_dictionary([text + marker for text in texts])
    with sqlite3.connect(home / "turnback.db") as db:
        (value,) = db.execute("SELECT value FROM meta WHERE key=?", (DICT_META_KEY,)).fetchone()
    assert b"a-line-only-this-project-has" not in bytes(value)
    raw = (home / "turnback.db").read_bytes()
    assert b"a-line-only-this-project-has" not in raw


def test_the_background_copy_of_a_checkout_trains_it_and_undo_reads_through_it(
    engine: turnback.Engine, tmp_path: Path
) -> None:
    project = tmp_path / "checkout"
    project.mkdir()
    texts = samples(DICT_SAMPLES // 2 + 600, seed=3)
    for i, text in enumerate(texts):
        folder = project / f"d{i % 40}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{i}.py").write_bytes(text)
        os.utime(folder / f"f{i}.py", ns=(PAST_NS, PAST_NS))  # not racy: the first snapshot reads none of them
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"]):
        subprocess.run(["git", *args], cwd=project, check=True, env=env)
    session = engine.new_session(str(project), title="dictionary")
    project_record = engine.project_of(session)
    engine.scan(project_record)  # the first snapshot stands on git's objects
    engine.adopt_git_objects(project_record.id)
    assert engine.store.blobs.has_dictionary()
    taught = [kind for kind in kinds(Path(engine.store.home)).values() if kind == KIND_DATA_DICT]
    assert len(taught) >= len(texts) - 1
    engine.begin_turn(session.id, "rewrite one")
    engine.write(session.id, "d0/f0.py", b"rewritten\n", cwd=str(project))
    engine.end_turn(session.id)
    engine.apply(engine.plan_undo(session.id))
    assert (project / "d0" / "f0.py").read_bytes() == texts[0]


def _plain_project(root: Path, count: int) -> list[bytes]:
    texts = samples(count, seed=5)
    for i, text in enumerate(texts):
        folder = root / f"d{i % 25}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.py").write_bytes(text)
    (root / "big.bin").write_bytes(random.Random(2).randbytes(DICT_SAMPLE_MAX * 3))
    return texts


def test_a_first_scan_of_a_plain_folder_trains_it_on_the_files_it_holds_back(
    engine: turnback.Engine, tmp_path: Path
) -> None:
    project = tmp_path / "plain"
    texts = _plain_project(project, 800)
    session = engine.new_session(str(project), title="plain")
    engine.scan(engine.project_of(session))
    assert engine.store.blobs.has_dictionary()
    stored = list(kinds(Path(engine.store.home)).values())
    assert stored.count(KIND_DATA_DICT) == len(set(texts))
    # the large file: stored as met, before the scan had its 1,000 small files to train on (later ones use it)
    assert stored.count(KIND_DATA) == 1
    engine.begin_turn(session.id, "one command")
    call = engine.begin_command(session.id, "rm -r d0 && echo changed > d1/f1.py", cwd=str(project))
    subprocess.run(["sh", "-c", "rm -r d0 && echo changed > d1/f1.py"], cwd=project, check=True)
    engine.finish_command(call, exit_code=0)
    engine.end_turn(session.id)
    engine.apply(engine.plan_undo(session.id))
    assert (project / "d0" / "f0.py").read_bytes() == texts[0]
    assert (project / "d1" / "f1.py").read_bytes() == texts[1]


def test_a_first_scan_of_a_few_files_stores_them_without_a_dictionary(engine: turnback.Engine, tmp_path: Path) -> None:
    project = tmp_path / "small"
    texts = _plain_project(project, 40)
    session = engine.new_session(str(project), title="small")
    engine.scan(engine.project_of(session))
    assert not engine.store.blobs.has_dictionary()
    assert sorted(kinds(Path(engine.store.home)).values()) == [KIND_DATA] * (len(set(texts)) + 1)
    engine.begin_turn(session.id, "one write")
    engine.write(session.id, "d0/f0.py", b"new\n", cwd=str(project))
    engine.end_turn(session.id)
    engine.apply(engine.plan_undo(session.id))
    assert (project / "d0" / "f0.py").read_bytes() == texts[0]

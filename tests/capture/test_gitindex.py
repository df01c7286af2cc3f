"""A first snapshot of a clean git checkout stands on git's objects instead of reading every file.

Real git, real files: the index is written by git itself, the objects come
back through ``git cat-file``, and what a command changes in such a file is
still undone byte for byte.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import turnback
from tests.conftest import Result, tree_state
from turnback.capture import commands, gitindex
from turnback.capture.scan import ScanRules, decode_snapshot, encode_snapshot, encoding, load_snapshot, scan_tree

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}
RULES = ScanRules(max_file_bytes=16 << 20)
DAY_AGO = time.time() - 86_400


@pytest.fixture(autouse=True)
def pinned_git(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("GIT_"):
            monkeypatch.delenv(name)
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout.strip()


def checkout(project: Path, *, attributes: str | None = None) -> dict[str, str]:
    """Commit everything in *project* (files dated a day ago, so no index entry is racy); path -> object id."""
    if attributes is not None:
        (project / ".gitattributes").write_text(attributes)
    (project / "tool.sh").write_bytes(b"#!/bin/sh\necho tool\n")
    (project / "tool.sh").chmod(0o755)
    for path in project.rglob("*"):
        if path.is_file():
            os.utime(path, (DAY_AGO, DAY_AGO))
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "base")
    listed = git(project, "ls-files", "-s").splitlines()
    return {
        line.split("\t", 1)[1]: line.split()[1] for line in listed if line.startswith("1006") or line.startswith("1007")
    }


def test_a_clean_checkout_is_recorded_as_its_git_objects_and_no_file_is_read(engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    objects = checkout(project)
    (project / "untracked.txt").write_bytes(b"not in git\n")
    index = gitindex.read_index(str(project))
    assert index is not None
    result = scan_tree(engine.store, str(project), RULES, None, now_ns=time.time_ns(), git_index=index)
    assert result.files_read == 1  # only the untracked file
    files = {path: entry for path, entry in result.snapshot.items() if entry.kind == "file"}
    assert {path: entry.git_oid for path, entry in files.items() if entry.git_oid} == objects
    assert files["untracked.txt"].git_oid is None and files["untracked.txt"].blob is not None


def test_the_index_is_read_in_each_format_git_writes(project: Path) -> None:
    objects = checkout(project)
    for version in ("2", "3", "4"):
        git(project, "update-index", "--index-version", version)
        index = gitindex.read_index(str(project))
        assert index is not None, version
        assert {path: index.entry(path).oid for path in index.entries} == objects, version


def test_files_git_does_not_vouch_for_are_read(engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    checkout(project)
    (project / "README.md").write_bytes(b"edited since the commit\n")  # dirty: its stat no longer matches
    os.utime(project / "src" / "main.py")  # touched now: same bytes, a new stat
    index = gitindex.read_index(str(project))
    assert index is not None
    result = scan_tree(engine.store, str(project), RULES, None, now_ns=time.time_ns(), git_index=index)
    read = {path for path, entry in result.snapshot.items() if entry.kind == "file" and entry.git_oid is None}
    assert read == {"README.md", "src/main.py"}
    assert engine.load(result.snapshot["README.md"].blob) == b"edited since the commit\n"


@pytest.mark.parametrize(
    ("setting", "attributes"),
    [
        ("core.autocrlf=true", None),
        (None, "* text=auto\n"),
        (None, "*.bin filter=lfs diff=lfs merge=lfs -text\n"),
        (None, "*.txt eol=crlf\n"),
    ],
)
def test_no_reuse_where_the_work_tree_may_differ_from_the_objects(
    project: Path, setting: str | None, attributes: str | None
) -> None:
    checkout(project, attributes=attributes)
    if setting is not None:
        key, value = setting.split("=")
        git(project, "config", key, value)
    assert gitindex.read_index(str(project)) is None


def test_no_reuse_outside_a_work_tree_top(project: Path, tmp_path: Path) -> None:
    checkout(project)
    assert gitindex.read_index(str(project / "src")) is None
    plain = tmp_path / "plain"
    plain.mkdir()
    assert gitindex.read_index(str(plain)) is None


def test_a_command_on_a_clean_checkout_is_undone_byte_for_byte(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    checkout(project)
    before = tree_state(project)
    env = dict(GIT_ENV)
    assert cli("session", "new", env=env).rc == 0
    assert cli("turn", "begin", "--message", "change tracked files", env=env).rc == 0
    ran: Result = cli("exec", "--", "sh", "-c", "echo more >> README.md; rm src/main.py; chmod -x tool.sh", env=env)
    assert ran.rc == 0, ran.err
    assert ran.lines[-1] == "deleted src/main.py · changed README.md +1 -0 · mode tool.sh"
    assert cli("turn", "end", env=env).rc == 0
    undone = cli("undo", "--yes", env=env)
    assert undone.rc == 0, undone.err
    assert tree_state(project) == before
    assert git(project, "status", "--porcelain") == ""


def _first_cache(engine: turnback.Engine, project: Path) -> str:
    """Save a first snapshot that stands on git's objects, as a first scan does (without its background copy)."""
    registered, _ = engine.init_project(str(project))
    index = gitindex.read_index(str(project))
    result = scan_tree(engine.store, str(project), RULES, None, now_ns=time.time_ns(), git_index=index)
    engine.store.save_snapshot(registered.id, encode_snapshot(result.snapshot), len(result.snapshot))
    return registered.id


def test_the_objects_are_copied_into_the_store_afterwards(engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    objects = checkout(project)
    project_id = _first_cache(engine, project)
    assert engine.adopt_git_objects(project_id) == len(objects)
    cached = engine.store.latest_snapshot(project_id)
    snapshot = load_snapshot(engine.store, cached.id, cached.data).snapshot
    files = {path: entry for path, entry in snapshot.items() if entry.kind == "file"}
    assert not any(entry.git_oid for entry in files.values())
    for path in objects:
        assert engine.load(files[path].blob) == (project / path).read_bytes(), path
    assert os.path.getsize(os.path.join(engine.store.home, "turnback.db-wal")) == 0  # the copies are in the database
    assert engine.adopt_git_objects(project_id) == 0


def _decoded_fresh(engine: turnback.Engine, snapshot_id: str) -> dict[str, object]:
    """The saved cache *snapshot_id* decoded from its stored bytes (not what this process holds decoded)."""
    decoded = decode_snapshot(engine.store.snapshot(snapshot_id) or b"")
    assert decoded is not None
    return dict(decoded)


def test_the_copy_decodes_the_cache_once_over_many_rounds(  # type: ignore[no-untyped-def]
    engine, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each round starts from the cache the last one saved, as it holds it: the stored cache is decoded once
    (two decoded caches at once were most of the copy's peak memory), and what it holds is what was saved."""
    objects = checkout(project)
    project_id = _first_cache(engine, project)
    encoding._LOADED.clear()  # as in the helper's process: nothing decoded yet
    decoded: list[int] = []
    real_decode = encoding.decode_snapshot
    monkeypatch.setattr(encoding, "decode_snapshot", lambda data: decoded.append(1) or real_decode(data))
    monkeypatch.setattr(commands, "ADOPT_ROUND_FILES", 2)
    assert len(objects) > 4  # several rounds
    assert engine.adopt_git_objects(project_id) == len(objects)
    assert len(decoded) == 1
    cached = engine.store.latest_snapshot(project_id, data=False)
    held = load_snapshot(engine.store, cached.id)
    assert dict(held.snapshot) == _decoded_fresh(engine, cached.id)
    files = {path: entry for path, entry in held.snapshot.items() if entry.kind == "file"}
    assert not any(entry.git_oid for entry in files.values())
    for path in objects:
        assert engine.load(files[path].blob) == (project / path).read_bytes(), path


def test_a_scan_saved_between_rounds_keeps_what_it_saw(  # type: ignore[no-untyped-def]
    engine, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan that saves a cache while the copy runs (a command's scan) decides what a file it saw changed holds;
    the copy's next round starts from that cache, and adopts the rest."""
    objects = checkout(project)
    project_id = _first_cache(engine, project)
    registered = engine.store.project(project_id)
    monkeypatch.setattr(commands, "ADOPT_ROUND_FILES", 2)
    monkeypatch.setattr(commands, "spawn_helper", lambda *args, **kwargs: None)  # this test runs the copy itself
    first = engine.store.latest_snapshot(project_id, data=False)
    on_git = [path for path, entry in _decoded_fresh(engine, first.id).items() if entry.git_oid]
    assert len(on_git) > 4
    changed = on_git[-1]  # not in the first round: the scan sees it first
    real_copy = commands.copy_git_objects
    rounds: list[int] = []

    def copy_then_scan(*args, **kwargs):  # type: ignore[no-untyped-def]
        copied = real_copy(*args, **kwargs)
        if not rounds:
            (project / changed).write_bytes(b"changed while the copy ran\n")
            commands.scan_project(engine.store, registered, RULES)
        rounds.append(len(copied))
        return copied

    monkeypatch.setattr(commands, "copy_git_objects", copy_then_scan)
    assert engine.adopt_git_objects(project_id) == len(objects) - 1  # the changed file was read by the scan
    assert len(rounds) > 2
    cached = engine.store.latest_snapshot(project_id, data=False)
    held = load_snapshot(engine.store, cached.id).snapshot
    assert dict(held) == _decoded_fresh(engine, cached.id)
    assert engine.load(held[changed].blob) == b"changed while the copy ran\n"
    for path in objects:
        assert not held[path].git_oid, path
        assert engine.load(held[path].blob) == (project / path).read_bytes(), path


def test_an_object_git_removed_leaves_the_file_uncovered_and_says_why(engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    checkout(project)
    project_id = _first_cache(engine, project)
    shutil.rmtree(project / ".git")
    engine.adopt_git_objects(project_id)
    cached = engine.store.latest_snapshot(project_id)
    snapshot = load_snapshot(engine.store, cached.id, cached.data).snapshot
    assert snapshot["README.md"].kind == "uncovered"
    assert snapshot["README.md"].reason == commands.GIT_OBJECT_GONE


def test_the_first_scan_copies_the_objects_in_the_background(engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    checkout(project)
    registered, _ = engine.init_project(str(project))
    scan = commands.scan_project(engine.store, registered, RULES)
    assert any(entry.git_oid for entry in scan.snapshot.values())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        cached = engine.store.latest_snapshot(registered.id)
        if not any(entry.git_oid for entry in load_snapshot(engine.store, cached.id, cached.data).snapshot.values()):
            break
        time.sleep(0.05)
    else:
        pytest.fail("the background copy did not finish within 30 s")

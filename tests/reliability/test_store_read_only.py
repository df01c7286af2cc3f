"""A store turnback may read but not write: on a read-only mount, or a folder of mode 0500.

Reading verbs (log, sessions, verify) work as on any store; a verb that must
write (undo, its preview, which keeps the plan) says the store is read-only,
where it is and why, exits 1, and changes nothing. It is never called damaged.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import tree_state, unprivileged_prefix
from tests.reliability.helpers import assert_no_traceback, record, run
from tests.reliability.scenarios import open_engine

READ_ONLY = "is read-only ("


def _store(base: Path) -> tuple[Path, Path, str]:
    home, project = base / "store", base / "project"
    project.mkdir(parents=True)
    (project / "a.txt").write_bytes(b"before the agent\n")
    with open_engine(home) as engine:
        session = engine.new_session(str(project), title="read-only store")
        engine.begin_turn(session.id, "one write")
        engine.write(session.id, "a.txt", b"the agent's text\n")
        engine.end_turn(session.id)
    return home, project, session.id


def _check(home: Path, project: Path, session_id: str, prefix: list[str], why: str) -> int:
    """Run the reading and the writing verbs; return how many were run."""
    stored = {path.name: path.read_bytes() for path in home.iterdir() if path.is_file()}
    files = tree_state(project)
    reading = (("log", "--session", session_id), ("sessions",), ("verify",))
    writing = (("undo", "--session", session_id, "--dry-run"), ("undo", "--session", session_id, "--yes"))
    for args in reading:
        result = run(home, *args, cwd=project, prefix=prefix)
        assert_no_traceback(result)
        assert result.rc == 0, (why, args, result.err)
        assert "damaged" not in result.out + result.err, (why, args, result.out, result.err)
    verify = run(home, "verify", cwd=project, prefix=prefix)
    assert verify.lines == ["verified: every copy decrypts and matches its id; the database is intact"], verify.out
    for args in writing:
        result = run(home, *args, cwd=project, prefix=prefix)
        assert_no_traceback(result)
        assert result.rc == 1, (why, args, result.rc, result.out)
        assert result.err.startswith(f"turnback: the store at {home} {READ_ONLY}{why}"), (why, args, result.err)
        assert "damaged" not in result.err, result.err
    assert tree_state(project) == files
    assert {path.name: path.read_bytes() for path in home.iterdir() if path.is_file()} == stored
    return len(reading) + 1 + len(writing)


@contextlib.contextmanager
def _read_only_mount(source: Path, target: Path) -> Iterator[bool]:
    """*source* bound read-only at *target* (root only); yields False when this machine cannot mount."""
    target.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True).returncode == 0
    try:
        if mounted:
            remount = ["mount", "-o", "remount,ro,bind", str(target)]
            yield subprocess.run(remount, capture_output=True).returncode == 0
        else:
            yield False
    finally:
        if mounted:
            subprocess.run(["umount", str(target)], check=True)


def test_a_store_on_a_read_only_mount_is_read_and_never_called_damaged(fast_tmp: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    home, project, session_id = _store(fast_tmp)
    with _read_only_mount(home, fast_tmp / "mounted") as ready:
        if not ready:
            pytest.skip("mount --bind / remount,ro does not work here (no CAP_SYS_ADMIN?)")
        verbs = _check(fast_tmp / "mounted", project, session_id, [], "it is on a read-only file system")
    record("store-read-only-mount", verbs=verbs, refused_writes=2, called_damaged=0)


def test_a_store_folder_of_mode_0500_is_read_and_never_called_damaged(fast_tmp: Path) -> None:
    prefix = unprivileged_prefix()  # as root: without the power to ignore the folder's mode
    if prefix is None:
        pytest.skip("running as root without setpriv: root writes a mode-0500 folder")
    home, project, session_id = _store(fast_tmp)
    home.chmod(0o500)
    try:
        verbs = _check(home, project, session_id, prefix, "its folder or its database may not be written")
    finally:
        home.chmod(0o700)
    record("store-read-only-mode-0500", verbs=verbs, refused_writes=2, called_damaged=0)

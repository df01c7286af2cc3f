"""A damaged store: a truncated database, flipped bytes in stored copies, the WAL of a killed writer deleted.

turnback opens the store (read-only where it must) or says clearly that it
cannot; ``turnback verify`` names the damage (per session and call, exit 1);
the database file is never deleted, and stays byte-identical whenever
turnback could not write it; no command shows a traceback (exit 70); and an
undo that needs a damaged copy leaves that file as it is and reports its row
failed, never putting a partly decrypted file in place.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import tree_state
from tests.reliability.crashloop import Pristine
from tests.reliability.helpers import assert_no_traceback, record, run, run_killed, temp_files
from tests.reliability.scenarios import build_undo, open_engine
from turnback.model import BlobId, CallId, SessionId
from turnback.store.crypto import ID_LEN

CANNOT_READ = "is damaged and cannot be read"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- a truncated database --------------------------------------------------------------------------


def _offsets(size: int) -> list[tuple[str, int]]:
    return [
        ("inside the header", 50),
        ("at the end of the header", 100),
        ("after the first page", 4096),
        ("at a quarter", size // 4),
        ("at half", size // 2),
        ("one page short", size - 4096),
        ("one byte short", size - 1),
    ]


def test_a_truncated_database_is_opened_read_only_or_refused_clearly(fast_tmp: Path) -> None:
    pristine = Pristine("undo", fast_tmp)
    case = pristine.case
    assert case.goal is not None
    db = case.home / "turnback.db"
    size = db.stat().st_size
    assert size > 64 * 1024
    outcomes: dict[str, str] = {}
    for label, offset in _offsets(size):
        case = pristine.restore()
        with db.open("r+b") as handle:
            handle.truncate(offset)
        truncated = _digest(db)
        results = {
            verb: run(case.home, *args, cwd=case.project)
            for verb, args in (
                ("verify", ("verify",)),
                ("log", ("log", "--session", case.session_id)),
                ("undo", ("undo", "--session", case.session_id, "--yes")),
            )
        }
        for verb, result in results.items():
            assert_no_traceback(result)
            assert result.rc in (0, 1), (label, verb, result.rc, result.err)
        assert db.is_file(), f"truncated {label}: the database file is gone"
        verify = results["verify"]
        assert verify.rc == 1, (label, verify.out, verify.err)  # a truncated database is never "intact"
        if CANNOT_READ in verify.err:
            outcome = "refused"
            for verb, result in results.items():
                assert result.rc == 1 and result.err.startswith("turnback: the store at "), (label, verb, result.err)
                assert CANNOT_READ in result.err and "nothing was changed or deleted" in result.err
            assert _digest(db) == truncated, f"truncated {label}: turnback changed a database it could not read"
            assert tree_state(case.project) == case.start
            assert not (case.home / "trash").exists()
        else:
            outcome = "opened"
            assert any(line.startswith("database: ") for line in verify.lines), (label, verify.out)
            now = tree_state(case.project)
            for rel in set(now) | set(case.start) | set(case.goal):
                assert now.get(rel) in (case.start.get(rel), case.goal.get(rel)), (label, rel)
        assert temp_files(case.project) == []
        outcomes[label] = outcome
    assert "refused" in outcomes.values(), outcomes
    record("store-truncated", offsets=len(outcomes), outcomes=outcomes, faults_injected=len(outcomes))


def test_a_database_truncated_to_nothing_is_not_taken_for_a_new_store(fast_tmp: Path) -> None:
    case = build_undo(fast_tmp)
    (case.home / "turnback.db").write_bytes(b"")
    verify = run(case.home, "verify", cwd=case.project)
    assert_no_traceback(verify)
    assert verify.rc == 1, verify.out
    assert (case.home / "turnback.db").read_bytes() == b""


def test_a_database_deleted_is_not_taken_for_a_new_store(fast_tmp: Path) -> None:
    """The database file deleted (with its log) from a store made before: every command refuses, in one line that
    says what is gone, and none makes a new, empty store in its place, which would drop the history unsaid."""
    case = build_undo(fast_tmp)
    for suffix in ("", "-wal", "-shm"):
        (case.home / f"turnback.db{suffix}").unlink(missing_ok=True)
    for args in (("verify",), ("sessions",), ("undo", "--session", case.session_id, "--yes")):
        result = run(case.home, *args, cwd=case.project)
        assert_no_traceback(result)
        assert (result.rc, result.out) == (1, ""), (args, result)
        assert result.err.startswith(f"turnback: the database of the store at {case.home} is gone ("), result.err
        assert len(result.err.splitlines()) == 1
    assert not any(case.home.glob("turnback.db*"))
    assert tree_state(case.project) == case.start
    record("store-deleted", faults_injected=1, refused=3)


# -- flipped bytes in stored copies ----------------------------------------------------------------


def _flip(db: Path, blob_id: bytes, at: int | None = None) -> None:
    with sqlite3.connect(db) as conn:
        (data,) = conn.execute("SELECT data FROM blobs WHERE id=?", (blob_id,)).fetchone()
        data = bytearray(data)
        index = len(data) // 2 if at is None else at
        data[index] ^= 0x5A
        conn.execute("UPDATE blobs SET data=? WHERE id=?", (bytes(data), blob_id))
    conn.close()


BIG = 9 << 20  # three chunks of 4 MiB


def _blob_scenario(base: Path) -> tuple[Path, Path, str, dict[str, str], dict[str, bytes]]:
    """A project with a small file and a 9 MiB file; one turn overwrites both and writes a third.

    Returns the store, the project, the session, each path's call id, and each path's earlier bytes.
    """
    home, project = base / "store", base / "project"
    project.mkdir(parents=True)
    earlier = {
        "small.txt": b"the small file's earlier text\n" * 40,
        "big.bin": b"".join(i.to_bytes(4, "big") * 16 for i in range(BIG // 64)),
        "other.txt": b"another file, intact copies\n",
    }
    for rel, content in earlier.items():
        (project / rel).write_bytes(content)
    calls: dict[str, str] = {}
    with open_engine(home) as engine:
        engine.set_config("store.max_mib", "64")
        session = engine.new_session(str(project))
        engine.begin_turn(session.id, "overwrite three files")
        for rel in earlier:
            calls[rel] = engine.write(session.id, rel, f"the agent's {rel}\n".encode()).id
        engine.end_turn(session.id)
    return home, project, session.id, calls, earlier


def _before_blob(home: Path, call_id: str) -> bytes:
    with open_engine(home) as engine:
        [change] = engine.store.call(CallId(call_id)).changes
        assert change.before.blob is not None
        return bytes(change.before.blob)


def test_flipped_bytes_in_copies_are_named_by_verify_and_undo_leaves_those_files(fast_tmp: Path) -> None:
    home, project, session_id, calls, earlier = _blob_scenario(fast_tmp)
    db = home / "turnback.db"
    small = _before_blob(home, calls["small.txt"])
    _flip(db, small)
    big = _before_blob(home, calls["big.bin"])
    with open_engine(home) as engine:
        kind, listing = engine.store.blobs._get(BlobId(big))
        assert kind == 1, "the 9 MiB copy should be a chunk list"
    chunks = [listing[i : i + ID_LEN] for i in range(0, len(listing), ID_LEN)]
    assert len(chunks) == 3
    _flip(db, chunks[1])  # the middle chunk: the first one decrypts and would already be written to a temp file
    after_turn = tree_state(project)

    verify = run(home, "verify", cwd=project)
    assert_no_traceback(verify)
    assert verify.rc == 1, verify.out
    assert "3 damaged copies" in verify.lines, verify.out  # the small copy, the chunk, and its chunk list
    [line] = [line for line in verify.lines if line.startswith("session ")]
    named = line.split(": ", 2)[-1].split(", ")
    assert line.startswith(f"session {session_id[:16]}: 2 call(s) can no longer be reverted"), line
    assert sorted(named) == sorted(calls[rel][:16] for rel in ("small.txt", "big.bin")), line
    data = run(home, "verify", "--json", cwd=project).json()
    assert data["ok"] is False and list(data["sessions"]) == [session_id], data
    assert sorted(data["sessions"][session_id]) == sorted([calls["small.txt"], calls["big.bin"]]), data

    undone = run(home, "undo", "--session", session_id, "--yes", "--json", cwd=project)
    assert_no_traceback(undone)
    assert undone.rc == 0, (undone.rc, undone.err)
    rows = {row["path"]: row for row in undone.json()["rows"]}
    for rel in ("small.txt", "big.bin"):
        assert rows[rel]["status"] == "failed", rows[rel]
        assert "damaged" in rows[rel]["note"] and "the file was left as it is" in rows[rel]["note"], rows[rel]
        assert (project / rel).read_bytes() == after_turn[rel][1], f"{rel} was changed by a failed restore"
    assert rows["other.txt"]["status"] == "done"
    assert (project / "other.txt").read_bytes() == earlier["other.txt"]
    assert temp_files(project) == [], "a partly written (partly decrypted) temp file was left"
    assert db.is_file()
    record("store-flipped-blobs", faults_injected=2, damaged_copies=3, rows_failed=2, bytes_lost=0)


# -- the WAL of a killed writer, deleted ----------------------------------------------------------


@pytest.mark.parametrize("commits", [1, 2])
def test_the_wal_of_a_killed_writer_deleted(fast_tmp: Path, commits: int) -> None:
    """A ``turnback write`` is killed after its 1st commit (its record; the file not written yet) or its 2nd
    (the file written, the call marked done); then its ``-wal`` file is deleted, losing those commits.

    No hook relay runs: it would hold the store open, and a log deleted under a live connection is another
    fault (that connection writes its commits back into a log no other process reads)."""
    alone = {"TURNBACK_HOOK_RELAY": "0"}
    case = build_undo(fast_tmp)
    assert case.goal is not None
    assert run(case.home, "turn", "begin", "--session", case.session_id, cwd=case.project, env=alone).rc == 0
    killed, _pid = run_killed(
        case.home,
        "write",
        "--session",
        case.session_id,
        "r00.txt",
        cwd=case.project,
        env={"TURNBACK_FAULT_KILL_AFTER_COMMIT": str(commits), **alone},
    )
    assert killed.rc == -9, (killed.rc, killed.err)
    wal = case.home / "turnback.db-wal"
    assert wal.exists() and wal.stat().st_size > 0
    wal.unlink()
    written = (case.project / "r00.txt").read_bytes()
    assert written == (b"" if commits == 2 else case.start["r00.txt"][1])

    for args in (("verify",), ("log", "--session", case.session_id), ("status", "--session", case.session_id)):
        result = run(case.home, *args, cwd=case.project, env=alone)
        assert_no_traceback(result)
        assert result.rc == 0, (args, result.rc, result.out, result.err)
    assert run(case.home, "turn", "end", "--session", case.session_id, cwd=case.project, env=alone).rc == 0
    undone = run(case.home, "undo", "--session", case.session_id, "--yes", "--json", cwd=case.project, env=alone)
    assert_no_traceback(undone)
    assert undone.rc == 0, undone.err
    now = tree_state(case.project)
    expected = dict(case.goal)
    if commits == 2:  # the store lost the call, so its write is a user's edit: kept, and its row skipped
        rows = {row["path"]: row for row in undone.json()["rows"]}
        assert rows["r00.txt"]["status"] == "skipped", rows["r00.txt"]
        expected["r00.txt"] = ("file", b"", case.goal["r00.txt"][2])
    assert now == expected
    assert (case.home / "turnback.db").is_file()
    with open_engine(case.home) as engine:
        assert engine.store.session(SessionId(case.session_id)).id == case.session_id
    record("store-wal-deleted", killed_after_commit=commits, faults_injected=1, bytes_lost=0)


def test_a_database_overwritten_with_garbage_is_refused_and_left_as_it_is(fast_tmp: Path) -> None:
    """The database replaced by garbage of the same size: every command refuses clearly, nothing is written."""
    case = build_undo(fast_tmp)
    db = case.home / "turnback.db"
    db.write_bytes(os.urandom(db.stat().st_size))
    garbage = _digest(db)
    for args in (("verify",), ("sessions",), ("undo", "--session", case.session_id, "--yes")):
        result = run(case.home, *args, cwd=case.project)
        assert_no_traceback(result)
        assert result.rc == 1 and result.err.startswith("turnback: "), (args, result.err)
        assert len(result.err.splitlines()) == 1
    assert _digest(db) == garbage
    assert tree_state(case.project) == case.start
    record("store-garbage", faults_injected=1, refused=3)

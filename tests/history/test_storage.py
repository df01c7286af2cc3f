"""The store: the size cap (oldest first, never a pending plan's copies), gc, verify, incognito, delete, config."""

from __future__ import annotations

import os
import re
import sqlite3
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import turnback
from tests.conftest import TEST_BACKEND, TEST_KEY, tree_state
from tests.history.helpers import files_under, lib_turn, log_json, short_id
from turnback.model import BlobId
from turnback.render.diff import human_size

# These read or damage the SQLite file itself, or rewrite config.toml whole (where the test store names its
# database): run against PostgreSQL (TURNBACK_TEST_BACKEND=postgresql) they would test the harness.
SQLITE_FILE = pytest.mark.skipif(TEST_BACKEND != "sqlite", reason="reads the store's SQLite file")
WHOLE_CONFIG = pytest.mark.skipif(TEST_BACKEND != "sqlite", reason="compares config.toml whole")

MIB = 1 << 20


@pytest.fixture
def capped(cli, home: Path) -> Iterator[turnback.Engine]:  # type: ignore[no-untyped-def]
    """An engine opened after ``turnback config set store.max_mib 1`` (so it reads the cap)."""
    setting = cli("config", "set", "store.max_mib", "1")
    assert (setting.rc, setting.out) == (0, "1\n"), setting.err
    with turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False) as opened:
        yield opened


def _blob(seed: int, size: int) -> bytes:
    """*size* bytes no other call writes (zstandard cannot shrink them, so the database grows by as much)."""
    return os.urandom(size - 16) + seed.to_bytes(16, "big")


def _all_contents(home: Path) -> list[bytes]:
    """Every copy the store keeps, decrypted."""
    with turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False) as opened:
        ids = [BlobId(bytes(row[0])) for row in opened.store.db.all("SELECT id FROM blobs")]
        return [opened.load(blob_id) for blob_id in ids]


def test_the_cap_drops_the_oldest_calls_copies_and_the_log_and_undo_say_so(
    cli, capped, home: Path, project: Path
) -> None:  # type: ignore[no-untyped-def]
    engine = capped
    sid = engine.new_session(str(project)).id
    for i in range(1, 6):
        lib_turn(engine, sid, f"turn {i}", ("write", f"f{i}.bin", _blob(i, 300_000)))
        assert engine.kept_bytes() <= MIB
    # 300 kB a turn, 1 MiB kept: turns 1 and 2 lost their copies, oldest first
    tree = log_json(cli, sid)
    assert [t["calls"][0]["revertible"] for t in tree["turns"]] == [False, False, True, True, True]
    calls = [t["calls"][0]["id"] for t in tree["turns"]]
    shown = cli("log", "--session", sid).lines
    assert f"    {short_id(calls[0])}  write f1.bin  (can no longer be reverted)" in shown  # turn 1: no lane below
    assert f"|   {short_id(calls[1])}  write f2.bin  (can no longer be reverted)" in shown
    assert f"|   {short_id(calls[2])}  write f3.bin" in shown

    preview = cli("undo", "--session", sid, "--from", "1", "--dry-run")
    assert preview.rc == 0
    assert "not covered f2.bin (copy dropped by the size cap)" in preview.lines
    assert "not covered f1.bin (copy dropped by the size cap)" in preview.lines
    status = cli("status", "--session", sid)
    kept = engine.kept_bytes()
    assert 900_000 < kept < 900_000 + 3 * 4200  # three copies, and the three calls' clipped inputs
    assert status.lines[-1] == f"kept for reverting (copies and call input): {human_size(kept)} (store.max_mib 1)"
    assert cli("show", calls[0]).lines[1] == "this change can no longer be reverted: its copy was dropped"

    newest = (project / "f5.bin").read_bytes()
    undone = cli("undo", "--session", sid, "--yes", "--json")
    assert undone.rc == 0, undone.err
    assert not (project / "f5.bin").exists()
    assert Path(undone.json()["trash"], "f5.bin").read_bytes() == newest


def test_a_turns_total_still_counts_the_changes_whose_copies_the_cap_dropped(cli, capped, project: Path) -> None:  # type: ignore[no-untyped-def]
    engine = capped
    sid = engine.new_session(str(project)).id
    lib_turn(engine, sid, "two files", ("write", "f1.bin", _blob(1, 300_000)), ("write", "f1.txt", b"one\n"))
    for i in range(2, 6):
        lib_turn(engine, sid, f"turn {i}", ("write", f"f{i}.bin", _blob(i, 300_000)))
    assert log_json(cli, sid)["turns"][0]["calls"][0]["revertible"] is False  # turn 1 lost its copies
    total = cli("diff", "1", "--session", sid, "--stat")
    assert total.rc == 0, total.err
    assert "2 files changed, +0 -0" in total.lines  # both still counted, though neither has a copy any more
    assert total.lines[-2:] == [
        "new f1.bin (not covered: copy dropped by the size cap)",
        "new f1.txt (not covered: copy dropped by the size cap)",
    ]


def test_copies_a_pending_plan_needs_are_never_dropped(cli, capped, project: Path) -> None:  # type: ignore[no-untyped-def]
    engine = capped
    original = b"".join(b"original line %06d\n" % i for i in range(25_000))  # 475 kB
    (project / "big.txt").write_bytes(original)
    sid = engine.new_session(str(project)).id
    lib_turn(engine, sid, "one", ("write", "big.txt", _blob(0, 100_000)))
    planned = cli("undo", "--session", sid, "--dry-run", "--json")
    assert planned.rc == 0
    plan_id = planned.json()["plan"]["id"]
    assert [(r["action"], r["path"]) for r in planned.json()["rows"]] == [("restore", "big.txt")]

    for i in range(2, 7):
        lib_turn(engine, sid, f"turn {i}", ("write", f"f{i}.bin", _blob(i, 300_000)))
        assert engine.kept_bytes() <= MIB
    revertible = [t["calls"][0]["revertible"] for t in log_json(cli, sid)["turns"]]
    assert revertible[0] is True  # the oldest call, kept for the planned undo
    assert revertible[1:4] == [False, False, False]  # the next oldest went instead

    result = engine.apply(engine.plan(plan_id))
    assert [(row.action, row.status) for row in result.plan.rows] == [("restore", "done")]
    assert (project / "big.txt").read_bytes() == original


def _harness_turn(engine: turnback.Engine, sid: str, root: Path, path: str, data: bytes) -> None:
    """A turn whose file the harness writes itself (``call before``/``after``): the call input holds no content."""
    engine.begin_turn(sid, "harness write")
    with engine.begin_call(sid, "Write", {"file_path": path}, cwd=str(root)) as call:
        call.before(path)
        (root / path).write_bytes(data)
        call.after(path)
    engine.end_turn(sid)


@SQLITE_FILE
def test_gc_keeps_the_database_near_the_cap(cli, capped, home: Path, project: Path) -> None:  # type: ignore[no-untyped-def]
    engine = capped
    sid = engine.new_session(str(project)).id
    for i in range(12):  # 3.6 MB written in all, into a 1 MiB cap
        _harness_turn(engine, sid, project, f"f{i % 3}.bin", _blob(i, 300_000))
        assert engine.kept_bytes() <= MIB
    gc = cli("gc")
    assert gc.rc == 0, gc.err
    assert re.fullmatch(r"reclaimed \d+ cop(y|ies) \(.*\)(; the database was compacted)?", gc.lines[0]), gc.out
    assert os.path.getsize(home / "turnback.db") <= 2 * MIB
    vacuumed = cli("gc", "--vacuum")
    assert vacuumed.rc == 0
    assert vacuumed.lines[0].endswith("; the database was compacted")
    on_disk = sum(p.stat().st_size for p in home.glob("turnback.db*"))
    assert on_disk <= MIB + 256 * 1024
    newest = (project / "f2.bin").read_bytes()
    assert cli("undo", "--session", sid, "--yes").rc == 0  # the newest turn still reverts, byte for byte
    assert (project / "f2.bin").read_bytes() == engine.load(engine.log(sid)[-1].calls[0].changes[0].before.blob)
    assert (project / "f2.bin").read_bytes() != newest


@SQLITE_FILE
def test_the_database_stays_near_the_cap_with_the_write_tool(cli, capped, home: Path, project: Path) -> None:  # type: ignore[no-untyped-def]
    engine = capped
    sid = engine.new_session(str(project)).id
    for i in range(40):  # 100 kB of text a turn, 4 MB in all, into a 1 MiB cap
        text = b"".join(b"turn %04d line %06d %s\n" % (i, j, os.urandom(8).hex().encode()) for j in range(2500))
        lib_turn(engine, sid, f"turn {i}", ("write", f"f{i % 3}.txt", text))
        assert engine.kept_bytes() <= MIB
    assert cli("gc", "--vacuum").rc == 0
    assert os.path.getsize(home / "turnback.db") <= 2 * MIB  # once 3.1 MB: 40 call inputs of 64 KiB each, never dropped


def test_copies_kept_for_redo_never_crowd_out_the_newest_turn(cli, capped, project: Path) -> None:  # type: ignore[no-untyped-def]
    engine = capped
    sid = engine.new_session(str(project)).id
    for i in range(3):  # three turns, each undone: their operations keep 300 kB each for a redo
        _harness_turn(engine, sid, project, f"old{i}.bin", _blob(i, 300_000))
        assert cli("undo", "--session", sid, "--yes").rc == 0
    _harness_turn(engine, sid, project, "newest.bin", _blob(9, 300_000))
    assert engine.kept_bytes() <= MIB
    preview = cli("undo", "--session", sid, "--dry-run")
    assert preview.rc == 0
    assert preview.lines[1:] == ["trash       newest.bin"]  # not "not covered ... (copy dropped by the size cap)"
    assert log_json(cli, sid)["turns"][-1]["calls"][0]["revertible"] is True


@SQLITE_FILE
def test_verify_names_the_damaged_call_and_everything_else_still_reverts(
    cli, engine, home: Path, project: Path
) -> None:  # type: ignore[no-untyped-def]
    session = engine.new_session(str(project))
    one = lib_turn(engine, session.id, "one", ("write", "README.md", b"first agent text\n"))
    after_one = tree_state(project)
    lib_turn(engine, session.id, "two", ("write", "docs/guide.md", b"second agent text\n"))
    assert cli("verify").rc == 0
    assert cli("verify").lines == ["verified: every copy decrypts and matches its id; the database is intact"]

    damaged = one.calls[0].changes[0].before.blob  # README.md's first content: only turn 1's call needs it
    assert damaged is not None
    with sqlite3.connect(home / "turnback.db") as db:
        (data,) = db.execute("SELECT data FROM blobs WHERE id=?", (damaged,)).fetchone()
        flipped = bytearray(data)
        flipped[len(flipped) // 2] ^= 0x01
        db.execute("UPDATE blobs SET data=? WHERE id=?", (bytes(flipped), damaged))
    db.close()

    def snapshot() -> list[tuple[object, ...]]:
        with sqlite3.connect(home / "turnback.db") as check:
            rows = check.execute("SELECT * FROM blobs ORDER BY id").fetchall()
            rows += check.execute("SELECT id, evicted, reverted FROM changes ORDER BY id").fetchall()
        check.close()
        return rows

    stored, files = snapshot(), tree_state(project)
    found = cli("verify")
    assert found.rc == 1
    assert found.lines == [
        "1 damaged copy",
        f"session {short_id(session.id)}: 1 call(s) can no longer be reverted: {short_id(one.calls[0].id)}",
    ]
    data = cli("verify", "--json").json()
    assert (data["ok"], data["damaged_blobs"], data["sessions"]) == (False, 1, {session.id: [one.calls[0].id]})
    assert snapshot() == stored and tree_state(project) == files  # verify changed nothing

    undone = cli("undo", "--session", session.id, "--yes")
    assert undone.rc == 0, undone.err
    assert tree_state(project) == after_one  # turn 2 back byte for byte
    broken = cli("undo", "--session", session.id, "--yes")
    assert (project / "README.md").read_bytes() == b"first agent text\n"  # left as it is, never half written
    assert broken.rc == 1
    assert broken.lines[-1].startswith("failed      README.md (a stored copy is damaged")


@SQLITE_FILE
def test_an_incognito_session_keeps_nothing_of_its_files_and_undo_says_why(
    cli, engine, home: Path, project: Path
) -> None:  # type: ignore[no-untyped-def]
    del engine  # open all along, so the WAL and its index stay on disk to be searched too
    marker = b"INCOGNITO-MARKER-7f3c9a51"
    sid = cli("session", "new", "--incognito").out.strip()
    assert cli("turn", "begin", "--session", sid, "--message", "private").rc == 0
    assert cli("write", "--session", sid, "secret.txt", stdin=marker + b" in a new file\n").rc == 0
    assert cli("edit", "--session", sid, "README.md", "--old", "line two", "--new", marker.decode()).rc == 0
    ran = cli("exec", "--session", sid, "--", "sh", "-c", f"echo {marker.decode()} > made.txt")
    assert ran.rc == 0, ran.err
    call = cli("call", "before", "--session", sid, "--tool", "Write", "own.txt")
    assert call.rc == 0, call.err
    (project / "own.txt").write_bytes(marker + b" by the harness\n")
    assert cli("call", "after", call.out.strip(), "own.txt").rc == 0
    ended = cli("turn", "end", "--session", sid)
    assert (ended.rc, ended.lines) == (0, ["4 calls ran (incognito: which files they changed is not kept)"])

    undo = cli("undo", "--session", sid, "--yes")
    assert (undo.rc, undo.err) == (1, "turnback: nothing to undo: this session is incognito, so it keeps no copies\n")
    assert (project / "secret.txt").read_bytes().startswith(marker)

    stored = files_under(home)
    assert {p.name for p in stored} >= {"turnback.db", "turnback.db-wal", "turnback.db-shm"}
    for path in stored:
        assert marker not in path.read_bytes(), path
    assert not any(marker in content for content in _all_contents(home))

    # the same check finds the marker in the copies of a session that is not incognito
    other = cli("session", "new").out.strip()
    assert cli("turn", "begin", "--session", other).rc == 0
    assert cli("write", "--session", other, "kept.txt", stdin=b"KEPT-" + marker).rc == 0
    assert cli("turn", "end", "--session", other).rc == 0
    assert any(b"KEPT-" + marker in content for content in _all_contents(home))


def test_an_incognito_sessions_calls_keep_none_of_its_file_contents(cli, home: Path, project: Path) -> None:  # type: ignore[no-untyped-def]
    marker = "INCOGNITO-INPUT-MARKER-0b7e"
    sid = cli("session", "new", "--incognito").out.strip()
    assert cli("turn", "begin", "--session", sid).rc == 0
    wrote = cli("write", "--session", sid, "secret.txt", "--json", stdin=f"{marker}\n".encode()).json()["call"]["id"]
    edited = cli("edit", "--session", sid, "secret.txt", "--old", marker, "--new", marker + "-2", "--json")
    assert cli("turn", "end", "--session", sid).rc == 0
    for call in (wrote, edited.json()["call"]["id"]):
        shown = cli("show", call, "--input")
        assert shown.rc == 0, shown.err
        assert marker not in shown.out, shown.out
    with turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False) as opened:
        assert not any(marker in (call.input or "") for turn in opened.log(sid) for call in turn.calls)


def test_delete_removes_a_session_and_its_copies(cli, engine, home: Path, project: Path) -> None:  # type: ignore[no-untyped-def]
    gone = engine.new_session(str(project), title="to delete")
    lib_turn(engine, gone.id, "one", ("write", "a.txt", b"DELETED-SESSION-CONTENT\n"))
    kept = engine.new_session(str(project), title="to keep")
    lib_turn(engine, kept.id, "one", ("write", "b.txt", b"KEPT-SESSION-CONTENT\n"))
    before = tree_state(project)

    asked = cli("delete", gone.id[:12])
    assert asked.rc == 1
    assert asked.lines == [f"delete session {short_id(gone.id)} (to delete): 1 turn and its copies"]
    assert "nothing deleted" in asked.err
    assert len(cli("sessions", "--json").json()["sessions"]) == 2

    deleted = cli("delete", gone.id[:12], "--yes")
    assert deleted.rc == 0, deleted.err
    assert deleted.lines[-1] == f"deleted session {short_id(gone.id)}"
    assert [s["id"] for s in cli("sessions", "--json").json()["sessions"]] == [kept.id]
    missing = cli("log", "--session", gone.id)
    assert missing.rc == 2
    assert tree_state(project) == before  # deleting a session changes no file
    assert _all_contents(home) == [b"KEPT-SESSION-CONTENT\n"]  # the deleted session's copy is gone
    gc = cli("gc")
    assert (gc.rc, gc.out) == (0, "reclaimed 0 copies (0 B)\n")  # delete reclaimed it already
    assert cli("undo", "--session", kept.id, "--yes").rc == 0
    assert not (project / "b.txt").exists()


@WHOLE_CONFIG
def test_config_get_and_set_write_the_stores_file_per_project_and_never_the_project(
    cli, home: Path, project: Path
) -> None:  # type: ignore[no-untyped-def]
    before = tree_state(project)
    assert cli("config", "get", "store.max_mib").out == "32\n"
    assert cli("config", "set", "store.max_mib", "1").out == "1\n"
    assert cli("config", "get", "store.max_mib").out == "1\n"
    assert cli("config", "set", "--project", str(project), "render.diff_lines", "5").out == "5\n"
    assert cli("config", "get", "render.diff_lines").out == "20\n"
    assert cli("config", "get", "render.diff_lines", "--project", str(project)).out == "5\n"
    got = cli("config", "get", "render.diff_lines", "--project", str(project), "--json").json()
    assert got == {"schema": 1, "key": "render.diff_lines", "value": 5}
    written = tomllib.loads((home / "config.toml").read_text())
    assert written == {"store": {"max_mib": 1}, "project": {os.path.realpath(project): {"render": {"diff_lines": 5}}}}
    assert tree_state(project) == before

    whole = cli("config", "set", "--project", str(project), "store.max_mib", "2")
    assert (whole.rc, whole.err) == (
        2,
        "turnback: config: store.max_mib applies to the whole store, not to one project\n",
    )
    zero = cli("config", "set", "store.max_mib", "0")
    assert (zero.rc, zero.err) == (2, "turnback: config: store.max_mib must be a whole number of at least 1\n")
    unknown = cli("config", "set", "no.such", "1")
    assert unknown.rc == 2 and unknown.err.startswith("turnback: config: no setting 'no.such'; known: ")
    assert tomllib.loads((home / "config.toml").read_text()) == written


def test_status_counts_the_kept_copies(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    session = engine.new_session(str(project))
    lib_turn(engine, session.id, "one", ("write", "a.txt", b"x" * 2048))
    shown = cli("status", "--session", session.id)
    kept = engine.kept_bytes()
    assert 2048 + 2048 < kept < 2048 + 2048 + 128  # the copy, and the call's input (the same text, sealed)
    assert shown.lines[-1] == f"kept for reverting (copies and call input): {human_size(kept)} (store.max_mib 32)"
    assert cli("status", "--session", session.id, "--json").json()["kept_bytes"] == kept


@SQLITE_FILE
def test_verify_json_gives_each_damaged_record_as_a_code_with_its_params(
    cli, engine, home: Path, project: Path
) -> None:  # type: ignore[no-untyped-def]
    session = engine.new_session(str(project), title="a title")
    engine.close()
    with sqlite3.connect(home / "turnback.db") as db:
        (sealed,) = db.execute("SELECT title_enc FROM sessions WHERE id=?", (session.id,)).fetchone()
        flipped = bytearray(sealed)
        flipped[len(flipped) // 2] ^= 0x01
        db.execute("UPDATE sessions SET title_enc=? WHERE id=?", (bytes(flipped), session.id))
    db.close()
    data = cli("verify", "--json").json()
    assert data["ok"] is False
    assert data["records"] == {session.id: [f"the title of session {short_id(session.id)}"]}
    [damaged] = data["damaged_records"][session.id]
    assert (damaged["code"], damaged["params"]["column"]) == ("record_sealed_value", "title")
    assert damaged["message"] == f"the title of session {short_id(session.id)}"
    assert data["integrity"] == data["integrity_problems"] == []

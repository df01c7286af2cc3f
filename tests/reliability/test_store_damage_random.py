"""Random damage to the database, and sealed values moved to where they do not belong.

Random bytes of ``turnback.db`` are flipped (seeded, after a checkpoint so
the WAL is empty), then ``verify``, ``log`` and ``undo`` (preview, then
``--yes``) run on it. None of them may end in a traceback (exit 70); no file
of the project or the store may be lost; and ``verify`` may never call a
session intact when ``log`` or ``undo`` of it then trip on damage.

A sealed value is bound to its table, column and row by its associated
data: copied into another row, column or table (or a copy's ciphertext
under another copy's id) it must not open, and ``verify`` must name it.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

from tests.conftest import tree_state
from tests.reliability.helpers import SOAK, assert_no_traceback, files_under, record, run
from tests.reliability.scenarios import open_engine
from turnback.model import short_id

ROUNDS = 200 if SOAK else 30
SEED = 20261201
PAGE = 4096


def _build(base: Path) -> tuple[Path, Path, str, str]:
    """Two sessions in two projects; the first has two turns of file tools and a shell command.

    Returns the store, the first project, and the two sessions' ids.
    """
    home, project, other = base / "store", base / "project", base / "other"
    project.mkdir(parents=True)
    other.mkdir()
    for i in range(8):
        (project / f"f{i}.txt").write_bytes(f"file {i}, before the agent\n".encode() * (5 + i * 30))
    (other / "notes.txt").write_bytes(b"another project's notes\n")
    with open_engine(home) as engine:
        first = engine.new_session(str(project), title="the session damage is aimed at", actor="an agent")
        engine.begin_turn(first.id, "first turn")
        engine.write(first.id, "f0.txt", b"zero, by the agent\n")
        engine.edit(first.id, "f1.txt", "before the agent", "edited by the agent", replace_all=True)
        engine.end_turn(first.id)
        engine.begin_turn(first.id, "second turn")
        engine.write(first.id, "f2.txt", b"two\n" * 50)
        engine.write(first.id, "new.txt", b"created by the agent\n")
        engine.delete(first.id, "f3.txt")
        result = engine.run_command(first.id, ["sh", "-c", "echo cmd > f4.txt; echo made > cmd-new.txt; rm f5.txt"])
        assert result.exit_code == 0
        engine.end_turn(first.id)
        second = engine.new_session(str(other), title="another session")
        engine.begin_turn(second.id, "its turn")
        engine.write(second.id, "notes.txt", b"rewritten\n")
        engine.end_turn(second.id)
    with sqlite3.connect(home / "turnback.db") as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return home, project, first.id, second.id


def _put_back(pristine: Path, base: Path) -> None:
    for name in ("store", "project", "other"):
        shutil.rmtree(base / name, ignore_errors=True)
        shutil.copytree(pristine / name, base / name, symlinks=True)


def _flip_random_bytes(db: Path, rng: random.Random) -> str:
    data = bytearray(db.read_bytes())
    pages = len(data) // PAGE
    flipped = []
    for _ in range(rng.randint(1, 3)):
        page = rng.randrange(pages)
        for _ in range(rng.randint(1, 4)):
            offset = page * PAGE + rng.randrange(PAGE)
            data[offset] ^= 1 << rng.randrange(8)
            flipped.append(offset)
    db.write_bytes(bytes(data))
    return ",".join(map(str, flipped))


def _store_files(home: Path) -> set[str]:
    """The store's files, less SQLite's own side files (which it makes and removes itself)."""
    return {rel for rel in files_under(home) if not rel.endswith(("-wal", "-shm", "-journal"))}


def test_random_byte_damage_is_reported_by_verify_before_any_verb_trips_on_it(fast_tmp: Path) -> None:
    base, pristine = fast_tmp / "case", fast_tmp / "pristine"
    home, project, session_id, other_id = _build(base)
    shutil.copytree(base, pristine, symlinks=True)
    undo = ("undo", "--session", session_id)
    assert run(home, *undo, "--yes", cwd=project).rc == 0
    goal = tree_state(project)  # what an undo of the undamaged store gives back

    rng = random.Random(SEED)
    codes: dict[str, dict[int, int]] = {"verify": {}, "log": {}, "preview": {}, "undo": {}}
    detected = tripped = unreadable = 0
    for round_number in range(ROUNDS):
        _put_back(pristine, base)
        flipped = _flip_random_bytes(home / "turnback.db", rng)
        before, store_before = tree_state(project), _store_files(home)
        results = {
            "verify": run(home, "verify", "--json", cwd=project),
            "log": run(home, "log", "--session", session_id, cwd=project),
            "preview": run(home, *undo, "--dry-run", cwd=project),
            "undo": run(home, *undo, "--yes", "--json", cwd=project),
        }
        where = (round_number, flipped)
        for verb, result in results.items():
            assert_no_traceback(result)
            assert result.rc in (0, 1), (where, verb, result.rc, result.err)
            codes[verb][result.rc] = codes[verb].get(result.rc, 0) + 1
        # Nothing is lost: the database and every store file stay, and every project file's bytes are still in
        # the project or in the trash.
        assert (home / "turnback.db").is_file(), where
        assert store_before <= _store_files(home), (where, store_before - _store_files(home))
        kept = {content for kind, content, _ in tree_state(project).values() if kind == "file"}
        kept |= set(files_under(home / "trash").values())
        for rel, (kind, content, _) in before.items():
            assert kind != "file" or content in kept, (where, rel)

        verify = results["verify"]
        report = verify.json()
        undone = results["undo"]
        rows = undone.json().get("rows", []) if undone.out.strip() else []
        trips = (
            any(results[verb].rc != 0 for verb in ("log", "preview", "undo"))
            or any(isinstance(row, dict) and row.get("status") != "done" for row in rows)  # type: ignore[union-attr]
            or tree_state(project) != goal
        )
        if verify.rc == 0:
            assert report["ok"] is True, where
        else:
            detected += 1
            if "error" in report:  # the store could not be opened at all: said so, with what is intact
                unreadable += 1
                assert "is damaged and cannot be read" in verify.err and "are intact" in verify.err, (where, verify.err)
            else:
                assert report["ok"] is False, where
        intact = verify.rc == 0 or session_id in report.get("intact_sessions", [])  # type: ignore[operator]
        if trips:
            tripped += 1
            assert not intact, (where, "verify said intact", verify.out, {v: r.err for v, r in results.items()})
        if verify.rc == 1 and "error" not in report and other_id in report.get("intact_sessions", []):  # type: ignore[operator]
            assert run(home, "log", "--session", other_id, cwd=project).rc == 0, where

    assert detected and tripped, (detected, tripped)
    record(
        "store-random-damage",
        rounds=ROUNDS,
        seed=SEED,
        damage_detected_by_verify=detected,
        rounds_another_verb_tripped=tripped,
        store_unreadable=unreadable,
        exit_codes=codes,
        bytes_lost=0,
    )


# -- sealed values moved to another row, column or table -------------------------------------------


def _swap(db: Path, first: tuple[str, str, str], second: tuple[str, str, str]) -> None:
    """Swap two sealed values in the raw database: each (table, column, WHERE clause naming one row)."""
    with sqlite3.connect(db) as conn:
        values = []
        for table, column, where in (first, second):
            (value,) = conn.execute(f"SELECT {column} FROM {table} WHERE {where}").fetchone()
            assert isinstance(value, bytes), (table, column)
            values.append(value)
        for (table, column, where), value in zip((first, second), reversed(values), strict=True):
            conn.execute(f"UPDATE {table} SET {column}=? WHERE {where}", (value,))
    conn.close()


def test_a_sealed_value_moved_to_another_row_column_or_table_does_not_open(fast_tmp: Path) -> None:
    base, pristine = fast_tmp / "case", fast_tmp / "pristine"
    home, project, session_id, other_id = _build(base)
    shutil.copytree(base, pristine, symlinks=True)
    with open_engine(home) as engine:
        turns = engine.store.turns(session_id, with_calls=True)  # type: ignore[arg-type]
        other_turn = engine.store.turns(other_id)[0]  # type: ignore[arg-type]
        [written] = turns[0].calls[0].changes
        blobs = [change.before.blob for change in turns[1].calls[0].changes + turns[1].calls[2].changes]
    first_turn, second_turn = turns[0].id, turns[1].id
    call_a, call_b = turns[0].calls[0].id, turns[0].calls[1].id
    assert blobs[0] is not None and blobs[1] is not None
    swaps = {
        "rows (two turns' messages)": (
            ("turns", "message_enc", f"id='{first_turn}'"),
            ("turns", "message_enc", f"id='{second_turn}'"),
        ),
        "rows of two sessions (turns' messages)": (
            ("turns", "message_enc", f"id='{second_turn}'"),
            ("turns", "message_enc", f"id='{other_turn.id}'"),
        ),
        "rows (two calls' inputs)": (
            ("calls", "input_enc", f"id='{call_a}'"),
            ("calls", "input_enc", f"id='{call_b}'"),
        ),
        "columns (a session's title and actor)": (
            ("sessions", "title_enc", f"id='{session_id}'"),
            ("sessions", "actor_enc", f"id='{session_id}'"),
        ),
        "tables (a change's path and a call's input)": (
            ("changes", "path_enc", f"id={written.id}"),
            ("calls", "input_enc", f"id='{call_a}'"),
        ),
        "tables (a turn's message and a session's title)": (
            ("turns", "message_enc", f"id='{first_turn}'"),
            ("sessions", "title_enc", f"id='{session_id}'"),
        ),
        "blobs (two copies' ciphertext)": (
            ("blobs", "data", f"id=x'{bytes(blobs[0]).hex()}'"),
            ("blobs", "data", f"id=x'{bytes(blobs[1]).hex()}'"),
        ),
    }
    for label, (first, second) in swaps.items():
        _put_back(pristine, base)
        _swap(home / "turnback.db", first, second)
        before = tree_state(project)
        verify = run(home, "verify", cwd=project)
        assert_no_traceback(verify)
        assert verify.rc == 1, (label, verify.out)
        damaged = [line for line in verify.lines if line.startswith(("session ", "store: ", "database: "))]
        assert damaged or any(line.endswith(("damaged copies", "damaged copy")) for line in verify.lines), (
            label,
            verify.out,
        )
        if label.startswith("blobs"):
            assert "2 damaged copies" in verify.lines, (label, verify.out)
        else:
            assert any(line.startswith(f"session {short_id(session_id)}: damaged: ") for line in verify.lines), (
                label,
                verify.out,
            )
        log = run(home, "log", "--session", session_id, cwd=project)
        assert_no_traceback(log)
        undone = run(home, "undo", "--session", session_id, "--yes", cwd=project)
        assert_no_traceback(undone)
        if not label.startswith("blobs"):
            assert log.rc == 1 and "a stored record is damaged (" in log.err, (label, log.err)
            assert undone.rc == 0 or tree_state(project) == before, (label, undone.err)  # refused: nothing done
    record("store-sealed-values-swapped", swaps=len(swaps), refused_to_open=len(swaps), bytes_lost=0)

"""Redo: take back the newest operation with compare-and-swap; a redo of a redo; the links ``ops`` shows."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import tree_state
from tests.history.helpers import lib_turn, log_json, short_id, turn_id

README_START = b"# project\n\nline two\n"


def _op_line(op_id: str, kind: str, done: int, rows: int, note: str = "") -> str:
    """An ``ops`` line, with its date and time as a pattern."""
    tail = re.escape(f"  ({note})") if note else ""
    return rf"{short_id(op_id)}  \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d  {kind:<8} {done} of {rows} rows done{tail}"


def test_redo_after_undo_gives_back_the_turn_and_a_redo_of_the_redo_undoes_it_again(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    start = tree_state(project)
    sid = engine.new_session(str(project)).id
    lib_turn(engine, sid, "one", ("write", "README.md", b"agent\n"), ("write", "a/b/new.txt", b"new\n"))
    post_turn = tree_state(project)

    undo = cli("undo", "--session", sid, "--yes", "--json").json()
    assert tree_state(project) == start
    dry = cli("redo", "--session", sid, "--dry-run")
    assert dry.rc == 0
    assert dry.lines == [
        f"take back the undo {short_id(undo['plan']['id'])}",
        "restore     README.md",
        "restore     a/",
        "restore     a/b/",
        "restore     a/b/new.txt",
    ]
    assert tree_state(project) == start

    redo = cli("redo", "--session", sid, "--yes", "--json")
    assert redo.rc == 0, redo.err
    first = redo.json()
    assert first["applied"] is True and first["plan"]["kind"] == "redo"
    assert tree_state(project) == post_turn  # byte for byte, modes included
    assert [t["undone"] for t in log_json(cli, sid)["turns"]] == [False]

    again = cli("redo", "--session", sid, "--yes", "--json")
    assert again.rc == 0, again.err
    second = again.json()
    assert tree_state(project) == start
    assert [t["undone"] for t in log_json(cli, sid)["turns"]] == [True]

    ops = cli("ops", "--session", sid)
    assert ops.rc == 0
    u, r1, r2 = undo["plan"]["id"], first["plan"]["id"], second["plan"]["id"]
    expected = [  # newest first
        _op_line(r2, "redo", 4, 4, f"takes back {short_id(r1)}"),
        _op_line(r1, "redo", 4, 4, f"taken back by {short_id(r2)}; takes back {short_id(u)}"),
        _op_line(u, "undo", 4, 4, f"taken back by {short_id(r1)}"),
    ]
    assert len(ops.lines) == 3
    for line, pattern in zip(ops.lines, expected, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)
    items = cli("ops", "--session", sid, "--json").json()["ops"]
    assert [(o["id"], o["kind"], o["reverses"], o["taken_back_by"]) for o in items] == [
        (r2, "redo", r1, None),
        (r1, "redo", u, r2),
        (u, "undo", None, r1),
    ]


def test_redo_is_refused_when_the_file_changed_since_and_keeps_the_users_bytes(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = engine.new_session(str(project)).id
    lib_turn(engine, sid, "one", ("write", "README.md", b"agent\n"))
    undo = cli("undo", "--session", sid, "--yes", "--json").json()
    (project / "README.md").write_bytes(b"user after the undo\n")
    before = tree_state(project)

    refused = cli("redo", "--session", sid, "--yes")
    assert refused.rc == 1
    reason = "changed since the operation; taking it back would overwrite that, so it is left as it is"
    assert refused.lines == [
        f"take back the undo {short_id(undo['plan']['id'])}",
        f"skip        README.md ({reason})",
        "redo changed nothing",
        f"skipped     README.md ({reason})",
    ]
    assert tree_state(project) == before
    assert (project / "README.md").read_bytes() == b"user after the undo\n"
    [redo_op, undo_op] = cli("ops", "--session", sid, "--json").json()["ops"]
    assert undo_op["taken_back_by"] is None  # the undo still stands
    assert (redo_op["kind"], redo_op["done"], redo_op["reverses"]) == ("redo", 0, undo_op["id"])
    assert [t["undone"] for t in log_json(cli, sid)["turns"]] == [True]


def test_redo_of_a_rollback_moves_the_head_and_the_files_forward_again(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = engine.new_session(str(project)).id
    lib_turn(engine, sid, "one", ("write", "README.md", b"1\n"))
    after_one = tree_state(project)
    lib_turn(engine, sid, "two", ("write", "README.md", b"2\n"), ("write", "two.txt", b"2\n"))
    lib_turn(engine, sid, "three", ("rm", "docs/guide.md"))
    after_three = tree_state(project)
    tree = log_json(cli, sid)
    t1, t3 = turn_id(tree, 1), turn_id(tree, 3)

    assert cli("rollback", "1", "--session", sid, "--confirm").rc == 0
    assert tree_state(project) == after_one
    assert log_json(cli, sid)["head"] == t1

    redo = cli("redo", "--session", sid, "--yes")
    assert redo.rc == 0, redo.err
    assert tree_state(project) == after_three
    back = log_json(cli, sid)
    assert back["head"] == t3
    assert [(t["branch"], t["undone"]) for t in back["turns"]] == [("active", False)] * 3

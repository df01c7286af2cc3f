"""The history tree: branches after a rollback, the log graph, stale heads, other sessions' turns, interruptions."""

from __future__ import annotations

from pathlib import Path

import pytest

import turnback
from tests.conftest import tree_state
from tests.history.helpers import call_ids, cli_turn, lib_turn, log_json, new_session, short_id, turn_id

README_START = b"# project\n\nline two\n"


def _three_turns(engine: turnback.Engine, project: Path) -> str:
    """A session of three turns, recorded through the library (quicker); its id."""
    sid = engine.new_session(str(project), title="t").id
    lib_turn(engine, sid, "one", ("write", "README.md", b"one\n"), ("write", "new1.txt", b"n1\n"))
    lib_turn(engine, sid, "two", ("edit", "README.md", "one", "two"), ("write", "sub/new2.txt", b"n2\n"))
    lib_turn(engine, sid, "three", ("rm", "docs/guide.md"), ("write", "README.md", b"three\n"))
    return sid


def test_rollback_keeps_the_abandoned_branch_and_a_new_turn_starts_a_new_one(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = new_session(cli)
    cli_turn(cli, sid, "one", ("write", "README.md", b"one\n"), ("write", "new1.txt", b"n1\n"))
    after_one = tree_state(project)
    cli_turn(cli, sid, "two", ("edit", "README.md", "one", "two"), ("write", "sub/new2.txt", b"n2\n"))
    cli_turn(cli, sid, "three", ("rm", "docs/guide.md"), ("write", "README.md", b"three\n"))
    after_three = tree_state(project)
    ids = log_json(cli, sid)
    t1, t2, t3 = (turn_id(ids, n) for n in (1, 2, 3))

    preview = cli("rollback", "1", "--session", sid)
    assert preview.rc == 0, preview.err
    assert preview.lines == [
        f"roll back to turn 1 ({short_id(t1)})",
        f"rewind turn 3 ({short_id(t3)}): three",
        "restore     docs/guide.md",
        "restore     README.md",  # its rows of turns 3 and 2 chain into one, shown with turn 3
        f"rewind turn 2 ({short_id(t2)}): two",
        "trash       sub/new2.txt",
        "trash       sub/",
        "what the files go back to: +2 -2 (--diff shows the whole diff)",
        "  README.md      +1 -1",
        "  docs/guide.md  +1",
        "  sub/new2.txt   -1",
        f"this changes nothing yet: turnback rollback 1 --session {sid} --confirm --expect-head {short_id(t3)}"
        " applies it",
    ]
    assert tree_state(project) == after_three
    assert log_json(cli, sid)["head"] == t3
    whole = cli("rollback", "1", "--session", sid, "--diff")
    assert whole.lines[7:15] == [
        "diff --git a/docs/guide.md b/docs/guide.md",
        "new file mode 100644",
        *whole.lines[9:11],  # the index line, and --- /dev/null
        "+++ b/docs/guide.md",
        "@@ -0,0 +1 @@",
        "+no final newline",
        "\\ No newline at end of file",
    ]
    assert "-three" in whole.lines and "+one" in whole.lines and tree_state(project) == after_three
    planned = cli("rollback", "1", "--session", sid, "--json").json()
    assert (planned["applied"], planned["turns"], planned["plan"]["kind"]) == (False, [t3, t2], "rollback")
    assert {row["status"] for row in planned["rows"]} == {"pending"}
    assert tree_state(project) == after_three

    applied = cli("rollback", "1", "--session", sid, "--confirm", "--json")
    assert applied.rc == 0, applied.err
    data = applied.json()
    assert data["applied"] is True
    assert data["turns"] == [t3, t2]
    assert {row["status"] for row in data["rows"]} == {"done"}
    assert tree_state(project) == after_one  # turn 1's end state, byte for byte, modes included

    t4 = cli_turn(cli, sid, "four", ("write", "README.md", b"four\n"))
    t5 = cli_turn(cli, sid, "five", ("write", "new5.txt", b"n5\n"))
    expected_end = dict(after_one)
    expected_end["README.md"] = ("file", b"four\n", after_one["README.md"][2])
    expected_end["new5.txt"] = ("file", b"n5\n", 0o644)
    end_state = tree_state(project)
    assert end_state["new5.txt"][:2] == expected_end["new5.txt"][:2]
    expected_end["new5.txt"] = end_state["new5.txt"]  # its mode is the umask's
    assert end_state == expected_end

    tree = log_json(cli, sid)
    calls = {n: call_ids(tree, n) for n in range(1, 6)}
    c = {n: [short_id(i) for i in ids] for n, ids in calls.items()}
    shown = cli("log", "--session", sid)
    assert shown.rc == 0
    assert shown.lines == [
        f"* turn 5  {short_id(t5)}  five  [head]",
        f"|   {c[5][0]}  write new5.txt",
        "|     new new5.txt +1 -0",
        f"* turn 4  {short_id(t4)}  four",
        f"|   {c[4][0]}  write README.md",
        "|     modified README.md +1 -1",
        f"| * turn 3  {short_id(t3)}  three  [abandoned, undone]",
        f"| |   {c[3][0]}  delete docs/guide.md",
        f"| |   {c[3][1]}  write README.md",
        "| |     deleted docs/guide.md +0 -1",
        "| |     modified README.md +1 -1",
        f"| * turn 2  {short_id(t2)}  two  [abandoned, undone]",
        f"| |   {c[2][0]}  edit README.md",
        f"| |   {c[2][1]}  write sub/new2.txt",
        "| |     modified README.md +1 -1",
        "| |     new sub/new2.txt +1 -0",
        "|/",
        f"* turn 1  {short_id(t1)}  one",
        f"    {c[1][0]}  write README.md",
        f"    {c[1][1]}  write new1.txt",
        "      modified README.md +1 -3",
        "      new new1.txt +1 -0",
    ]
    assert tree["head"] == t5
    nodes = {t["number"]: (t["id"], t["parent"], t["head"], t["branch"]) for t in tree["turns"]}
    assert nodes == {
        1: (t1, None, False, "active"),
        2: (t2, t1, False, "abandoned"),
        3: (t3, t2, False, "abandoned"),
        4: (t4, t1, False, "active"),
        5: (t5, t4, True, "active"),
    }


def test_undo_acts_on_the_active_line_only(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    start = tree_state(project)
    sid = _three_turns(engine, project)
    assert cli("rollback", "1", "--session", sid, "--confirm").rc == 0
    cli_turn(cli, sid, "four", ("write", "README.md", b"four\n"))
    undone = [cli("undo", "--session", sid, "--yes", "--json").json()["plan"]["turns"] for _ in range(2)]
    tree = log_json(cli, sid)
    assert undone == [[turn_id(tree, 4)], [turn_id(tree, 1)]]  # never the abandoned turns 3 and 2
    assert tree_state(project) == start
    again = cli("undo", "--session", sid, "--yes")
    assert (again.rc, again.err) == (1, "turnback: nothing to undo: every turn of this session is undone\n")


def test_rollback_to_0_goes_back_to_the_start_of_the_session(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    start = tree_state(project)
    sid = _three_turns(engine, project)
    rolled = cli("rollback", "0", "--session", sid, "--confirm", "--json")
    assert rolled.rc == 0, rolled.err
    assert len(rolled.json()["turns"]) == 3
    assert tree_state(project) == start
    tree = log_json(cli, sid)
    assert tree["head"] is None
    assert {t["branch"] for t in tree["turns"]} == {"abandoned"}
    first_of_new_line = cli("turn", "begin", "--session", sid, "--json").json()["turn"]
    assert (first_of_new_line["number"], first_of_new_line["parent"]) == (4, None)


def test_a_stale_head_and_another_sessions_turn_are_refused_and_nothing_changes(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = _three_turns(engine, project)
    other = engine.new_session(str(project)).id
    other_turn = lib_turn(engine, other, "elsewhere", ("write", "other.txt", b"o\n")).id
    tree_before = tree_state(project)
    log_before = cli("log", "--session", sid).out
    ops_before = cli("ops", "--session", sid).out
    head = log_json(cli, sid)["head"]

    stale = cli("rollback", "1", "--session", sid, "--expect-head", "2", "--confirm")
    assert stale.rc == 1
    assert stale.err == (
        "turnback: stale head: the session's head is turn 3, not the one given (2); another turn or rollback "
        "happened since. Nothing was changed: look again\n"
    )
    foreign = cli("rollback", other_turn, "--session", sid, "--confirm")
    assert foreign.rc == 1
    assert foreign.err == (
        f"turnback: turn {short_id(other_turn)} belongs to another session, not {short_id(sid)}; nothing was changed\n"
    )
    foreign_head = cli("rollback", "1", "--session", sid, "--expect-head", other_turn[:16], "--confirm")
    assert foreign_head.rc == 1
    assert "belongs to another session" in foreign_head.err

    assert tree_state(project) == tree_before
    assert cli("log", "--session", sid).out == log_before
    assert cli("ops", "--session", sid).out == ops_before == "no operations yet\n"
    assert log_json(cli, sid)["head"] == head

    # the head the caller saw, by id, is accepted
    fresh = cli("rollback", "2", "--session", sid, "--expect-head", head, "--confirm", "--json")
    assert fresh.rc == 0, fresh.err
    assert log_json(cli, sid)["head"] == turn_id(log_json(cli, sid), 2)


def test_a_rollback_previewed_before_a_new_turn_is_refused_when_applied(engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    session = engine.new_session(str(project))
    lib_turn(engine, session.id, "one", ("write", "a.txt", b"1\n"))
    lib_turn(engine, session.id, "two", ("write", "a.txt", b"2\n"))
    plan = engine.plan_rollback(session.id, "1")
    lib_turn(engine, session.id, "three", ("write", "b.txt", b"3\n"))
    before = tree_state(project)
    with pytest.raises(turnback.RefusedError, match="the session's head moved since the preview"):
        engine.apply(plan)
    assert tree_state(project) == before
    assert engine.session(session.id).head == engine.log(session.id)[-1].id
    assert engine.operations(session.id) == []


def test_a_turn_of_an_abandoned_branch_cannot_be_rolled_back_to(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = _three_turns(engine, project)
    assert cli("rollback", "1", "--session", sid, "--confirm").rc == 0
    before = tree_state(project)
    refused = cli("rollback", "2", "--session", sid, "--confirm")
    assert refused.rc == 1
    assert refused.err == (
        "turnback: turn 2 is on an abandoned branch, not on the active line; roll back to a turn of the line\n"
    )
    assert tree_state(project) == before


def test_status_shows_an_interrupted_rollback_and_the_next_undo_finishes_it(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = engine.new_session(str(project)).id
    lib_turn(engine, sid, "one", ("write", "README.md", b"one\n"), ("write", "new1.txt", b"n1\n"))
    after_one = tree_state(project)
    lib_turn(engine, sid, "two", ("write", "f2.txt", b"2\n"))
    lib_turn(engine, sid, "three", ("write", "f3.txt", b"3\n"), ("write", "README.md", b"three\n"))
    tree = log_json(cli, sid)
    t1, t3 = turn_id(tree, 1), turn_id(tree, 3)

    # rows: restore README.md, trash f3.txt (turn 3), trash f2.txt (turn 2), in one batch: README.md's temp file
    # written (1), the three displaced files linked into the trash (2-4), the batch's sync (5), README.md renamed
    # (6): killed there, once README.md is restored and before f3.txt is removed; the journal marks the batch's
    # rows only after the sync of their folders, so all three are pending
    killed = cli("rollback", "1", "--session", sid, "--confirm", env={"TURNBACK_FAULT_KILL_AFTER": "6"})
    assert killed.rc == -9
    status = cli("status", "--session", sid)
    assert status.rc == 0
    interrupted = cli("status", "--session", sid, "--json").json()["interrupted"]
    op = interrupted["plan"]["id"]
    journal = [(row["action"], row["path"], row["status"]) for row in interrupted["rows"]]
    assert journal == [
        ("restore", "README.md", "pending"),
        ("trash", "f3.txt", "pending"),
        ("trash", "f2.txt", "pending"),
    ]
    assert status.lines[:5] == [
        f"session {short_id(sid)}  head: turn 3 ({short_id(t3)})",
        f"interrupted: rollback {short_id(op)}, 0 of 3 rows done; turnback undo --yes finishes it",
        "  pending: restore     README.md",
        "  pending: trash       f3.txt",
        "  pending: trash       f2.txt",
    ]
    assert (project / "f3.txt").read_bytes() == b"3\n"
    assert (project / "README.md").read_bytes() == b"one\n"
    assert (project / "f2.txt").read_bytes() == b"2\n"

    finished = cli("undo", "--session", sid, "--yes")
    assert finished.rc == 0, finished.err
    assert finished.lines[0] == f"the rollback {short_id(op)} was interrupted; it goes on now:"
    assert f"finished the interrupted rollback {short_id(op)}" in finished.lines
    assert tree_state(project) == after_one
    assert log_json(cli, sid)["head"] == t1
    idle = cli("status", "--session", sid)
    assert idle.lines[:2] == [
        f"session {short_id(sid)}  head: turn 1 ({short_id(t1)})",
        "idle: nothing runs, nothing is unfinished",
    ]
    ops = cli("ops", "--session", sid, "--json").json()["ops"]
    assert [(o["kind"], o["status"], o["done"], o["rows"]) for o in ops] == [("rollback", "done", 3, 3)]

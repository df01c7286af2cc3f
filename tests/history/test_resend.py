"""Edit and resend: the preview's numbers, --revert (stopped by a file it cannot revert), --anyway, --keep."""

from __future__ import annotations

import re
from pathlib import Path

import turnback
from tests.conftest import tree_state
from tests.history.helpers import call_ids, cli_turn, lib_turn, log_json, short_id, turn_id

X_START = b"l1\nl2\nl3\n"
Y_START = b"y1\ny2\n"


def _crafted(engine: turnback.Engine, project: Path) -> str:
    """Turn 1 keeps a file; x.txt is changed by 2 calls over turns 2 and 3; y.txt by 1 call; z.txt is created."""
    (project / "x.txt").write_bytes(X_START)
    (project / "y.txt").write_bytes(Y_START)
    sid = engine.new_session(str(project), title="t").id
    lib_turn(engine, sid, "zero", ("write", "k.txt", b"keep\n"))
    lib_turn(engine, sid, "one", ("edit", "x.txt", "l1", "L1"))
    lib_turn(
        engine,
        sid,
        "two",
        ("edit", "x.txt", "l3\n", "l3\nl4\nl5\n"),
        ("edit", "y.txt", "y2", "Y2"),
        ("write", "z.txt", b"z1\nz2\nz3\n"),
    )
    return sid


def test_the_preview_lists_each_file_once_with_its_calls_and_lines(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = _crafted(engine, project)
    before = tree_state(project)
    log_before = cli("log", "--session", sid).out
    t2 = turn_id(log_json(cli, sid), 2)
    preview = cli("resend", "2", "--session", sid)
    assert preview.rc == 0, preview.err
    # x.txt now holds L1 l2 l3 l4 l5; back to l1 l2 l3 a revert adds l1 and removes L1, l4, l5
    assert preview.lines == [
        "x.txt  2 calls   +1 -3",
        "y.txt  1 call    +1 -1",
        "z.txt  1 call    +0 -3",
        f"edit and resend the message of turn 2 ({short_id(t2)})",
        "trash       z.txt",
        "restore     y.txt",
        "restore     x.txt",
        "nothing sent yet: choose --revert (Revert and Send), --keep (Keep Files and Send) or --anyway (Send Anyway)",
    ]
    data = cli("resend", "2", "--session", sid, "--json").json()
    assert data["files"] == [
        {"path": "x.txt", "calls": 2, "added": 1, "removed": 3},
        {"path": "y.txt", "calls": 1, "added": 1, "removed": 1},
        {"path": "z.txt", "calls": 1, "added": 0, "removed": 3},
    ]
    assert data["applied"] is False
    assert tree_state(project) == before
    assert cli("log", "--session", sid).out == log_before


def test_the_preview_json_says_nothing_was_resent(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = _crafted(engine, project)
    data = cli("resend", "2", "--session", sid, "--json").json()
    assert set(data) >= {"files", "rows", "applied", "resent"}
    assert (data["applied"], data["resent"]) == (False, False)


def test_revert_stops_at_a_file_it_cannot_revert_then_anyway_resends(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = _crafted(engine, project)
    tree = log_json(cli, sid)
    t1, t2, t3 = (turn_id(tree, n) for n in (1, 2, 3))
    (project / "y.txt").write_bytes(b"y1\nY2\nuser\n")  # the user's edit: y.txt cannot be reverted

    stopped = cli("resend", "2", "--session", sid, "--revert")
    assert stopped.rc == 1
    trash = re.search(r"moved to (\S+)/$", stopped.lines[3])
    assert trash is not None
    assert stopped.lines == [
        "x.txt  2 calls   +1 -3",
        "y.txt  1 call    +1 -2",
        "z.txt  1 call    +0 -3",
        f"reverted: 1 file restored, 1 file moved to {trash.group(1)}/",
        "skipped     y.txt (changed since the call, so it cannot be reverted; --anyway drops its copy)",
        "nothing was resent: 1 change could not be reverted (above); the reverts done stay done. "
        "--anyway drops their copies and resends, --keep resends as they are",
    ]
    assert Path(trash.group(1), "z.txt").read_bytes() == b"z1\nz2\nz3\n"
    assert Path(trash.group(1), "x.txt").read_bytes() == b"L1\nl2\nl3\nl4\nl5\n"
    # the reverts done stay done; the user's bytes stay; nothing was resent: the head and the calls stay
    assert (project / "x.txt").read_bytes() == X_START
    assert not (project / "z.txt").exists()
    assert (project / "y.txt").read_bytes() == b"y1\nY2\nuser\n"
    after = log_json(cli, sid)
    assert after["head"] == t3
    assert {t["branch"] for t in after["turns"]} == {"active"}
    assert [len(t["calls"]) for t in after["turns"]] == [1, 1, 3]
    assert [line for line in cli("log", "--session", sid).lines if line.startswith("* ")] == [
        f"* turn 3  {short_id(t3)}  two  [head, partly undone]",
        f"* turn 2  {short_id(t2)}  one  [undone]",
        f"* turn 1  {short_id(t1)}  zero",
    ]
    assert cli("notices", "--session", sid).lines == ["Reverted the change to z.txt", "Reverted the change to x.txt"]

    anyway = cli("resend", "2", "--session", sid, "--anyway", "--json")
    assert anyway.rc == 0, anyway.err
    data = anyway.json()
    assert data["files"] == [{"path": "y.txt", "calls": 1, "added": 1, "removed": 2}]
    assert (data["applied"], data["resent"]) == (True, True)
    assert (project / "y.txt").read_bytes() == b"y1\nY2\nuser\n"  # dropped, never overwritten
    assert (project / "x.txt").read_bytes() == X_START

    resent = log_json(cli, sid)
    assert resent["head"] == t1  # turn 2's parent
    nodes = {t["number"]: (t["branch"], t["head"], len(t["calls"])) for t in resent["turns"]}
    assert nodes == {1: ("active", True, 1), 2: ("resent", False, 0), 3: ("resent", False, 0)}

    assert cli("read", "--session", sid, "x.txt").out == X_START.decode()  # reverted: read before a change
    t4 = cli_turn(cli, sid, "one, edited", ("edit", "x.txt", "l2", "L2"))
    tree = log_json(cli, sid)
    assert [t["parent"] for t in tree["turns"] if t["number"] == 4] == [t1]
    c1, c4 = call_ids(tree, 1)[0], call_ids(tree, 4)[0]
    assert cli("log", "--session", sid).lines == [
        f"* turn 4  {short_id(t4)}  one, edited  [head]",
        f"|   {short_id(c4)}  edit x.txt",
        "|     modified x.txt +1 -1",
        f"| * turn 3  {short_id(t3)}  two  [replaced by an edited message]",
        f"| * turn 2  {short_id(t2)}  one  [replaced by an edited message]",
        "|/",
        f"* turn 1  {short_id(t1)}  zero",
        f"    {short_id(c1)}  write k.txt",
        "      new k.txt +1 -0",
    ]


def test_revert_and_send_takes_every_change_back_and_notices_name_each_file(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = _crafted(engine, project)
    t1 = engine.log(sid)[0]
    sent = cli("resend", "2", "--session", sid, "--revert", "--json")
    assert sent.rc == 0, sent.err
    data = sent.json()
    assert (data["applied"], data["resent"]) == (True, True)
    assert [row["status"] for row in data["rows"]] == ["done", "done", "done"]
    assert (project / "x.txt").read_bytes() == X_START
    assert (project / "y.txt").read_bytes() == Y_START
    assert not (project / "z.txt").exists()
    assert log_json(cli, sid)["head"] == t1.id
    notices = cli("notices", "--session", sid, "--json").json()["notices"]
    assert notices == [
        {
            "path": "z.txt",
            "text": "Reverted the change to z.txt",
            "code": "reverted_change_notice",
            "params": {"path": "z.txt"},
            "message": "Reverted the change to z.txt",
        },
        {
            "path": "y.txt",
            "text": "Reverted the change to y.txt",
            "code": "reverted_change_notice",
            "params": {"path": "y.txt"},
            "message": "Reverted the change to y.txt",
        },
        {
            "path": "x.txt",
            "text": "Reverted the change to x.txt",
            "code": "reverted_change_notice",
            "params": {"path": "x.txt"},
            "message": "Reverted the change to x.txt",
        },
    ]
    after = tree_state(project)
    redo = cli("redo", "--session", sid, "--yes")  # its calls are deleted: a resend cannot be taken back
    assert redo.rc == 1
    assert redo.err.startswith(f"turnback: the newest operation is an edit and resend ({short_id(data['plan']['id'])})")
    assert redo.err.endswith("cannot be taken back; what it displaced is in its trash\n")
    assert tree_state(project) == after


def test_keep_resends_and_leaves_the_files_and_gc_reclaims_the_dropped_copies(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = _crafted(engine, project)
    before = tree_state(project)
    kept = cli("resend", "3", "--session", sid, "--keep", "--json")
    assert kept.rc == 0, kept.err
    data = kept.json()
    assert (data["applied"], data["resent"], data["rows"]) == (True, True, [])
    assert tree_state(project) == before
    tree = log_json(cli, sid)
    assert tree["head"] == turn_id(tree, 2)
    assert [t["branch"] for t in tree["turns"]] == ["active", "active", "resent"]
    assert cli("notices", "--session", sid).out == ""
    gc = cli("gc")
    assert gc.rc == 0, gc.err
    # turn 3's copies nothing else needs: x.txt's last content, y.txt before and after, z.txt
    assert re.fullmatch(r"reclaimed 4 copies \(\d+ B\)", gc.out.strip()), gc.out  # their stored (sealed) size
    redo = cli("redo", "--session", sid, "--yes")
    assert (redo.rc, redo.err) == (1, "turnback: nothing to redo: no operation of this session is left to take back\n")

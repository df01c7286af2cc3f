"""Busy marks, a turn that waits for an undo, the files view, notices and must-read, service notes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import cli_env, tree_state
from tests.history.helpers import call_ids, lib_turn, log_json
from turnback.ops.busy import session_apply_lock

README_START = b"# project\n\nline two\n"


def test_a_busy_mark_refuses_every_take_back_with_exit_3_until_it_ends(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = engine.new_session(str(project)).id
    lib_turn(engine, sid, "one", ("write", "README.md", b"1\n"))
    lib_turn(engine, sid, "two", ("write", "README.md", b"2\n"))
    call = call_ids(log_json(cli, sid), 2)[0]
    started = cli("busy", "start", "--session", sid, "compaction")
    assert (started.rc, started.out) == (0, "busy: compaction\n")
    before = tree_state(project)

    expected = (
        f"turnback: the session is busy: compaction (marked by process {os.getpid()}); "
        "wait until it ends (turnback busy end)\n"
    )
    for verb in (
        ["undo", "--yes"],
        ["revert", call, "--yes"],
        ["rollback", "1", "--confirm"],
        ["resend", "2", "--revert"],
        ["redo", "--yes"],
    ):
        refused = cli(*verb, "--session", sid) if verb[0] != "revert" else cli(*verb)
        assert (refused.rc, refused.err) == (3, expected), verb
    assert tree_state(project) == before
    assert "busy: compaction" in cli("status", "--session", sid).lines
    status = cli("status", "--session", sid, "--json").json()
    assert status["busy"] == ["compaction"]
    assert [(r["code"], r["message"]) for r in status["busy_reasons"]] == [("plain", "compaction")]
    assert cli("ops", "--session", sid).out == "no operations yet\n"

    ended = cli("busy", "end", "--session", sid, "compaction")
    assert (ended.rc, ended.out) == (0, "ended 1 busy mark\n")
    assert cli("busy", "end", "--session", sid).out == "ended 0 busy marks\n"
    assert cli("undo", "--session", sid, "--yes").rc == 0
    assert (project / "README.md").read_bytes() == b"1\n"


def test_a_mark_whose_holder_died_expires(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = engine.new_session(str(project)).id
    lib_turn(engine, sid, "one", ("write", "README.md", b"1\n"))
    holder = subprocess.Popen(["sleep", "60"])
    try:
        assert cli("busy", "start", "--session", sid, "approval waiting", "--pid", str(holder.pid)).rc == 0
        refused = cli("undo", "--session", sid, "--yes")
        assert refused.rc == 3
        assert refused.err == (
            f"turnback: the session is busy: approval waiting (marked by process {holder.pid}); "
            "wait until it ends (turnback busy end)\n"
        )
    finally:
        holder.kill()
        holder.wait()
    assert cli("undo", "--session", sid, "--yes").rc == 0
    assert (project / "README.md").read_bytes() == README_START
    assert cli("status", "--session", sid, "--json").json()["busy"] == []


def test_turn_begin_waits_for_an_undo_that_applies_while_undo_is_refused(
    cli, engine, home: Path, project: Path
) -> None:  # type: ignore[no-untyped-def]
    sid = engine.new_session(str(project)).id
    lib_turn(engine, sid, "one", ("write", "README.md", b"1\n"))
    # the lock an undo holds while it applies, held here as a running undo would hold it
    with session_apply_lock(engine.store, engine.session(sid).id):
        other = cli("undo", "--session", sid, "--yes")
        assert other.rc == 3
        assert other.err == (
            f"turnback: an undo is being applied in this session (process {os.getpid()}); wait for it to finish\n"
        )
        waiting = subprocess.Popen(
            [sys.executable, "-m", "turnback", "turn", "begin", "--session", sid, "--message", "sent meanwhile"],
            cwd=project,
            env=cli_env(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        time.sleep(2.0)
        assert waiting.poll() is None  # still waiting, not refused
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    assert out.decode().startswith("turn 2 ")
    assert [t["status"] for t in log_json(cli, sid)["turns"]] == ["ended", "running"]


def test_files_lists_each_file_of_the_active_line_with_its_state(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = engine.new_session(str(project)).id
    lib_turn(
        engine,
        sid,
        "one",
        ("write", "README.md", b"1\n"),
        ("write", "new.txt", b"new\n"),
        ("rm", "docs/guide.md"),
        ("write", "src/main.py", b"print(1)\n"),
    )
    lib_turn(engine, sid, "two", ("edit", "README.md", "1", "2"), ("write", "other.txt", b"o\n"))
    lib_turn(engine, sid, "three", ("write", "abandoned.txt", b"a\n"))
    tree = log_json(cli, sid)
    for call in (call_ids(tree, 1)[3], call_ids(tree, 2)[1]):  # src/main.py and other.txt
        assert cli("revert", call, "--yes").rc == 0
    assert cli("rollback", "2", "--session", sid, "--confirm").rc == 0  # turn 3 leaves the active line

    shown = cli("files", "--session", sid)
    assert shown.rc == 0
    assert shown.lines == [
        "README.md      as of turn 2",
        "new.txt        created in turn 1",
        "docs/guide.md  deleted in turn 1",
        "src/main.py    reverted",
        "other.txt      reverted",
    ]
    assert cli("files", "--session", sid, "--json").json()["files"] == [
        {
            "path": "README.md",
            "state": "as of turn 2",
            "code": "file_as_of",
            "params": {"number": 2},
            "message": "as of turn 2",
        },
        {
            "path": "new.txt",
            "state": "created in turn 1",
            "code": "file_created_in",
            "params": {"number": 1},
            "message": "created in turn 1",
        },
        {
            "path": "docs/guide.md",
            "state": "deleted in turn 1",
            "code": "file_deleted_in",
            "params": {"number": 1},
            "message": "deleted in turn 1",
        },
        {"path": "src/main.py", "state": "reverted", "code": "file_reverted", "params": {}, "message": "reverted"},
        {"path": "other.txt", "state": "reverted", "code": "file_reverted", "params": {}, "message": "reverted"},
    ]


def test_a_revert_gives_one_notice_per_file_and_the_file_must_be_read_before_it_changes(
    cli, engine, project: Path
) -> None:  # type: ignore[no-untyped-def]
    sid = engine.new_session(str(project)).id
    lib_turn(engine, sid, "one", ("edit", "README.md", "line two", "line 2"), ("write", "src/main.py", b"agent\n"))
    calls = call_ids(log_json(cli, sid), 1)
    assert cli("revert", calls[0], "--yes").rc == 0
    assert cli("notices", "--session", sid).out == "Reverted the change to README.md\n"
    assert cli("notices", "--session", sid).out == ""  # each once
    assert cli("revert", calls[1], "--yes").rc == 0
    assert cli("notices", "--session", sid, "--json").json() == {
        "schema": 1,
        "notices": [
            {
                "path": "src/main.py",
                "text": "Reverted the change to src/main.py",
                "code": "reverted_change_notice",
                "params": {"path": "src/main.py"},
                "message": "Reverted the change to src/main.py",
            }
        ],
    }
    assert cli("notices", "--session", sid, "--json").json()["notices"] == []

    assert cli("turn", "begin", "--session", sid).rc == 0
    before = tree_state(project)
    refusal = (
        "turnback: README.md was reverted since the assistant last read it; read it again first "
        "(turnback read README.md) so the change is made to what it holds now\n"
    )
    for verb in (
        ["edit", "README.md", "--old", "line two", "--new", "x"],
        ["write", "README.md"],
        ["rm", "README.md"],
    ):
        refused = cli(*verb, "--session", sid, stdin=b"x\n")
        assert (refused.rc, refused.err) == (1, refusal), verb
    assert tree_state(project) == before
    read = cli("read", "--session", sid, "README.md")
    assert (read.rc, read.out) == (0, README_START.decode())
    assert cli("edit", "--session", sid, "README.md", "--old", "line two", "--new", "line 3").rc == 0
    assert (
        cli("edit", "--session", sid, "README.md", "--old", "line 3", "--new", "line 4").rc == 0
    )  # read once is enough
    assert cli("write", "--session", sid, "src/main.py", stdin=b"again\n").rc == 1  # still unread
    assert cli("read", "--session", sid, "src/main.py", "--json").json()["text"] == "import pkg\n\nprint('hi')\n"
    assert cli("write", "--session", sid, "src/main.py", stdin=b"again\n").rc == 0
    assert cli("turn", "end", "--session", sid).rc == 0


def test_two_reverts_of_one_file_give_one_notice(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = engine.new_session(str(project)).id
    lib_turn(engine, sid, "one", ("edit", "README.md", "# project", "# agent"), ("edit", "README.md", "two", "2"))
    first, second = call_ids(log_json(cli, sid), 1)
    assert cli("revert", second, "--yes").rc == 0
    assert cli("revert", first, "--yes").rc == 0
    assert (project / "README.md").read_bytes() == README_START
    assert cli("notices", "--session", sid).lines == ["Reverted the change to README.md"]


def test_an_undo_gives_no_notice_and_needs_no_read(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = engine.new_session(str(project)).id
    lib_turn(engine, sid, "one", ("write", "README.md", b"agent\n"))
    assert cli("undo", "--session", sid, "--yes").rc == 0
    assert cli("notices", "--session", sid).out == ""
    lib_turn(engine, sid, "two", ("write", "README.md", b"again\n"))
    assert (project / "README.md").read_bytes() == b"again\n"


def test_a_reverted_file_the_agent_created_can_be_written_again(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    """After a revert trashed a file the agent made, the agent reads (nothing is there) and may write it again."""
    sid = engine.new_session(str(project)).id
    lib_turn(engine, sid, "one", ("write", "made.txt", b"made\n"))
    assert cli("revert", call_ids(log_json(cli, sid), 1)[0], "--yes").rc == 0
    assert cli("notices", "--session", sid).out == "Reverted the change to made.txt\n"
    assert cli("turn", "begin", "--session", sid).rc == 0
    cli("read", "--session", sid, "made.txt")  # what an assistant told to read first does
    wrote = cli("write", "--session", sid, "made.txt", stdin=b"made again\n")
    assert wrote.rc == 0, wrote.err
    assert (project / "made.txt").read_bytes() == b"made again\n"


def test_reading_a_missing_file_is_a_clear_error(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = engine.new_session(str(project)).id
    missing = cli("read", "--session", sid, "no-such-file.txt")
    assert missing.rc in (1, 2)
    assert missing.err.startswith("turnback: ") and "unexpected error" not in missing.err
    assert "no-such-file.txt" in missing.err


def test_reverting_a_config_file_a_service_loads_names_its_check(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    conf = project / "etc" / "nginx" / "nginx.conf"
    conf.parent.mkdir(parents=True)
    conf.write_bytes(b"worker_processes 1;\n")
    sid = engine.new_session(str(project)).id
    lib_turn(engine, sid, "one", ("edit", "etc/nginx/nginx.conf", "1", "4"), ("write", "plain.txt", b"p\n"))
    calls = call_ids(log_json(cli, sid), 1)
    reverted = cli("revert", calls[0], "--yes")
    assert reverted.rc == 0, reverted.err
    note = (
        "etc/nginx/nginx.conf: a running nginx may still use the changed content; "
        "check it with nginx -t before reloading nginx"
    )
    assert note in reverted.lines
    assert conf.read_bytes() == b"worker_processes 1;\n"
    plain = cli("revert", calls[1], "--yes")
    assert plain.rc == 0
    assert not any("nginx" in line for line in plain.lines)

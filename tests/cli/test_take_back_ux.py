"""Taking back what was shown, from the session the user means (issue 13)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import tree_state
from tests.history.helpers import cli_turn, log_json, new_session, short_id, turn_id


def test_a_rollback_confirm_applies_what_the_preview_showed_or_nothing(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = new_session(cli)
    cli_turn(cli, sid, "one", ("write", "README.md", b"one\n"))
    cli_turn(cli, sid, "two", ("write", "README.md", b"two\n"))
    t2 = turn_id(log_json(cli, sid), 2)
    preview = cli("rollback", "1", "--session", sid)
    assert preview.rc == 0, preview.err
    assert preview.lines[-1] == (
        f"this changes nothing yet: turnback rollback 1 --session {sid} --confirm --expect-head {short_id(t2)}"
        " applies it"
    )
    cli_turn(cli, sid, "three arrives unseen", ("write", "late.txt", b"late\n"))
    before = tree_state(project)

    bare = cli("rollback", "1", "--session", sid, "--confirm")
    assert bare.rc == 1
    assert bare.err == (
        "turnback: the head moved since the preview: it showed turn 2, the head is now turn 3. "
        "Nothing was changed: look again (turnback rollback 1)\n"
    )
    printed = cli("rollback", "1", "--session", sid, "--confirm", "--expect-head", short_id(t2))
    assert printed.rc == 1 and "stale head: the session's head is turn 3" in printed.err
    assert tree_state(project) == before
    assert log_json(cli, sid)["head"] == turn_id(log_json(cli, sid), 3)

    # Looked at again: the new preview's confirm goes through.
    again = cli("rollback", "1", "--session", sid)
    assert "rewind turn 3" in " ".join(again.lines)
    assert cli("rollback", "1", "--session", sid, "--confirm").rc == 0
    assert (project / "README.md").read_bytes() == b"one\n" and not (project / "late.txt").exists()


def test_undo_takes_the_turn_ids_log_prints(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = new_session(cli)
    cli_turn(cli, sid, "one", ("write", "a.txt", b"a\n"))
    cli_turn(cli, sid, "two", ("write", "b.txt", b"b\n"))
    log = log_json(cli, sid)
    t1, t2 = turn_id(log, 1), turn_id(log, 2)
    alone = cli("undo", short_id(t2), "--session", sid, "--dry-run")
    assert alone.rc == 0, alone.err
    assert alone.lines[0].startswith(f"undo turn {short_id(t2)}")
    by_prefix = cli("undo", "--from", t1[:14], "--session", sid, "--yes")
    assert by_prefix.rc == 0, by_prefix.err
    assert not (project / "a.txt").exists() and not (project / "b.txt").exists()
    by_number = cli("undo", "7", "--session", sid, "--dry-run")
    assert (by_number.rc, by_number.err) == (2, "turnback: the session has no turn 7\n")


def test_a_bare_look_picks_the_latest_session_with_turns_and_names_it(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    worked = new_session(cli)
    cli_turn(cli, worked, "the work", ("write", "a.txt", b"a\n"))
    empty = cli("session", "new").out.strip()  # e.g. an MCP server's start, or a forked restart
    named = (
        f"turnback: session {short_id(worked)} (t), the latest with turns; 1 newer session has none yet "
        "(turnback sessions lists them; --session picks one)\n"
    )
    log = cli("log")
    assert log.rc == 0 and log.lines[0].startswith("* turn 1 ") and log.err == named
    undo = cli("undo", "--dry-run")
    assert (undo.rc, undo.lines, undo.err) == (
        0,
        [f"undo turn {short_id(log_json(cli, worked)['head'])}: the work", "trash       a.txt"],
        named,
    )
    diff = cli("diff")
    assert diff.rc == 0 and "+a" in diff.out
    listed = cli("sessions")
    [default] = [line for line in listed.lines if line.endswith("(default)")]
    assert default.startswith(short_id(worked))
    listed_json = cli("sessions", "--json").json()["sessions"]
    assert [(item["id"], item["default"]) for item in listed_json] == [(empty, False), (worked, True)]
    # Recording still goes to the newest session, and naming a session still wins.
    assert cli("turn", "begin", "--message", "m", "--json").json()["turn"]["number"] == 1
    assert cli("log", "--session", empty).err == ""


def test_a_turn_begun_in_a_shell_that_ended_says_why_and_pid_keeps_one_across_processes(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = new_session(cli)
    # Begun in a shell of its own that ends right after, as a harness running each step in a fresh shell does.
    in_a_shell = ["sh", "-c", '"$@"; true', "sh"]
    begun = cli("turn", "begin", "--session", sid, "--message", "m", "--json", prefix=in_a_shell)
    assert begun.rc == 0, begun.err
    holder = begun.json()["turn"]["id"]
    edit = cli("write", "--session", sid, "a.txt", stdin=b"a\n")
    assert edit.rc == 1
    [turn] = log_json(cli, sid)["turns"]
    assert turn["id"] == holder
    pid = cli("log", "--session", sid).lines[0].split("(pid ")[1].split(")")[0]
    assert edit.err == (
        "turnback: no turn is running in this session: turn 1 was interrupted, the process that began it "
        f"(pid {pid}) ended before turn end. A turn lasts while the process that ran turnback turn begin (its shell) "
        "runs; a harness whose steps run in separate processes passes turn begin --pid with a process that lives "
        "for the whole turn, and ends it with turn end. Begin one again (turnback turn begin)\n"
    )
    assert cli("log", "--session", sid).lines[0] == (
        f"* turn 1  {short_id(holder)}  m  "
        f"[head, interrupted: the process that began it (pid {pid}) ended before turn end]"
    )

    import subprocess

    harness = subprocess.Popen(["sleep", "60"])  # a process that lives for the whole turn
    try:
        assert cli("turn", "begin", "--session", sid, "--pid", str(harness.pid)).rc == 0
        kept = cli("write", "--session", sid, "a.txt", stdin=b"a\n")
        assert kept.rc == 0, kept.err
        assert cli("turn", "end", "--session", sid).lines == ["1 file changed, +1 -0"]
    finally:
        harness.kill()
        harness.wait()


NOT_UNDONE = (
    "only the recorded files go back: what the commands did besides (network requests, databases, deployments, "
    "a service that already loaded a changed file) is not undone: "
)


def test_undo_and_rollback_previews_say_once_what_commands_did_is_not_undone(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = new_session(cli)
    cli_turn(cli, sid, "one", ("write", "a.txt", b"a\n"))
    begun = cli("turn", "begin", "--session", sid, "--message", "deploy")
    assert begun.rc == 0
    for script in ("echo built > out.txt", "echo deployed >> out.txt", "echo built > out.txt"):
        ran = cli("exec", "--session", sid, "--", "sh", "-c", script)
        assert ran.rc == 0, ran.err
    assert cli("turn", "end", "--session", sid).rc == 0
    undo = cli("undo", "--session", sid, "--dry-run")
    note = NOT_UNDONE + "sh -c 'echo built > out.txt', sh -c 'echo deployed >> out.txt'"
    assert undo.rc == 0 and undo.lines[-1] == note and undo.lines.count(note) == 1
    rollback = cli("rollback", "0", "--session", sid)
    assert rollback.lines.count(note) == 1
    file_only = cli("undo", "1", "--session", sid, "--force", "--dry-run")
    assert not any(line.startswith("only the recorded files") for line in file_only.lines)


def test_a_clean_revert_shows_the_diff_it_writes_back_before_asking(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = new_session(cli)
    cli_turn(cli, sid, "one", ("edit", "README.md", "line two", "line 2"))
    [call] = log_json(cli, sid)["turns"][0]["calls"]
    preview = cli("revert", call["id"], "--dry-run")
    assert preview.rc == 0, preview.err
    assert preview.lines == [
        f"revert call {short_id(call['id'])}: edit README.md",
        "restore     README.md",
        "README.md: from what it holds now back to what it held before the call:",
        "--- a/README.md",
        "+++ b/README.md",
        "@@ -1,3 +1,3 @@",
        " # project",
        " ",
        "-line 2",
        "+line two",
    ]


def test_a_cut_short_call_shows_the_partial_bytes_and_its_turn_counts_them(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = new_session(cli)
    assert cli("turn", "begin", "--session", sid, "--message", "m").rc == 0
    call = cli("call", "before", "--session", sid, "--tool", "Write", "README.md").out.strip()
    (project / "README.md").write_bytes(b"# project\n\npart")  # the harness stopped mid-write: no call after
    diff = [
        "modified README.md +1 -1",
        "--- a/README.md",
        "+++ b/README.md",
        "@@ -1,3 +1,3 @@",
        " # project",
        " ",
        "-line two",
        "+part",
        "\\ No newline at end of file",
    ]
    header = [
        f"call {short_id(call)}  Write README.md  (turn 1)",
        "this call may be cut short: its completion was never recorded",
    ]
    shown = cli("show", call)
    assert (shown.rc, shown.lines) == (0, [*header, *diff])
    end = cli("turn", "end", "--session", sid)
    assert end.lines == [
        "1 file changed, +1 -1 (docs +1 -1)",
        f"call {short_id(call)} (Write README.md) may be cut short: its end was never recorded; "
        "counted as its files are now",
    ]
    assert cli("show", call).lines == [*header, *diff]
    # Still cut short for an undo: what it wrote is unknown, so only --force puts the file back.
    assert cli("undo", "--session", sid, "--yes").rc == 1
    assert cli("undo", "--session", sid, "--yes", "--force").rc == 0
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"


def test_a_created_file_changed_since_says_anyway_deletes_it_and_restores_nothing(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    sid = new_session(cli)
    cli_turn(cli, sid, "make it", ("write", "made.txt", b"agent\n"))
    (project / "made.txt").write_bytes(b"the user's\n")
    call = log_json(cli, sid)["turns"][0]["calls"][0]["id"]
    preview = cli("revert", short_id(call), "--dry-run")
    assert preview.rc == 0, preview.err
    assert "skip        made.txt (changed since the call; --anyway deletes it)" in preview.lines
    forced = cli("revert", short_id(call), "--anyway", "--yes")
    assert forced.rc == 0, forced.err
    assert not (project / "made.txt").exists()

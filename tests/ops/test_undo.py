"""Undoing turns: rows, the stack rule, --from, --force, partly undone turns, trash, locks."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

import turnback
from tests.conftest import tree_state
from turnback.render.text import force_only_line, result_lines


def turn_of(engine: turnback.Engine, session: turnback.Session, message: str, *writes: tuple[str, bytes]) -> None:
    engine.begin_turn(session.id, message)
    for path, data in writes:
        engine.write(session.id, path, data, cwd=engine.project_of(session).root)
    engine.end_turn(session.id)


def rows(plan: turnback.Plan) -> list[tuple[str, str]]:
    return [(row.action, row.path) for row in plan.rows]


def test_an_undo_that_displaces_nothing_names_no_trash(engine, session, project: Path) -> None:  # type: ignore[no-untyped-def]
    """Putting back a file the agent deleted replaces nothing: no trash folder is left or named."""
    engine.begin_turn(session.id, "delete")
    engine.delete(session.id, "README.md", cwd=str(project))
    engine.end_turn(session.id)
    result = engine.apply(engine.plan_undo(session.id))
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"
    assert result.trash_dir is None
    assert result_lines(result) == ["undone: 1 file restored"]
    assert not any(Path(engine.home, "trash").iterdir())


def test_undo_takes_back_the_newest_turn_and_its_created_folders(engine, session, project: Path) -> None:  # type: ignore[no-untyped-def]
    start = tree_state(project)
    turn_of(engine, session, "one", ("README.md", b"1\n"))
    after_one = tree_state(project)
    turn_of(engine, session, "two", ("README.md", b"2\n"), ("a/b/c.txt", b"new\n"))
    plan = engine.plan_undo(session.id)
    assert [str(s.title).split(": ", 1)[1] for s in plan.sections] == ["two"]
    assert rows(plan) == [("trash", "a/b/c.txt"), ("trash", "a/b"), ("trash", "a"), ("restore", "README.md")]
    result = engine.apply(plan)
    assert tree_state(project) == after_one
    assert Path(result.trash_dir, "a/b/c.txt").read_bytes() == b"new\n"
    assert Path(result.trash_dir, "README.md").read_bytes() == b"2\n"
    assert result_lines(result)[-1] == (
        f"undone: 1 file restored, 1 file moved to {result.trash_dir}/, 2 folders removed"
    )
    engine.apply(engine.plan_undo(session.id))
    assert tree_state(project) == start
    with pytest.raises(turnback.NothingToDoError, match="every turn of this session is undone"):
        engine.plan_undo(session.id)


def test_a_file_changed_after_the_turn_is_skipped_and_force_overwrites_it(engine, session, project: Path) -> None:  # type: ignore[no-untyped-def]
    turn_of(engine, session, "one", ("README.md", b"agent\n"), ("run.sh", b"#!/bin/sh\nagent\n"))
    (project / "README.md").write_bytes(b"user\n")
    plan = engine.plan_undo(session.id)
    assert rows(plan) == [("restore", "run.sh"), ("skip", "README.md")]
    assert str(plan.rows[1].reason) == "changed after the turn; --force overwrites it"
    result = engine.apply(plan)
    assert (project / "README.md").read_bytes() == b"user\n"
    assert (project / "run.sh").read_bytes() == b"#!/bin/sh\necho run\n"
    assert (project / "run.sh").stat().st_mode & 0o777 == 0o755
    turn = engine.log(session.id)[0]
    assert turn.undone == "partly"
    assert str(result.plan.rows[1].note) == "changed after the turn; turnback undo 1 --force overwrites it"
    assert result_lines(result)[-1] == (
        "skipped     README.md (changed after the turn; turnback undo 1 --force overwrites it)"
    )
    # a partly undone turn counts as undone for plain undo ...
    with pytest.raises(turnback.NothingToDoError):
        engine.plan_undo(session.id)
    # ... and `undo 1 --force` acts on what it kept pending
    forced = engine.plan_undo(session.id, turn=1, force=True)
    assert rows(forced) == [("restore", "README.md")]
    result = engine.apply(forced)
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"
    assert Path(result.trash_dir, "README.md").read_bytes() == b"user\n"
    assert engine.log(session.id)[0].undone == "yes"


def test_when_only_force_could_act_nothing_changes(engine, session, project: Path) -> None:  # type: ignore[no-untyped-def]
    turn_of(engine, session, "one", ("README.md", b"agent\n"))
    (project / "README.md").write_bytes(b"user\n")
    plan = engine.plan_undo(session.id)
    assert not plan.acting_rows
    assert force_only_line(plan) == (
        "undo changed nothing: 1 path acts only with --force; turnback undo --force acts on it"
    )
    assert engine.log(session.id)[0].undone == "no"


def test_stack_rule_refuses_an_older_turn_unless_forced(engine, session, project: Path) -> None:  # type: ignore[no-untyped-def]
    turn_of(engine, session, "one", ("README.md", b"1\n"))
    turn_of(engine, session, "two", ("docs/guide.md", b"2\n"))
    with pytest.raises(turnback.RefusedError, match="turn 2 is newer and not undone"):
        engine.plan_undo(session.id, turn=1)
    engine.apply(engine.plan_undo(session.id, turn=1, force=True))
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"
    assert (project / "docs" / "guide.md").read_bytes() == b"2\n"
    assert [t.undone for t in engine.log(session.id)] == ["yes", "no"]


def test_from_undoes_that_turn_and_every_later_one_newest_first(engine, session, project: Path) -> None:  # type: ignore[no-untyped-def]
    start = tree_state(project)
    turn_of(engine, session, "one", ("README.md", b"1\n"), ("new/one.txt", b"1"))
    turn_of(engine, session, "two", ("README.md", b"2\n"))
    turn_of(engine, session, "three", ("README.md", b"3\n"), ("new/three.txt", b"3"))
    plan = engine.plan_undo(session.id, from_turn=1)
    assert [str(s.title).split(": ", 1)[1] for s in plan.sections] == ["three", "two", "one"]
    # README.md chains through all three turns: one row, placed last of its rows
    assert rows(plan) == [
        ("trash", "new/three.txt"),
        ("trash", "new/one.txt"),
        ("trash", "new"),
        ("restore", "README.md"),
    ]
    engine.apply(plan)
    assert tree_state(project) == start
    assert [t.undone for t in engine.log(session.id)] == ["yes", "yes", "yes"]


def test_a_user_edit_between_two_calls_stays(engine, session, project: Path) -> None:  # type: ignore[no-untyped-def]
    engine.begin_turn(session.id, "one")
    engine.write(session.id, "README.md", b"agent 1\n", cwd=str(project))
    (project / "README.md").write_bytes(b"user between calls\n")
    engine.write(session.id, "README.md", b"agent 2\n", cwd=str(project))
    engine.end_turn(session.id)
    result = engine.apply(engine.plan_undo(session.id))
    assert (project / "README.md").read_bytes() == b"user between calls\n"
    assert [(r.action, r.status) for r in result.plan.rows] == [("restore", "done"), ("skip", "skipped")]


def test_a_folder_the_user_put_files_in_is_kept(engine, session, project: Path) -> None:  # type: ignore[no-untyped-def]
    turn_of(engine, session, "one", ("made/by/agent.txt", b"a"))
    (project / "made" / "mine.txt").write_bytes(b"mine")
    result = engine.apply(engine.plan_undo(session.id))
    assert not (project / "made" / "by").exists()
    assert (project / "made" / "mine.txt").read_bytes() == b"mine"
    folder_row = next(r for r in result.plan.rows if r.path == "made")
    assert folder_row.status == "skipped"
    assert "not empty" in str(folder_row.note or "")


def test_a_missing_copy_is_not_covered(engine, session, project: Path) -> None:  # type: ignore[no-untyped-def]
    turn_of(engine, session, "one", ("README.md", b"agent\n"))
    before_blob = engine.log(session.id)[0].changes[0].before.blob
    engine.store.db.execute("DELETE FROM blobs WHERE id=?", (before_blob,))
    plan = engine.plan_undo(session.id)
    assert rows(plan) == [("not covered", "README.md")]
    assert str(plan.rows[0].reason) == "the earlier copy is missing from the store"


def test_undo_is_refused_while_a_turn_runs_and_freed_when_its_holder_dies(engine, session, project: Path) -> None:  # type: ignore[no-untyped-def]
    turn_of(engine, session, "one", ("README.md", b"1\n"))
    holder = subprocess.Popen(["sleep", "60"])
    try:
        engine.begin_turn(session.id, "two", holder_pid=holder.pid)
        with pytest.raises(
            turnback.BusyError, match=f"turn 2 is running in this session \\(held by process {holder.pid}\\)"
        ):
            engine.plan_undo(session.id)
    finally:
        holder.kill()
        holder.wait()
    plan = engine.plan_undo(session.id)
    assert rows(plan) == [("restore", "README.md")]
    assert [t.status for t in engine.log(session.id)] == ["ended", "interrupted"]


def test_incognito_sessions_keep_nothing(engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    session = engine.new_session(str(project), incognito=True)
    turn_of(engine, session, "one", ("secret.txt", b"incognito content\n"))
    assert (project / "secret.txt").read_bytes() == b"incognito content\n"
    with pytest.raises(turnback.NothingToDoError, match="incognito"):
        engine.plan_undo(session.id)
    assert engine.store.db.one("SELECT COUNT(*) FROM changes")[0] == 0


def test_two_displacements_of_one_path_are_both_kept(engine, session, project: Path) -> None:  # type: ignore[no-untyped-def]
    engine.begin_turn(session.id, "one")
    engine.write(session.id, "README.md", b"agent 1\n", cwd=str(project))
    (project / "README.md").write_bytes(b"user between calls\n")
    engine.write(session.id, "README.md", b"agent 2\n", cwd=str(project))
    engine.end_turn(session.id)
    result = engine.apply(engine.plan_undo(session.id, force=True))
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"
    assert Path(result.trash_dir, "README.md").read_bytes() == b"agent 2\n"
    assert Path(result.trash_dir, "README.md~2").read_bytes() == b"user between calls\n"
    assert sorted(os.listdir(result.trash_dir)) == ["README.md", "README.md~2"]


def test_the_result_of_an_apply_is_the_operation_as_the_journal_keeps_it(engine, session, project: Path) -> None:  # type: ignore[no-untyped-def]
    """The apply builds its result from the outcomes it journaled rather than reading the plan back: the two agree,
    row notes rewritten at the end (the command that finishes a partly undone turn) included."""
    turn_of(engine, session, "one", ("README.md", b"agent\n"), ("run.sh", b"agent\n"), ("new/file.txt", b"new\n"))
    (project / "README.md").write_bytes(b"user\n")
    result = engine.apply(engine.plan_undo(session.id))
    assert {row.status for row in result.plan.rows} == {"done", "skipped"}
    assert result.plan.status == "done"
    assert result.plan == engine.plan(result.plan.id)


def test_a_file_changed_after_the_plan_keeping_its_size_and_mtime_is_refused(engine, session, project: Path) -> None:  # type: ignore[no-untyped-def]
    """The apply trusts the plan's content id for a file whose stat is the one the plan read; a write that keeps
    the size and puts the mtime back (``os.utime``) still moves the ctime, so the row is refused, not applied."""
    turn_of(engine, session, "one", ("README.md", b"agent\n"), ("run.sh", b"agent\n"))
    time.sleep(0.25)  # a clock tick and more since the turn wrote them: the plan's reads are trusted
    plan = engine.plan_undo(session.id)
    assert rows(plan) == [("restore", "run.sh"), ("restore", "README.md")]
    readme = project / "README.md"
    seen = readme.stat()
    readme.write_bytes(b"user!\n")  # the same size as what the plan read
    os.utime(readme, ns=(seen.st_atime_ns, seen.st_mtime_ns))
    now = readme.stat()
    assert (now.st_size, now.st_mtime_ns, now.st_ino) == (seen.st_size, seen.st_mtime_ns, seen.st_ino)
    result = engine.apply(plan)
    assert readme.read_bytes() == b"user!\n"
    assert (project / "run.sh").read_bytes() == b"#!/bin/sh\necho run\n"
    assert result_lines(result)[-1] == (
        "skipped     README.md (changed since the preview; nothing was done to it (turnback undo 1 plans it again))"
    )
    assert [row.status for row in result.plan.rows] == ["done", "skipped"]


MANY = 80  # changes in one command: more than ops.plan.VOUCH_MIN_CHANGES, so the stat cache vouches for files


def many_files_turn(engine: turnback.Engine, session: turnback.Session, project: Path) -> dict[str, bytes]:
    """A turn whose one command edits MANY files made before it, then waits a clock tick and more before the
    scan after it (so that scan trusts what it reads: nothing racy); what the files held before, by path."""
    before = {f"many/f{i:02}.txt": f"before {i:02}\n".encode() for i in range(MANY)}
    (project / "many").mkdir()
    for path, data in before.items():
        (project / path).write_bytes(data)
    engine.begin_turn(session.id, "many")
    call = engine.begin_command(session.id, "edit many files", cwd=str(project))
    for path in before:
        (project / path).write_bytes(b"agent " + path.encode() + b"\n")
    time.sleep(0.25)
    engine.finish_command(call, exit_code=0)
    engine.end_turn(session.id)
    return before


def test_a_plan_of_many_changes_reads_no_file_the_stat_cache_vouches_for(  # type: ignore[no-untyped-def]
    engine, session, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan after the command read each file; the plan takes its content id from that scan's stat cache where
    the file's stat (ctime too) is the one the cache holds, instead of opening and hashing the file again."""
    before = many_files_turn(engine, session, project)
    opened: list[str] = []
    real_open = os.open

    def spy(path: str, *args: object, **kwargs: object) -> int:
        opened.append(os.fsdecode(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", spy)
    plan = engine.plan_undo(session.id)
    monkeypatch.setattr(os, "open", real_open)
    assert [name for name in opened if name.startswith("f")] == []
    assert sorted(row.path for row in plan.rows if row.action == "restore") == sorted(before)
    engine.apply(plan)
    assert {path: (project / path).read_bytes() for path in before} == before


def test_a_file_changed_after_the_scan_keeping_its_size_and_mtime_is_seen_by_the_plan(  # type: ignore[no-untyped-def]
    engine, session, project: Path
) -> None:
    """The stat cache vouches only for a file whose ctime is the one it holds: a same-size write with its mtime
    put back (``os.utime``) moves the ctime, so the plan reads the file and sees the user's change."""
    before = many_files_turn(engine, session, project)
    edited = project / "many/f03.txt"
    seen = edited.stat()
    edited.write_bytes(b"user's own f03.txt\n")  # the size of what the agent wrote
    os.utime(edited, ns=(seen.st_atime_ns, seen.st_mtime_ns))
    now = edited.stat()
    assert (now.st_size, now.st_mtime_ns, now.st_ino) == (seen.st_size, seen.st_mtime_ns, seen.st_ino)
    plan = engine.plan_undo(session.id)
    skipped = [(row.path, str(row.reason)) for row in plan.rows if row.action == "skip"]
    assert skipped == [("many/f03.txt", "changed after the turn; --force overwrites it")]
    engine.apply(plan)
    assert edited.read_bytes() == b"user's own f03.txt\n"
    assert (project / "many/f04.txt").read_bytes() == before["many/f04.txt"]


def test_a_vouched_file_changed_after_the_plan_keeping_its_size_and_mtime_is_refused(  # type: ignore[no-untyped-def]
    engine, session, project: Path
) -> None:
    """The apply trusts the content id the stat cache gave the plan only while the file's stat (ctime too) is the
    one the plan saw: a same-size write with its mtime put back after the plan is refused, not overwritten."""
    before = many_files_turn(engine, session, project)
    plan = engine.plan_undo(session.id)
    edited = project / "many/f07.txt"
    seen = edited.stat()
    edited.write_bytes(b"user's own f07.txt\n")
    os.utime(edited, ns=(seen.st_atime_ns, seen.st_mtime_ns))
    result = engine.apply(plan)
    assert edited.read_bytes() == b"user's own f07.txt\n"
    skipped = [row.path for row in result.plan.rows if row.status == "skipped"]
    assert skipped == ["many/f07.txt"]
    assert (project / "many/f08.txt").read_bytes() == before["many/f08.txt"]

"""Reverting one call: every rule of SPEC "Revert one call"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import turnback
from tests.conftest import unprivileged_prefix
from turnback.render.text import plan_lines


@pytest.fixture
def turn(engine: turnback.Engine, session: turnback.Session) -> turnback.Session:
    engine.begin_turn(session.id, "work")
    return session


def end_turn(engine: turnback.Engine, session: turnback.Session) -> None:
    """Reverting waits for the turn to end: end it if one runs."""
    try:
        engine.end_turn(session.id)
    except turnback.RefusedError:
        pass


def rows(plan: turnback.Plan) -> list[tuple[str, str]]:
    return [(row.action, row.path) for row in plan.rows]


def revert(engine: turnback.Engine, call: turnback.Call, *, anyway: bool = False) -> turnback.OpResult:
    end_turn(engine, engine.store.session(call.session_id))
    return engine.apply(engine.plan_revert(call.id, anyway=anyway))


def test_revert_writes_back_the_earlier_content(engine, turn, project: Path) -> None:  # type: ignore[no-untyped-def]
    call = engine.write(turn.id, "README.md", b"agent\n", cwd=str(project))
    end_turn(engine, turn)
    plan = engine.plan_revert(call.id)
    assert rows(plan) == [("restore", "README.md")]
    result = engine.apply(plan)
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"
    assert result.plan.rows[0].status == "done"
    assert Path(result.trash_dir, "README.md").read_bytes() == b"agent\n"


def test_a_file_the_call_created_is_deleted(engine, turn, project: Path) -> None:  # type: ignore[no-untyped-def]
    call = engine.write(turn.id, "new/deep/file.txt", b"x", cwd=str(project))
    end_turn(engine, turn)
    plan = engine.plan_revert(call.id)
    assert rows(plan) == [("trash", "new/deep/file.txt"), ("trash", "new/deep"), ("trash", "new")]
    result = engine.apply(plan)
    assert not (project / "new").exists()
    assert Path(result.trash_dir, "new/deep/file.txt").read_bytes() == b"x"


def test_a_file_already_holding_the_earlier_content_is_only_marked(engine, turn, project: Path) -> None:  # type: ignore[no-untyped-def]
    call = engine.write(turn.id, "README.md", b"agent\n", cwd=str(project))
    (project / "README.md").write_bytes(b"# project\n\nline two\n")  # a revert whose result was lost
    before = (project / "README.md").stat().st_ino
    end_turn(engine, turn)
    plan = engine.plan_revert(call.id)
    assert rows(plan) == [("mark", "README.md")]
    assert str(plan.rows[0].reason) == "already holds the earlier content"
    result = engine.apply(plan)
    assert result.plan.rows[0].status == "done"
    assert (project / "README.md").stat().st_ino == before  # not written
    assert engine.call(call.id).changes[0].reverted


def test_a_changed_file_is_left_alone_with_its_diff_and_the_later_call_named(engine, turn, project: Path) -> None:  # type: ignore[no-untyped-def]
    first = engine.write(turn.id, "README.md", b"one\n", cwd=str(project))
    later = engine.write(turn.id, "README.md", b"two\n", cwd=str(project))
    end_turn(engine, turn)
    plan = engine.plan_revert(first.id)
    assert rows(plan) == [("skip", "README.md")]
    assert plan.rows[0].force_only
    assert str(plan.rows[0].reason) == (
        f"changed since the call; call {turnback.short_id(later.id)} wrote it later "
        "(revert that first, newest first); --anyway restores the earlier content over it"
    )
    lines = plan_lines(plan, engine.load, diff_limit=20)
    assert lines[-8:] == [
        "README.md: from what it holds now back to what it held before the call:",
        "--- a/README.md",
        "+++ b/README.md",
        "@@ -1 +1,3 @@",
        "-two",
        "+# project",
        "+",
        "+line two",
    ]
    result = engine.apply(plan)
    assert result.plan.rows[0].status == "skipped"
    assert (project / "README.md").read_bytes() == b"two\n"
    # newest first gets there: the later call, then this one
    revert(engine, later)
    assert revert(engine, first).plan.rows[0].status == "done"
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"


def test_anyway_restores_over_exactly_what_was_shown(engine, turn, project: Path) -> None:  # type: ignore[no-untyped-def]
    call = engine.write(turn.id, "README.md", b"agent\n", cwd=str(project))
    (project / "README.md").write_bytes(b"user\n")
    result = revert(engine, call, anyway=True)
    assert result.plan.rows[0].action == "restore"
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"
    assert Path(result.trash_dir, "README.md").read_bytes() == b"user\n"


def test_anyway_refuses_when_the_file_changed_again_after_the_preview(engine, turn, project: Path) -> None:  # type: ignore[no-untyped-def]
    call = engine.write(turn.id, "README.md", b"agent\n", cwd=str(project))
    (project / "README.md").write_bytes(b"user\n")
    end_turn(engine, turn)
    plan = engine.plan_revert(call.id, anyway=True)
    (project / "README.md").write_bytes(b"user, again\n")
    result = engine.apply(plan)
    assert result.plan.rows[0].status == "skipped"
    command = f"turnback revert {turnback.short_id(call.id)}"
    assert (
        str(result.plan.rows[0].note) == f"changed since the preview; nothing was done to it ({command} plans it again)"
    )
    assert (project / "README.md").read_bytes() == b"user, again\n"
    assert not engine.call(call.id).changes[0].reverted


def test_a_symlink_in_place_of_a_created_file_is_left_alone(engine, turn, project: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not yours")
    call = engine.write(turn.id, "created.txt", b"x", cwd=str(project))
    os.unlink(project / "created.txt")
    os.symlink(outside, project / "created.txt")
    end_turn(engine, turn)
    for anyway in (False, True):
        end_turn(engine, turn)
        plan = engine.plan_revert(call.id, anyway=anyway)
        assert rows(plan) == [("skip", "created.txt")]
        assert (
            str(plan.rows[0].reason)
            == "a symbolic link is in its place; the link and the file it points to are left alone"
        )
        engine.apply(plan)
    assert os.readlink(project / "created.txt") == str(outside)
    assert outside.read_bytes() == b"not yours"


def test_a_deleted_file_comes_back_with_its_mode_but_without_setuid(engine, turn, project: Path) -> None:  # type: ignore[no-untyped-def]
    script = project / "tool.sh"
    script.write_bytes(b"#!/bin/sh\n")
    script.chmod(0o4750)
    call = engine.delete(turn.id, "tool.sh", cwd=str(project))
    assert not script.exists()
    end_turn(engine, turn)
    plan = engine.plan_revert(call.id)
    assert rows(plan) == [("restore", "tool.sh")]
    assert tuple(map(str, plan.rows[0].warnings)) == ("its setuid, setgid or sticky bit is not restored",)
    assert "warning: tool.sh: its setuid, setgid or sticky bit is not restored" in plan_lines(
        plan, engine.load, diff_limit=20
    )
    engine.apply(plan)
    assert script.read_bytes() == b"#!/bin/sh\n"
    assert script.stat().st_mode & 0o7777 == 0o750


def test_a_reverted_call_has_nothing_left(engine, turn, project: Path) -> None:  # type: ignore[no-untyped-def]
    call = engine.write(turn.id, "README.md", b"agent\n", cwd=str(project))
    revert(engine, call)
    with pytest.raises(turnback.NothingToDoError, match="already reverted"):
        engine.plan_revert(call.id)


def test_a_call_cut_short_is_revertible(engine, turn, project: Path) -> None:  # type: ignore[no-untyped-def]
    handle = engine.begin_call(turn.id, "Write", {"file_path": "README.md"}, cwd=str(project))
    handle.before("README.md")
    (project / "README.md").write_bytes(b"half wri")  # the harness died here: no after(), no end()
    call = engine.call(handle.id)
    assert call.cut_short
    end_turn(engine, turn)
    plan = engine.plan_revert(call.id)
    assert rows(plan) == [("skip", "README.md")]
    assert "may be cut short" in str(plan.rows[0].reason or "")
    result = revert(engine, call, anyway=True)
    assert result.plan.rows[0].status == "done"
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"


def test_a_harness_write_recorded_with_before_and_after_reverts(engine, turn, project: Path) -> None:  # type: ignore[no-untyped-def]
    with engine.begin_call(turn.id, "Write", {"file_path": "a/b.txt"}, cwd=str(project)) as call:
        call.before("a/b.txt")
        (project / "a").mkdir()
        (project / "a" / "b.txt").write_bytes(b"harness\n")
        call.after("a/b.txt")
    recorded = engine.call(call.id)
    assert [(c.path, c.kind) for c in recorded.changes] == [("a", "new"), ("a/b.txt", "new")]
    assert not recorded.cut_short
    revert(engine, recorded)
    assert not (project / "a").exists()


def test_permission_denied_is_reported_not_escalated(engine, turn, project: Path, cli) -> None:  # type: ignore[no-untyped-def]
    # Root ignores folder permissions: the revert runs without that power (setpriv), as a user's would.
    prefix = unprivileged_prefix()
    assert prefix is not None, "setpriv (util-linux) is needed to test a denied write as root"
    call = engine.write(turn.id, "src/pkg/x.txt", b"x", cwd=str(project))
    end_turn(engine, turn)
    (project / "src" / "pkg").chmod(0o555)
    try:
        result = cli("revert", call.id, "--yes", "--json", prefix=prefix)
    finally:
        (project / "src" / "pkg").chmod(0o755)
    assert result.rc == 1, (result.rc, result.err)
    row = result.json()["rows"][0]
    assert row["status"] == "failed"
    assert row["note"].startswith("permission denied; turnback never uses sudo"), row
    assert (project / "src" / "pkg" / "x.txt").read_bytes() == b"x"

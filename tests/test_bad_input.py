"""Bad input: binary content, odd names and line endings, huge and unreadable files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import turnback
from tests.conftest import tree_state, unprivileged_prefix


@pytest.fixture
def sid(cli) -> str:  # type: ignore[no-untyped-def]
    cli("init")
    return str(cli("session", "new").out.strip())


def undo_all(cli) -> None:  # type: ignore[no-untyped-def]
    while (result := cli("undo", "--yes")).rc == 0:
        pass
    assert "nothing to undo" in result.err, result.err


def test_binary_crlf_and_no_final_newline_round_trip(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    start = tree_state(project)
    cli("turn", "begin", "--session", sid)
    assert cli("write", "--session", sid, "logo.bin", stdin=bytes(reversed(range(256)))).rc == 0
    assert cli("edit", "--session", sid, "src/pkg/crlf.txt", "--old", "two", "--new", "2").rc == 0
    assert (project / "src/pkg/crlf.txt").read_bytes() == b"one\r\n2\r\n"
    assert cli("edit", "--session", sid, "docs/guide.md", "--old", "final", "--new", "last").rc == 0
    assert (project / "docs/guide.md").read_bytes() == b"no last newline"
    shown = cli("write", "--session", sid, "lone-cr.txt", stdin=b"\xef\xbb\xbfbom\rlone cr\x00nul")
    assert "Binary files differ (0 B -> 18 B)" in shown.lines
    cli("write", "--session", sid, "empty.txt", stdin=b"")
    cli("turn", "end", "--session", sid)
    undo_all(cli)
    assert tree_state(project) == start


def test_names_that_are_not_utf8_round_trip(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    odd = os.fsdecode(b"caf\xe9 \xff.txt")
    (project / odd).write_bytes(b"latin-1 name\n")
    start = tree_state(project)
    cli("turn", "begin", "--session", sid)
    assert cli("edit", "--session", sid, odd, "--old", "latin-1", "--new", "odd").rc == 0
    assert cli("write", "--session", sid, os.fsdecode(b"new-\xfe"), stdin=b"x").rc == 0
    assert cli("write", "--session", sid, "--", "-leading-dash", stdin=b"x").rc == 0
    assert cli("write", "--session", sid, "line\nbreak", stdin=b"x").rc == 0
    log = cli("log", "--session", sid)
    assert log.rc == 0 and "Traceback" not in log.err
    cli("turn", "end", "--session", sid)
    undo_all(cli)
    assert tree_state(project) == start


def test_a_200_mb_file_round_trips(engine: turnback.Engine, session: turnback.Session, project: Path) -> None:
    engine.set_config("store.max_mib", "1024")  # the default cap (32 MiB) would drop this copy: see below
    big = project / "big.bin"
    original = os.urandom(1 << 20) * 200  # 200 MiB; every 4 MiB chunk repeats, so the store keeps one
    big.write_bytes(original)
    engine.begin_turn(session.id, "big")
    call = engine.edit(session.id, "README.md", "line two", "line 2", cwd=str(project))
    engine.write(session.id, "big.bin", b"small now\n", cwd=str(project))
    engine.end_turn(session.id)
    assert call.changes
    result = engine.apply(engine.plan_undo(session.id))
    assert all(row.status == "done" for row in result.plan.rows)
    assert big.read_bytes() == original
    shown = engine.call(engine.log(session.id)[0].calls[1].id)
    assert shown.changes[0].before.size == len(original)


def test_a_copy_over_the_size_cap_is_refused_and_the_oldest_copies_go_first(
    engine: turnback.Engine, session: turnback.Session, project: Path
) -> None:
    engine.set_config("store.max_mib", "1")
    big = os.urandom(3 << 20)
    (project / "big.bin").write_bytes(big)
    engine.begin_turn(session.id, "big")
    with pytest.raises(turnback.UncoveredError):
        engine.write(session.id, "big.bin", b"small now\n", cwd=str(project))
    assert (project / "big.bin").read_bytes() == big  # refused: its copy could not have been kept
    (project / "old.bin").write_bytes(os.urandom(600 << 10))
    engine.write(session.id, "old.bin", b"old\n", cwd=str(project))
    engine.end_turn(session.id)
    engine.begin_turn(session.id, "newer")
    (project / "new.bin").write_bytes(os.urandom(600 << 10))
    engine.write(session.id, "new.bin", b"new\n", cwd=str(project))
    engine.end_turn(session.id)
    plan = engine.plan_undo(session.id, turn=1, force=True)
    assert [(row.action, row.path, row.reason and str(row.reason)) for row in plan.rows] == [
        ("not covered", "old.bin", "copy dropped by the size cap")
    ]
    assert [(row.action, row.path) for row in engine.plan_undo(session.id).rows] == [("restore", "new.bin")]
    assert engine.kept_bytes() <= 1 << 20


def test_an_unreadable_file_gets_a_clear_message(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    prefix = unprivileged_prefix()
    if prefix is None:
        pytest.skip("running as root without setpriv: cannot make a file unreadable")
    secret = project / "secret.txt"
    secret.write_bytes(b"keep out\n")
    secret.chmod(0o000)
    try:
        cli("turn", "begin", "--session", sid)
        write = cli("write", "--session", sid, "secret.txt", stdin=b"over", prefix=prefix)
        edit = cli("edit", "--session", sid, "secret.txt", "--old", "keep", "--new", "x", prefix=prefix)
    finally:
        secret.chmod(0o600)
    for result in (write, edit):
        assert result.rc == 1
        assert result.err == (
            "turnback: cannot keep a copy of secret.txt (it cannot be read: permission denied: secret.txt), so this"
            " change could not be undone; nothing was changed (--uncovered goes ahead without a copy)\n"
        )
    assert secret.read_bytes() == b"keep out\n"

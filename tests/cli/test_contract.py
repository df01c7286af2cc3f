"""The CLI contract: JSON shapes, exit codes, exact lines, confirmation, session defaults."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.terminal import run_on_a_terminal
from tests.conftest import cli_env


@pytest.fixture
def sid(cli) -> str:  # type: ignore[no-untyped-def]
    assert cli("init").rc == 0
    return str(cli("session", "new", "--title", "t").out.strip())


def test_json_of_the_harness_verbs(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    init = cli("init", "--json").json()
    assert init["schema"] == 1 and init["project"]["root"] == str(project) and init["created"] is False
    new = cli("session", "new", "--json").json()
    assert set(new["session"]) >= {"id"}
    begin = cli("turn", "begin", "--session", sid, "--message", "m", "--json").json()
    assert begin == {"schema": 1, "turn": {"id": begin["turn"]["id"], "number": 1, "parent": None}}
    write = cli("write", "--session", sid, "new.txt", "--json", stdin=b"a\nb\n").json()
    assert write["call"]["changes"] == [{"path": "new.txt", "kind": "new"}]
    edit = cli("edit", "--session", sid, "new.txt", "--old", "b", "--new", "c", "--json").json()
    assert edit["call"]["changes"] == [{"path": "new.txt", "kind": "modified"}]
    move = cli("mv", "--session", sid, "new.txt", "sub/moved.txt", "--json").json()
    assert move["call"]["changes"] == [
        {"path": "sub", "kind": "new"},
        {"path": "sub/moved.txt", "kind": "moved", "from": "new.txt"},
    ]
    mkdir = cli("mkdir", "--session", sid, "x/y", "--json").json()
    assert mkdir["call"]["changes"] == [{"path": "x", "kind": "new"}, {"path": "x/y", "kind": "new"}]
    rm = cli("rm", "--session", sid, "README.md", "--json").json()
    assert rm["call"]["changes"] == [{"path": "README.md", "kind": "deleted"}]
    end = cli("turn", "end", "--session", sid, "--json").json()
    assert end["summary"] == {
        "files": 2,
        "added": 2,
        "removed": 3,
        "line": "2 files changed, +2 -3 (docs -3)",
        "notes": [],
        "code": "with_note",
        "params": {
            "text": {"message": {"code": "files_changed", "params": {"count": 2, "added": 2, "removed": 3}}},
            "note": {"message": {"code": "comma_list", "params": {"items": {"messages": ["docs -3"]}}}},
        },
        "message": "2 files changed, +2 -3 (docs -3)",
    }
    log = cli("log", "--session", sid, "--json").json()
    assert log["head"] == begin["turn"]["id"]
    [turn] = log["turns"]
    assert (turn["number"], turn["parent"], turn["message"], turn["undone"]) == (1, None, "m", False)
    assert [c["tool"] for c in turn["calls"]] == ["write", "edit", "move", "mkdir", "delete"]
    assert all(c["revertible"] for c in turn["calls"])


def test_undo_json_and_exit_codes(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid)
    cli("write", "--session", sid, "README.md", stdin=b"agent\n")
    cli("turn", "end", "--session", sid)
    dry = cli("undo", "--dry-run", "--json")
    assert dry.rc == 0
    data = dry.json()
    assert data["applied"] is False and data["trash"] is None
    assert [(r["action"], r["path"], r["reason"]) for r in data["rows"]] == [("restore", "README.md", None)]
    applied = cli("undo", "--yes", "--json")
    assert applied.rc == 0
    data = applied.json()
    assert data["applied"] is True
    assert Path(data["trash"], "README.md").read_bytes() == b"agent\n"
    nothing = cli("undo", "--dry-run")
    assert nothing.rc == 1
    assert nothing.err == "turnback: nothing to undo: every turn of this session is undone\n"


def test_a_usage_error_with_json_is_one_json_object_on_stdout(cli, sid: str) -> None:  # type: ignore[no-untyped-def]
    """--json promises one JSON object on stdout: argparse's own refusals too (its text stays on stderr)."""
    for words, said in (
        (("--json", "lgo"), "argument COMMAND: invalid choice: 'lgo' (did you mean log?)"),
        (("undo", "--json", "--turn"), "unrecognized arguments: --turn"),
    ):
        result = cli(*words)
        assert result.rc == 2, result
        assert result.json() == {
            "schema": 1,
            "error": {"type": "UsageError", "code": "plain", "params": {"text": said}, "message": said, "exit": 2},
        }
        assert result.err.splitlines()[-1] == f"turnback: error: {said}", result.err
    plain = cli("lgo")  # without --json: the text alone, nothing on stdout
    assert (plain.rc, plain.out) == (2, "")
    cli("turn", "begin", "--session", sid)
    command_words = cli(
        "exec", "--session", sid, "--", "sh", "-c", "exit 4", "--json"
    )  # a command's own --json is not turnback's
    assert command_words.rc == 4 and command_words.out == "", command_words


def test_without_a_terminal_and_without_yes_nothing_changes(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid)
    cli("write", "--session", sid, "README.md", stdin=b"agent\n")
    cli("turn", "end", "--session", sid)
    result = cli("undo")
    assert result.rc == 1
    assert result.err == "nothing changed: there is no terminal to ask at; to apply it, run: turnback undo --yes\n"
    assert (project / "README.md").read_bytes() == b"agent\n"


@pytest.mark.parametrize(("answer", "applied"), [(b"y\n", True), (b"n\n", False)])
def test_the_prompt_on_a_terminal(cli, home: Path, project: Path, sid: str, answer: bytes, applied: bool) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid, "--message", "change the readme")
    cli("write", "--session", sid, "README.md", stdin=b"agent\n")
    cli("turn", "end", "--session", sid)
    code, output = run_on_a_terminal(["undo"], project, cli_env(home), answer)
    lines = output.splitlines()
    assert lines[0].startswith("undo turn ") and lines[0].endswith(": change the readme")
    assert lines[1] == "restore     README.md"
    assert lines[2].startswith("undo? y = yes, n = no")
    assert code == (0 if applied else 1)
    assert (project / "README.md").read_bytes() == (b"# project\n\nline two\n" if applied else b"agent\n")


def test_show_clips_the_diff_and_shows_the_input(cli, home: Path, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid)
    body = "".join(f"line {i}\n" for i in range(30)).encode()
    call = cli("write", "--session", sid, "long.txt", "--json", stdin=body).json()["call"]["id"]
    shown = cli("show", call[:12])
    assert shown.rc == 0
    assert shown.lines[1:6] == ["new long.txt +30 -0", "--- /dev/null", "+++ b/long.txt", "@@ -0,0 +1,30 @@", "+line 0"]
    assert shown.lines[-1] == "… 13 more lines"
    assert len(shown.lines) == 2 + 20 + 1  # the title and the change's line, 20 diff lines (headers count), the rest
    (home / "config.toml").write_text("[render]\ndiff_lines = 0\n")
    assert cli("show", call).lines == [shown.lines[0], "new long.txt +30 -0"]
    raw = cli("show", call, "--input")
    assert json.loads(raw.out)["path"] == "long.txt"


def test_binary_files_show_sizes_not_bytes(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid)
    shown = cli("write", "--session", sid, "logo.bin", stdin=b"\x00\x01\x02" * 700)
    assert "Binary files differ (1.0 KiB -> 2.1 KiB)" in shown.lines


def test_session_defaults_to_env_then_the_projects_latest(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    other = cli("session", "new").out.strip()
    assert cli("turn", "begin", "--json").json()["turn"]["number"] == 1  # the latest: `other`
    assert cli("log", "--json").json()["session"] == other
    assert cli("log", "--json", env={"TURNBACK_SESSION": sid}).json()["session"] == sid
    assert cli("log", "--json", "--session", sid[:16]).json()["session"] == sid
    outside = cli("log", cwd=project.parent)
    assert outside.rc == 2
    assert "is in no turnback project" in outside.err


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["show", "ffff"], 2, "turnback: no call has an id starting with ffff"),
        (["show", "xyz"], 2, "turnback: 'xyz' is not a call id"),
        (["undo", "--yes", "--dry-run"], 2, "not allowed with argument"),
        (["edit", "README.md", "--old", "nope", "--new", "x"], 1, "no turn is running in this session"),
    ],
)
def test_errors_are_one_line_with_their_exit_code(cli, sid: str, args: list[str], code: int, message: str) -> None:  # type: ignore[no-untyped-def]
    result = cli(*args)
    assert result.rc == code
    assert message in result.err
    assert "Traceback" not in result.err


def test_edit_errors_say_what_is_wrong(cli, sid: str) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid)
    missing = cli("edit", "--session", sid, "README.md", "--old", "absent text", "--new", "x")
    assert (missing.rc, missing.err) == (2, "turnback: the old text is not in README.md; nothing was changed\n")
    cli("write", "--session", sid, "twice.txt", stdin=b"a a\n")
    twice = cli("edit", "--session", sid, "twice.txt", "--old", "a", "--new", "b")
    assert twice.rc == 2
    assert (
        twice.err
        == "turnback: the old text occurs 2 times in twice.txt; give more of the text around it, or use --all\n"
    )
    assert cli("edit", "--session", sid, "twice.txt", "--old", "a", "--new", "b", "--all").rc == 0


def test_undo_is_busy_while_a_turn_runs(cli, sid: str) -> None:  # type: ignore[no-untyped-def]
    cli("turn", "begin", "--session", sid)
    cli("write", "--session", sid, "README.md", stdin=b"x")
    busy = cli("undo", "--yes")
    assert busy.rc == 3
    assert busy.err.startswith("turnback: turn 1 is running in this session (held by process ")


def test_a_store_that_is_not_a_database_is_reported(cli, home: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    (home / "turnback.db").write_bytes(b"this is not a database" * 100)
    for wal in home.glob("turnback.db-*"):
        wal.unlink()
    result = cli("log", "--session", sid)
    assert result.rc == 1
    assert result.err == (
        f"turnback: the store at {home} is damaged and cannot be read (file is not a database); "
        f"nothing was changed or deleted, and the plain copies in {home}/trash are intact\n"
    )
    assert (home / "turnback.db").read_bytes() == b"this is not a database" * 100  # never deleted or rebuilt


@pytest.mark.parametrize(("no_color", "coloured"), [(None, True), ("1", False)])
def test_diff_is_coloured_only_on_a_terminal_without_no_color(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, sid: str, no_color: str | None, coloured: bool
) -> None:
    cli("turn", "begin", "--session", sid)
    cli("edit", "--session", sid, "README.md", "--old", "line two", "--new", "line 2")
    cli("turn", "end", "--session", sid)
    env = cli_env(home, {"NO_COLOR": no_color} if no_color else None)
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "turnback", "diff"], stdout=child, stderr=child, cwd=project, env=env
    )
    os.close(child)
    output = b""
    while True:
        ready, _, _ = select.select([main], [], [], 30)
        try:
            chunk = os.read(main, 4096) if ready else b""
        except OSError:
            chunk = b""
        if not chunk:
            break
        output += chunk
    os.close(main)
    assert proc.wait(timeout=30) == 0
    assert (b"\x1b[32m+line 2" in output) is coloured
    assert b"+line 2" in output
    piped = cli("diff")
    assert "\x1b[" not in piped.out and "+line 2" in piped.lines


@pytest.mark.parametrize("no_color", [False, True])
def test_the_shell_change_line_and_a_clipped_diff_are_dim_on_a_terminal_unless_no_color(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, sid: str, no_color: bool
) -> None:
    cli("turn", "begin", "--session", sid)
    env = {**cli_env(home), **({"NO_COLOR": "1"} if no_color else {})}
    script = "printf 'a\\nb\\nc\\n' > new.txt"
    code, output = run_on_a_terminal(["exec", "--session", sid, "--", "sh", "-c", script], project, env, b"")
    assert code == 0
    dim, plain = "\x1b[2mnew new.txt\x1b[0m", "new new.txt"
    assert output.splitlines()[-1] == (plain if no_color else dim)
    written = subprocess.run(
        [sys.executable, "-m", "turnback", "write", "--session", sid, "long.txt"],
        input="".join(f"{n}\n" for n in range(40)).encode(),
        env=env,
        cwd=project,
        capture_output=True,
        check=True,
    )
    assert "\x1b" not in written.stdout.decode()  # a pipe gets no colour
    code, shown = run_on_a_terminal(["show", "--lang", "en", *_last_call(cli, sid)], project, env, b"")
    more = [line for line in shown.splitlines() if "more lines" in line]
    assert more == (["… 23 more lines"] if no_color else ["\x1b[2m… 23 more lines\x1b[0m"])


def _last_call(cli, sid: str) -> list[str]:  # type: ignore[no-untyped-def]
    calls = cli("log", "--session", sid, "--json").json()["turns"][-1]["calls"]
    return [calls[-1]["id"][:16]]

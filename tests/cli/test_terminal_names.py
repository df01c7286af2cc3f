"""Names, messages and commands an agent chose reach the terminal with their control characters escaped.

A carriage return and an escape sequence in a file name would make its
``trash`` row of the undo preview read ``restore harmless.txt``; a newline
would add a row of its own. Every view shows such a name quoted as git
quotes it (``"hidden.txt\\r\\033[2Krestore harmless.txt"``); ordinary and
non-ASCII names are shown as they are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.terminal import run_on_a_terminal
from tests.conftest import cli_env
from turnback.render.terminal import display_width

HIDDEN = "hidden.txt\r\x1b[2Krestore harmless.txt"
HIDDEN_SHOWN = '"hidden.txt\\r\\033[2Krestore harmless.txt"'
NEWLINE = "nl\nskip important.txt (changed since the turn)"
NEWLINE_SHOWN = '"nl\\nskip important.txt (changed since the turn)"'
BY_SHELL = "sh\n\x1b]0;owned\x07.txt"  # made by a shell command, the name never on turnback's command line
BY_SHELL_SHOWN = '"sh\\n\\033]0;owned\\a.txt"'
MESSAGE = "tidy up\x1b[2J\x9b31m now"
MESSAGE_SHOWN = '"tidy up\\033[2J\\302\\23331m now"'
CJK = "日本語.txt"
NOT_UTF8 = os.fsdecode(b"caf\xe9.txt")
NOT_UTF8_SHOWN = '"caf\\351.txt"'


class Run:
    def __init__(self, home: Path, project: Path):
        self.home, self.project = home, project

    def __call__(self, *args: str | bytes, stdin: bytes = b"") -> tuple[int, bytes, bytes]:
        proc = subprocess.run(
            [sys.executable, "-m", "turnback", *args],
            input=stdin,
            capture_output=True,
            cwd=self.project,
            env=cli_env(self.home),
            timeout=120,
        )
        return proc.returncode, proc.stdout, proc.stderr


def _lines(out: bytes) -> list[str]:
    return out.decode().split("\n")[:-1]


@pytest.fixture
def run(home: Path, project: Path) -> Run:
    return Run(home, project)


def test_every_view_escapes_the_control_characters_of_names_messages_and_commands(run: Run, project: Path) -> None:
    assert run("init")[0] == 0
    assert run("session", "new")[0] == 0
    assert run("turn", "begin", "--message", MESSAGE)[0] == 0
    outputs: dict[str, tuple[int, bytes, bytes]] = {}
    outputs["write"] = run("write", HIDDEN, stdin=b"harmless\n")
    outputs["write cjk"] = run("write", CJK, stdin=b"kanji\n")
    outputs["write latin-1"] = run("write", NOT_UTF8, stdin=b"cafe\n")
    outputs["exec touch"] = run("exec", "--", "touch", NEWLINE)
    outputs["exec sh"] = run("exec", "--", "sh", "-c", "touch \"$(printf 'sh\\n\\033]0;owned\\007.txt')\"")
    assert (project / HIDDEN).read_bytes() == b"harmless\n" and (project / NEWLINE).exists()
    assert (project / BY_SHELL).exists()
    outputs["turn end"] = run("turn", "end")
    log = json.loads(run("log", "--json")[1])
    calls = [call["id"] for turn in log["turns"] for call in turn["calls"]]
    outputs["undo"] = run("undo")  # no terminal, no --yes: the preview, and nothing done
    outputs["undo dry"] = run("undo", "--dry-run")
    outputs["log"] = run("log")
    outputs["diff stat"] = run("diff", "--stat")
    outputs["diff"] = run("diff")
    outputs["files"] = run("files")
    outputs["status"] = run("status")
    outputs["sessions"] = run("sessions")
    for call in calls:
        outputs[f"show {call}"] = run("show", call)
        outputs[f"show input {call}"] = run("show", call, "--input")
        outputs[f"revert {call}"] = run("revert", call, "--dry-run")

    for name, (code, out, err) in outputs.items():
        assert code in (0, 1), (name, out, err)
        for raw in (b"\x1b", b"\r", b"\x07", "\x9b".encode()):
            assert raw not in out and raw not in err, (name, out, err)
        for line in _lines(out) + _lines(err):
            assert not line.startswith(("restore harmless", "skip important")), (name, line)

    assert _lines(outputs["write"][1])[:3] == [
        f"call {calls[0][:16]}  write {HIDDEN_SHOWN}  (turn 1)",
        f"new {HIDDEN_SHOWN} +1 -0",
        "--- /dev/null",
    ]
    assert _lines(outputs["write"][1])[3] == '+++ "b/hidden.txt\\r\\033[2Krestore harmless.txt"'
    assert _lines(outputs["write cjk"][1])[1:4] == [f"new {CJK} +1 -0", "--- /dev/null", f"+++ b/{CJK}"]
    assert _lines(outputs["write latin-1"][1])[1] == f"new {NOT_UTF8_SHOWN} +1 -0"
    assert _lines(outputs["exec touch"][1]) == [f"new {NEWLINE_SHOWN}"]
    assert _lines(outputs["exec sh"][1]) == [f"new {BY_SHELL_SHOWN}"]

    code, out, err = outputs["undo"]
    assert code == 1
    *rows, commands_note = _lines(out)
    assert commands_note.startswith("only the recorded files go back: "), commands_note
    assert "is not undone: touch $'nl\\nskip important.txt" in commands_note, commands_note  # quoted as bash would
    assert rows == [
        f"undo turn {log['turns'][0]['id'][:16]}: {MESSAGE_SHOWN}",
        f"trash       {BY_SHELL_SHOWN}",
        f"trash       {NEWLINE_SHOWN}",
        f"trash       {NOT_UTF8_SHOWN}",
        f"trash       {CJK}",
        f"trash       {HIDDEN_SHOWN}",
    ]
    assert _lines(outputs["undo dry"][1]) == _lines(out)
    assert _lines(outputs["log"][1]) == [
        f"* turn 1  {log['turns'][0]['id'][:16]}  {MESSAGE_SHOWN}  [head]",
        f"    {calls[0][:16]}  write {HIDDEN_SHOWN}",
        f"    {calls[1][:16]}  write {CJK}",
        f"    {calls[2][:16]}  write {NOT_UTF8_SHOWN}",
        f"    {calls[3][:16]}  exec touch $'nl\\nskip important.txt (changed since the turn)'",
        f"    {calls[4][:16]}  exec sh -c 'touch \"$(printf '\"'\"'sh\\n\\033]0;owned\\007.txt'\"'\"')\"'",
        f"      new {HIDDEN_SHOWN} +1 -0",
        f"      new {CJK} +1 -0",
        f"      new {NOT_UTF8_SHOWN} +1 -0",
        f"      new {NEWLINE_SHOWN} +0 -0",
        f"      new {BY_SHELL_SHOWN} +0 -0",
    ]
    width = len(NEWLINE_SHOWN) + 2  # the longest name, as shown
    assert _lines(outputs["diff stat"][1])[-6:] == [
        f"new {NOT_UTF8_SHOWN:<{width}}+1",
        f"new {HIDDEN_SHOWN:<{width}}+1",
        f"new {NEWLINE_SHOWN}",
        f"new {BY_SHELL_SHOWN}",
        f"new {CJK}{' ' * (width - display_width(CJK))}+1",  # aligned by columns: a CJK character takes two
        "5 files changed, +3 -0",
    ]
    # Into a pipe, diff is a patch for git apply: git's own quoting (which escapes every byte over 0x7f too).
    assert b'diff --git "a/hidden.txt\\r\\033[2Krestore harmless.txt" ' in outputs["diff"][1]
    assert b'+++ "b/\\346\\227\\245\\346\\234\\254\\350\\252\\236.txt"\n' in outputs["diff"][1]
    assert f"{HIDDEN_SHOWN:<{width}}created in turn 1" in _lines(outputs["files"][1])


def test_file_content_with_escape_sequences_is_escaped_on_a_terminal_and_exact_into_a_pipe(
    run: Run, home: Path, project: Path
) -> None:
    assert run("init")[0] == 0
    run("session", "new")
    run("turn", "begin")
    content = b"line\x1b[2J\x1b[1;1Hrestore harmless.txt\tend\r\n"
    code, out, _ = run("write", "evil.txt", stdin=content)
    assert code == 0
    assert _lines(out)[-1] == "+line\\033[2J\\033[1;1Hrestore harmless.txt\tend\r"
    run("turn", "end")
    code, patch, _ = run("diff")
    assert code == 0 and b"+" + content in patch  # the patch into a pipe holds the bytes as they are

    env = cli_env(home)
    _, shown = run_on_a_terminal(
        ["show", json.loads(run("log", "--json")[1])["turns"][0]["calls"][0]["id"]], project, env, b""
    )
    assert "\x1b" not in shown
    assert "+line\\033[2J\\033[1;1Hrestore harmless.txt\tend" in shown.splitlines()
    _, coloured = run_on_a_terminal(["diff"], project, env, b"")
    assert "\x1b[32m+line\\033[2J\\033[1;1Hrestore harmless.txt\tend\r\x1b[0m" in coloured
    assert coloured.count("\x1b") == coloured.count("\x1b[") and "\x1b[2J" not in coloured
    code, preview = run_on_a_terminal(["undo"], project, env, b"n\n")
    assert code == 1
    assert "trash       evil.txt" in preview.splitlines() and "\x1b" not in preview


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["edit", "README.md", "--old", b"\xff\xfe", "--new", "x"], "--old"),
        (["edit", "README.md", "--old", "line two", "--new", b"caf\xe9"], "--new"),
        (["edit", "README.md", b"--old=\xff", "--new", "x"], "--old"),
        (["turn", "begin", "--message", b"caf\xe9"], "--message"),
        (["session", "new", "--title", b"\xff"], "--title"),
        (["show", b"01\xff"], "call"),
    ],
)
def test_text_arguments_that_are_not_utf8_are_a_usage_error(
    run: Run, project: Path, args: list[str | bytes], named: str
) -> None:
    assert run("init")[0] == 0
    run("session", "new")
    run("turn", "begin")
    before = (project / "README.md").read_bytes()
    code, out, err = run(*args)
    assert (code, out, err) == (2, b"", f"turnback: the text given for {named} is not valid UTF-8\n".encode())
    code, out, err = run(*args, "--json")
    assert code == 2 and json.loads(out)["error"]["message"] == f"the text given for {named} is not valid UTF-8"
    assert (project / "README.md").read_bytes() == before
    # A file name may hold any bytes: it is still accepted.
    assert run("write", b"caf\xe9.txt", stdin=b"x\n")[0] == 0
    assert (project / os.fsdecode(b"caf\xe9.txt")).read_bytes() == b"x\n"

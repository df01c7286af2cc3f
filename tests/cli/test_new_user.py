"""What a new user meets first: verbs, global options, help, prompts, JSON shapes, ``make`` (issue 14)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import termios
from pathlib import Path

import pytest

import turnback
from tests.cli.terminal import run_on_a_terminal
from tests.conftest import ROOT, cli_env
from tests.history.helpers import lib_turn

INTERNAL_VERBS = ("_job", "_watch", "_adopt", "_watch-tree")


@pytest.fixture
def sid(cli, engine: turnback.Engine, project: Path) -> str:  # type: ignore[no-untyped-def]
    """A session of one ended turn that changed README.md: its full id."""
    assert cli("init").rc == 0
    session = engine.new_session(str(project), title="t")
    lib_turn(engine, session.id, "change the readme", ("write", "README.md", b"agent\n"))
    return session.id


def test_a_mistyped_verb_is_answered_with_the_closest_and_never_an_internal_verb(cli) -> None:  # type: ignore[no-untyped-def]
    typo = cli("lgo")
    assert typo.rc == 2
    assert typo.err.splitlines()[-1] == "turnback: error: argument COMMAND: invalid choice: 'lgo' (did you mean log?)"
    sub_verb = cli("turn", "bgein")
    assert sub_verb.rc == 2
    assert sub_verb.err.splitlines()[-1] == (
        "turnback turn: error: argument VERB: invalid choice: 'bgein' (did you mean begin?)"
    )
    unlike = cli("xyzzy")
    assert unlike.rc == 2
    last = unlike.err.splitlines()[-1]
    assert last.startswith("turnback: error: argument COMMAND: invalid choice: 'xyzzy' (choose from init, session, ")
    assert last.endswith(", watch, demo)")
    listed = cli("--help")
    assert listed.rc == 0
    for shown in (typo.err, unlike.err, listed.out):
        assert not any(verb in shown for verb in INTERNAL_VERBS), shown


def test_global_options_come_before_the_verb_as_well_as_after(cli, engine, home: Path, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    newer = engine.new_session(str(project), title="newer")
    lib_turn(engine, newer.id, "newer", ("write", "other.txt", b"other\n"))
    after = cli("log", "--session", sid)
    before = cli("--session", sid, "log")
    assert (before.rc, before.out, before.err) == (0, after.out, "")
    assert before.out != cli("log").out  # without it, the newer session is the default
    assert cli("--json", "--store", str(home), "--session", sid[:12], "log").json()["session"] == sid
    assert cli("--session", sid, "turn", "begin", "--json").json()["turn"]["number"] == 2  # a sub-verb too
    assert cli("--session", newer.id, "log", "--session", sid, "--json").json()["session"] == sid  # after wins
    misplaced = cli("--session", sid, "init")
    assert misplaced.rc == 2
    assert misplaced.err.splitlines()[-1] == "turnback: error: --session does not apply to turnback init"


def _parsers(parser):  # type: ignore[no-untyped-def]
    """*parser* and every verb's and sub-verb's parser below it."""
    yield parser
    for action in parser._actions:
        if action.choices and isinstance(action.choices, dict):
            for child in dict.fromkeys(action.choices.values()):
                yield from _parsers(child)


def test_help_is_plain_text_without_rest_backticks(cli) -> None:  # type: ignore[no-untyped-def]
    from turnback.cli.main import build_parser

    helped = cli("rollback", "--help")
    assert helped.rc == 0
    paragraph = helped.lines[
        helped.lines.index("Without --confirm it only previews: every file of every turn on the way,") :
    ]
    assert paragraph[1:4] == [
        "newest first, and the turns it rewinds. The turns after N stay, as an",
        "abandoned branch (turnback log shows them); a new turn starts a new branch",
        "from N. --expect-head names the head you saw: if another turn or rollback",
    ]
    every = list(_parsers(build_parser()))
    assert len(every) > 40
    with_backticks = [parser.prog for parser in every if "``" in parser.format_help()]
    assert with_backticks == []


def test_diff_json_holds_the_patch_the_text_prints(cli, engine, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    lib_turn(engine, sid, "two", ("edit", "README.md", "agent", "agent, edited"), ("write", "new.txt", b"new\n"))
    piped = cli("diff", "--session", sid)
    assert piped.rc == 0
    assert "+agent, edited" in piped.out and "+++ b/new.txt" in piped.out
    shown = cli("diff", "--session", sid, "--json")
    assert shown.rc == 0
    data = shown.json()
    assert set(data) == {"schema", "turn", "files", "patch", "refs"}
    assert data["patch"] == piped.out
    assert data["refs"] == []  # no git ref moved
    assert data["files"] == [
        {"path": "README.md", "kind": "modified", "added": 1, "removed": 1, "ignored": False},
        {"path": "new.txt", "kind": "new", "added": 1, "removed": 0, "ignored": False},
    ]
    assert cli("diff", "--session", sid, "--stat", "--json").json() == data  # one shape, with --stat too


def test_undone_is_always_a_boolean_with_partly_undone_beside_it(cli, engine, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    lib_turn(engine, sid, "two files", ("write", "x.txt", b"x\n"), ("write", "y.txt", b"y\n"))
    (project / "y.txt").write_bytes(b"the user's y\n")
    assert cli("undo", "--session", sid, "--yes").rc == 0  # x.txt goes back, y.txt is kept
    lib_turn(engine, sid, "three", ("write", "z.txt", b"z\n"))
    assert cli("undo", "--session", sid, "--yes").rc == 0
    turns = cli("log", "--session", sid, "--json").json()["turns"]
    assert {t["number"]: (t["undone"], t["partly_undone"]) for t in turns} == {
        1: (False, False),
        2: (True, True),
        3: (True, False),
    }
    diffed = cli("diff", "2", "--session", sid, "--json").json()["turn"]
    assert (diffed["undone"], diffed["partly_undone"]) == (True, True)


def test_log_marks_the_turn_a_plain_undo_takes_next(cli, engine, sid: str) -> None:  # type: ignore[no-untyped-def]
    """By the plan's own stack rule: a turn that changed no file is passed over, and so is a partly undone one;
    a running turn is offered only once it has ended."""
    lib_turn(engine, sid, "two files", ("write", "x.txt", b"x\n"), ("write", "y.txt", b"y\n"))
    lib_turn(engine, sid, "only talk")

    def next_undo() -> list[int]:
        turns = cli("log", "--session", sid, "--json").json()["turns"]
        return [turn["number"] for turn in turns if turn["undo_next"]]

    def planned() -> list[str]:  # the preview (no --yes): nothing applied
        return list(cli("undo", "--session", sid, "--json").json()["plan"]["turns"])

    turns = {turn["number"]: turn for turn in cli("log", "--session", sid, "--json").json()["turns"]}
    assert next_undo() == [2]  # turn 3 changed nothing
    assert planned() == [turns[2]["id"]]  # what the plan takes is what log marked
    second = turns[2]["calls"][1]["id"]  # the write of y.txt
    assert cli("revert", second, "--yes").rc == 0
    (again,) = (t for t in cli("log", "--session", sid, "--json").json()["turns"] if t["number"] == 2)
    assert again["partly_undone"] is True
    assert next_undo() == [1]
    assert planned() == [turns[1]["id"]]
    assert cli("undo", "--session", sid, "--yes").rc == 0
    assert next_undo() == []  # nothing left that a plain undo takes
    engine.begin_turn(sid, "still working")
    engine.write(sid, "z.txt", b"z\n", cwd=engine.project_of(engine.session(sid)).root)
    assert next_undo() == []  # a running turn is not taken back until it ends
    engine.end_turn(sid)
    assert next_undo() == [4]


def test_ops_lists_newest_first_as_log_and_sessions_do(cli, sid: str) -> None:  # type: ignore[no-untyped-def]
    undo = cli("undo", "--session", sid, "--yes", "--json").json()["plan"]["id"]
    redo = cli("redo", "--session", sid, "--yes", "--json").json()["plan"]["id"]
    listed = cli("ops", "--session", sid)
    assert listed.rc == 0
    assert [re.split(r"\s+", line)[:4:3] for line in listed.lines] == [
        [turnback.short_id(redo), "redo"],
        [turnback.short_id(undo), "undo"],
    ]
    items = cli("ops", "--session", sid, "--json").json()["ops"]
    assert [(o["id"], o["kind"], o["reverses"]) for o in items] == [(redo, "redo", undo), (undo, "undo", None)]


@pytest.mark.parametrize(
    ("keys", "answer_line", "said", "code"),
    [
        (b"n\n", "undo? y = yes, n = no n", "nothing changed: you answered no", 1),
        (b"\x03", "undo? y = yes, n = no ^C", "nothing changed: interrupted at the prompt", 130),
        (b"\x04", "undo? y = yes, n = no ", "nothing changed: no answer was given", 1),
    ],
    ids=["no", "ctrl-c", "ctrl-d"],
)
def test_the_prompt_says_what_came_of_the_answer_on_a_line_of_its_own(  # type: ignore[no-untyped-def]
    home: Path, project: Path, sid: str, keys: bytes, answer_line: str, said: str, code: int
) -> None:
    exit_code, shown = run_on_a_terminal(["undo", "--session", sid], project, cli_env(home), keys)
    assert shown.splitlines()[1:] == ["restore     README.md", answer_line, said]
    assert exit_code == code
    assert (project / "README.md").read_bytes() == b"agent\n"


def test_a_ctrl_c_at_the_prompt_is_answered_on_a_terminal_that_drops_output_at_ctrl_c(
    home: Path, project: Path, sid: str
) -> None:
    """A terminal as one starts (no NOFLSH): a ^C there throws away the output not yet shown, which can be the
    line the CLI prints right after it. While its prompt waits, the CLI has the terminal keep it; what was typed
    before the ^C is thrown away as a terminal does, and the terminal's settings are put back after."""
    seen: dict[str, object] = {}

    def at_prompt(main: int) -> None:
        seen["waiting"] = termios.tcgetattr(main)[3] & termios.NOFLSH  # the other side reads the terminal's own

    def after(main: int, child: int) -> None:
        seen["after"] = termios.tcgetattr(child)[3] & termios.NOFLSH
        os.write(main, b"\n")
        seen["left"] = os.read(child, 100)  # what a shell reading the terminal next would get

    code, shown = run_on_a_terminal(
        ["undo", "--session", sid], project, cli_env(home), b"ye\x03", noflsh=False, at_prompt=at_prompt, after=after
    )
    assert shown.splitlines()[1:] == [
        "restore     README.md",
        "undo? y = yes, n = no ye^C",
        "nothing changed: interrupted at the prompt",
    ]
    assert code == 130
    assert seen == {"waiting": termios.NOFLSH, "after": 0, "left": b"\n"}
    assert (project / "README.md").read_bytes() == b"agent\n"


def test_with_stdout_in_a_pipe_the_prompt_is_asked_on_the_terminal(home: Path, project: Path, sid: str) -> None:
    with (project.parent / "piped.txt").open("w+b") as piped:
        code, shown = run_on_a_terminal(["undo", "--session", sid], project, cli_env(home), b"y\n", stdout=piped)
        piped.seek(0)
        preview = piped.read().decode().splitlines()
    assert shown.splitlines() == ["undo? y = yes, n = no y"]
    assert preview[1] == "restore     README.md"
    assert preview[2].startswith("undone: 1 file restored; what was replaced is in ")
    assert code == 0
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"


def test_without_a_terminal_the_line_names_the_command_that_applies(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    piped = cli("undo", "--session", sid)
    assert piped.rc == 1
    assert piped.lines == [piped.lines[0], "restore     README.md"]
    assert piped.err == (
        f"nothing changed: there is no terminal to ask at; to apply it, run: turnback undo --session {sid} --yes\n"
    )
    assert (project / "README.md").read_bytes() == b"agent\n"
    kept = cli("--json", "delete", sid)
    assert kept.rc == 1
    assert kept.json() == {"schema": 1, "session": sid, "deleted": False}
    assert kept.err == (
        f"nothing deleted: there is no terminal to ask at; to delete it, run: turnback --json delete {sid} --yes\n"
    )
    assert cli("--json", "delete", sid, "--yes").json()["deleted"] is True


def _stand_in_python(folder: Path) -> Path:
    """A ``python3`` whose ``-m venv DIR`` makes DIR/bin with stand-ins: each prints what it was asked to do.

    The real steps install from the network for a minute; what is tested here
    is what ``make`` says around each step, and that it says it first.
    """
    script = folder / "python3"
    script.write_text(
        "#!/bin/sh\n"
        'echo "[python $*]"\n'
        'if [ "$1 $2" = "-m venv" ]; then\n'
        '  mkdir -p "$3/bin"\n'
        "  for tool in python ruff mypy lint-imports turnback; do\n"
        """    printf '#!/bin/sh\\necho "[%s${*:+ $*}]"\\n' "$tool" > "$3/bin/$tool"\n"""
        '    chmod +x "$3/bin/$tool"\n'
        "  done\n"
        "fi\n"
    )
    script.chmod(0o755)
    return script


VENV_STEPS = [
    "creating .venv (a Python environment for turnback, in this folder)",
    "[python -m venv .venv]",
    "upgrading pip in .venv",
    "[python -m pip install --quiet --upgrade pip]",
    "installing turnback and its extras into .venv (about a minute)",
    "[python -m pip install --quiet -e .[dev]]",
    ".venv is ready: .venv/bin/turnback",
]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
@pytest.mark.parametrize(
    ("target", "after_venv"),
    [
        ("demo", [".venv/bin/turnback demo", "[turnback demo]"]),
        (
            "test",
            [
                "checking the code's style (ruff) and the layers (import-linter)",
                "[ruff check src tests benchmarks]",
                "[ruff format --check src tests benchmarks]",
                "[lint-imports --no-cache --no-logo]",
                "checking types (mypy --strict; slower the first time)",
                "[mypy]",
                "running the test suite (pytest, several minutes)",
                "[python -m pytest -n auto -q --ignore=tests/realclients]",
            ],
        ),
    ],
)
def test_a_first_make_says_what_each_step_does_before_it_runs(
    tmp_path: Path, target: str, after_venv: list[str]
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, repo / name)
    python = _stand_in_python(tmp_path)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}  # no MAKEFLAGS of a make above

    def make() -> list[str]:
        ran = subprocess.run(
            ["make", target, f"PYTHON={python}"], cwd=repo, env=env, capture_output=True, text=True, timeout=60
        )
        assert ran.returncode == 0, ran.stderr
        return ran.stdout.splitlines()

    assert make() == [*VENV_STEPS, *after_venv]
    assert make() == after_venv  # made once: the next run goes straight to the target

"""Every command in README.md runs as printed.

The ```sh blocks of README.md are read at collection time. A block whose
commands build on each other (the harness's, ``S=$(...)`` then ``turn begin``
...) runs as one shell script; every other command runs on its own, against a
fresh project and store holding one session of five turns, the state its
comment speaks of. Each must exit as a user would expect: 0, or the code
listed in EXPECTED with the reason. The commands that are not run are listed
in NOT_RUN, each with why.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import turnback
from tests.conftest import ROOT, TEST_KEY, cli_env

README = ROOT / "README.md"

NOT_RUN = {
    "make test": "it is this test suite itself (lint, type check, every test)",
    "pip install .": "installs into the Python environment and may need the network; .venv/bin/turnback is used",
    ".venv/bin/python benchmarks/sidebyside.py --files 50000": "a benchmark of minutes on a 50,000-file tree",
    "turnback serve": "serves until Ctrl-C; tests/web/test_api.py starts it and reads the line it prints",
    "turnback tui": "interactive: tests/tui/test_terminal.py runs it in a real terminal (tmux) and types at it",
}
# The team's shared store: its commands need a PostgreSQL server; tests/shared/test_readme_team.py runs them
# against the test server.
TEAM_SETUP = "createdb -h db.internal turnback"

# Blocks whose commands build on each other, by their first command: run as one script, in order.
SEQUENCES = {
    "turnback init": "",  # the harness's: it makes the project and the session itself
    # The file tools' turn has ended at the end of the block before; commands run in a turn.
    "turnback exec --session $S -- make generate": "turnback turn begin --session $S --message build\n",
}

# Commands whose expected exit is not 0, and why.
ASKS = "asks y/n; with no terminal to answer, nothing changes (exit 1)"
EXPECTED = {
    "turnback undo": (1, ASKS),
    "turnback undo 3": (1, ASKS),
    "turnback undo --from 2": (1, ASKS),
    "turnback revert CALL": (1, ASKS),
    "turnback redo": (1, ASKS),
}

# What a command's comment assumes has happened before it (run first, in the same fresh project).
BEFORE = {
    "turnback redo": "turnback undo --yes",  # "take back the last undo"
    "turnback undo 3": "turnback undo --from 4 --yes",  # "newer turns must be undone"
}


@dataclass(frozen=True)
class Block:
    index: int
    commands: tuple[str, ...]


def _command(line: str) -> str:
    """The command of a README line: its trailing ``# comment`` and spaces dropped."""
    return re.sub(r"\s+#\s.*$", "", line).strip()


def readme_blocks() -> list[Block]:
    blocks = []
    for index, body in enumerate(re.findall(r"^```sh\n(.*?)^```", README.read_text(encoding="utf-8"), re.S | re.M)):
        commands = tuple(_command(line) for line in body.splitlines() if line.strip() and not line.startswith("#"))
        blocks.append(Block(index, commands))
    return blocks


BLOCKS = readme_blocks()
SINGLE = [
    pytest.param(command, id=f"block{block.index}: {command}")
    for block in BLOCKS
    if block.commands[0] not in SEQUENCES and block.commands[0] != TEAM_SETUP
    for command in block.commands
]
SEQUENCE = [
    pytest.param(block, id=f"block{block.index}: {block.commands[0]}")
    for block in BLOCKS
    if block.commands[0] in SEQUENCES
]


def test_the_readme_has_the_blocks_this_test_knows() -> None:
    firsts = [block.commands[0] for block in BLOCKS]
    assert all(first in firsts for first in SEQUENCES), firsts
    assert TEAM_SETUP in firsts, firsts
    every = {command for block in BLOCKS for command in block.commands}
    for table in (NOT_RUN, EXPECTED, BEFORE):
        assert set(table) <= every, set(table) - every


@dataclass
class World:
    """A temp project (a git repository), a store, and a PATH with turnback and stand-ins for a build's tools."""

    project: Path
    home: Path
    env: dict[str, str]


def _stub(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


def make_world(tmp_path: Path) -> World:
    project, home, bin_dir = tmp_path / "project", tmp_path / "store", tmp_path / "bin"
    for folder in (project / "src", project / "build", bin_dir):
        folder.mkdir(parents=True)
    (project / "src" / "cli.py").write_text('parser.add_argument("--verbose", action="store_true")\n')
    (project / "old.txt").write_text("old\n")
    (project / "a.txt").write_text("a\n")
    (project / "build" / "app.o").write_text("object\n")
    (project / "Makefile").write_text("generate:\n\tprintf 'fn gen() {}\\n' > src/gen.rs\n")
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"], cwd=project, check=True
    )
    # `turnback` as a user has it on PATH; npm and cargo stand in for a project's own tools.
    _stub(bin_dir, "turnback", f'PYTHONPATH={ROOT / "src"} exec {sys.executable} -m turnback "$@"')
    _stub(bin_dir, "npm", "echo 'all tests pass'")
    _stub(bin_dir, "cargo", "echo compiled > build/app")
    env = cli_env(home, {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"})
    return World(project, home, env)


def five_turns(world: World) -> dict[str, str]:
    """One session of five turns (turn N writes notesN.md, turn 5 also edits a.txt); $S and CALL."""
    with turnback.Engine.open(str(world.home), key_secret=TEST_KEY, try_keyring=False) as engine:
        session = engine.new_session(str(world.project), title="fix parser")
        root = str(world.project)
        for number in range(1, 6):
            engine.begin_turn(session.id, f"turn {number}")
            engine.write(session.id, f"notes{number}.md", f"notes {number}\n".encode(), cwd=root)
            if number == 5:
                call = engine.edit(session.id, "a.txt", "a", "b", cwd=root)
            engine.end_turn(session.id)
    return {"S": session.id, "CALL": call.id}


def run_script(world: World, script: str, values: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script],
        cwd=world.project,
        env={**world.env, **values},
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize("command", SINGLE)
def test_a_readme_command_runs_as_printed(command: str, tmp_path: Path) -> None:
    if command in NOT_RUN:
        pytest.skip(f"{command}: {NOT_RUN[command]}")
    if command == "make demo" and not (ROOT / ".venv" / ".installed").exists():
        pytest.skip("make demo: no .venv here, and making one installs packages (pip, the network)")
    world = make_world(tmp_path)
    values = five_turns(world)
    cwd_is_repo = command.startswith("make ")
    if BEFORE.get(command):
        prepared = run_script(world, BEFORE[command], values)
        assert prepared.returncode == 0, prepared.stderr
    shell = command.replace("CALL", values["CALL"])
    ran = subprocess.run(
        ["bash", "-c", f"set -o pipefail\n{shell}"],
        cwd=ROOT if cwd_is_repo else world.project,
        env={**world.env, **values},
        capture_output=True,
        text=True,
        timeout=600,
    )
    code, why = EXPECTED.get(command, (0, "done"))
    assert ran.returncode == code, f"{command} ({why}):\n{ran.stdout}\n{ran.stderr}"
    if why == ASKS:
        assert ran.stdout.strip(), "the preview is shown before it asks"
        assert "nothing changed: there is no terminal to ask at; to apply it, run: turnback " in ran.stderr, ran.stderr


@pytest.mark.parametrize("block", SEQUENCE)
def test_a_readme_sequence_runs_as_printed(block: Block, tmp_path: Path) -> None:
    world = make_world(tmp_path)
    values = five_turns(world) if block.commands[0] != "turnback init" else {}
    rcs = tmp_path / "rcs"
    lines = ["set -o pipefail", SEQUENCES[block.commands[0]]]
    for number, command in enumerate(block.commands):
        lines.append(command)
        lines.append(f'echo "$? {number}" >> {rcs}')
    ran = run_script(world, "\n".join(lines), values)
    assert ran.returncode == 0, ran.stderr
    codes = [line.split(" ", 1) for line in rcs.read_text().splitlines()]
    assert [(block.commands[int(number)], int(code)) for code, number in codes] == [
        (command, EXPECTED.get(command, (0, ""))[0]) for command in block.commands
    ], f"{ran.stdout}\n{ran.stderr}"

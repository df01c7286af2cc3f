"""What the history tests share: recording turns through the CLI or the library, and short ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import turnback
from turnback import short_id

Step = tuple[Any, ...]


def new_session(cli: Any, *extra: str) -> str:
    """A new session of the test project, through the CLI; its full id."""
    made = cli("session", "new", "--title", "t", *extra)
    assert made.rc == 0, made.err
    return str(made.out.strip())


def cli_turn(cli: Any, sid: str, message: str, *steps: Step) -> str:
    """One turn through the CLI: ``("write", path, bytes)``, ``("edit", path, old, new)``, ``("rm", path)``.

    Returns the turn's full id.
    """
    begin = cli("turn", "begin", "--session", sid, "--message", message, "--json")
    assert begin.rc == 0, begin.err
    for step in steps:
        kind, path, *rest = step
        if kind == "write":
            done = cli("write", "--session", sid, path, stdin=rest[0])
        elif kind == "edit":
            done = cli("edit", "--session", sid, path, "--old", rest[0], "--new", rest[1])
        elif kind == "rm":
            done = cli("rm", "--session", sid, path)
        else:
            raise AssertionError(f"unknown step {kind}")
        assert done.rc == 0, done.err
    end = cli("turn", "end", "--session", sid)
    assert end.rc == 0, end.err
    return str(begin.json()["turn"]["id"])


def lib_turn(engine: turnback.Engine, sid: str, message: str, *steps: Step) -> turnback.Turn:
    """One turn through the library, with the same steps as :func:`cli_turn`; the ended turn."""
    session = engine.session(sid)
    root = engine.project_of(session).root
    engine.begin_turn(session.id, message)
    for step in steps:
        kind, path, *rest = step
        if kind == "write":
            engine.write(session.id, path, rest[0], cwd=root)
        elif kind == "edit":
            engine.edit(session.id, path, rest[0], rest[1], cwd=root)
        elif kind == "rm":
            engine.delete(session.id, path, cwd=root)
        else:
            raise AssertionError(f"unknown step {kind}")
    turn, _ = engine.end_turn(session.id)
    return turn


def log_json(cli: Any, sid: str) -> dict[str, Any]:
    shown = cli("log", "--session", sid, "--json")
    assert shown.rc == 0, shown.err
    return shown.json()


def call_ids(log: dict[str, Any], number: int) -> list[str]:
    """The ids of the calls of turn *number*, in order."""
    [turn] = [t for t in log["turns"] if t["number"] == number]
    return [str(call["id"]) for call in turn["calls"]]


def turn_id(log: dict[str, Any], number: int) -> str:
    [turn] = [t for t in log["turns"] if t["number"] == number]
    return str(turn["id"])


def files_under(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


__all__ = ["call_ids", "cli_turn", "files_under", "lib_turn", "log_json", "new_session", "short_id", "turn_id"]

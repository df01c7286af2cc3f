"""Shared pieces of the reliability suite: soak switch, statistics, tree checks, the CLI with a deadline.

``TURNBACK_SOAK=1`` (``make soak``) runs more rounds of the races (every
run tries every crash point of every operation). ``TURNBACK_RELIABILITY_STATS=FILE``
makes each test append one JSON line of what it did (faults injected, crash
points tried, operations resumed, bytes lost, ...) to FILE, so
``docs/reliability.md`` can quote the numbers of a real run; without it
nothing is written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import turnback.fsio
from tests.conftest import TEST_BACKEND, Result, cli_env, run_cli, tree_state

SOAK = os.environ.get("TURNBACK_SOAK", "") not in ("", "0")
STATS_ENV = "TURNBACK_RELIABILITY_STATS"
DEADLINE_S = 120.0

TreeState = dict[str, tuple[str, bytes | str | None, int]]


def record(scenario: str, **numbers: object) -> None:
    """Append one line of numbers for *scenario* to the stats file, when ``TURNBACK_RELIABILITY_STATS`` names one."""
    path = os.environ.get(STATS_ENV)
    if not path:
        return
    line = json.dumps({"scenario": scenario, "soak": SOAK, **numbers}, sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one write of one short line: appends from parallel workers do not interleave
    finally:
        os.close(fd)


def crash_points(total: int) -> list[int]:
    """The crash points of an operation of *total* durable steps: after step 1, 2, ..., total. On PostgreSQL
    (``make test-postgres``, which SQLite's run of every point has gone before) every other one and the last:
    what that run adds is the database's side of a resume, which each point of a kind tries alike, and CI's
    time is bounded."""
    points = list(range(1, total + 1))
    if TEST_BACKEND == "postgresql":
        return sorted({*points[::2], total})
    return points


def is_temp(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name.startswith(turnback.fsio.TEMP_PREFIX) and name.endswith(turnback.fsio.TEMP_SUFFIX)


def temp_files(root: Path) -> list[str]:
    """Every turnback temp file below *root* (relative paths)."""
    if not root.exists():
        return []
    found = []
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            rel = (Path(folder) / name).relative_to(root).as_posix()
            if is_temp(rel):
                found.append(rel)
    return sorted(found)


def files_under(root: Path) -> dict[str, bytes]:
    """Every non-folder entry below *root*, temp files left out (a link is listed by its target, as bytes)."""
    if not root.exists():
        return {}
    found: dict[str, bytes] = {}
    for rel, (kind, content, _mode) in tree_state(root).items():
        if kind == "dir" or is_temp(rel):
            continue
        found[rel] = content.encode() if isinstance(content, str) else (content or b"")
    return found


def without_temps(state: TreeState) -> TreeState:
    return {rel: value for rel, value in state.items() if not is_temp(rel)}


def bytes_lost(expected: TreeState, actual: TreeState) -> int:
    """How many bytes of *expected* are not in *actual* exactly (a path that differs counts all its bytes)."""
    lost = 0
    for rel, state in expected.items():
        if actual.get(rel) != state:
            content = state[1]
            lost += len(content) if isinstance(content, bytes) else len(content or "") or 1
    return lost


def trash_lost(expected: dict[str, bytes], actual: dict[str, bytes]) -> int:
    return sum(len(content) or 1 for rel, content in expected.items() if actual.get(rel) != content)


def assert_no_traceback(result: Result) -> None:
    assert "Traceback" not in result.err and "Traceback" not in result.out, result.err
    assert result.rc != 70, (result.rc, result.out, result.err)


def run(
    home: Path,
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    prefix: list[str] | None = None,
    stdin: bytes = b"",
    timeout: float = DEADLINE_S,
) -> Result:
    """``python -m turnback ARGS`` with a deadline; returns the exit code (negative: killed by that signal)."""
    return run_cli(home, *args, cwd=cwd, stdin=stdin, env=env, prefix=prefix, timeout=timeout)


def run_killed(home: Path, *args: str, cwd: Path, env: dict[str, str]) -> tuple[Result, int]:
    """Run the CLI expecting it to SIGKILL itself (a fault hook); the result and the pid it had."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "turnback", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=cli_env(home, env),
    )
    try:
        out, err = proc.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return Result(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")), proc.pid


def wait_until(predicate, timeout: float = 20.0, interval: float = 0.02) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def kill_process(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def walk_names(root: Path) -> Iterator[str]:
    for _folder, dirs, files in os.walk(root):
        yield from dirs
        yield from files

"""``turnback watch``: the watcher that makes a scan visit only what changed, end to end and as a property.

The CLI tests drive real watchers (``turnback watch start`` daemons) and real
``turnback exec`` subprocesses against real project folders, and read exact
output lines. The property tests build the watcher in-process on a temp tree
(no daemon: it reads its inotify queue only when asked), apply random file
operations, and check that a scan visiting only the paths it reports equals a
full scan.

Every watcher a test starts is ended by the autouse ``reaper`` fixture, by the
pids its pid files and its ``watch start`` lines recorded (SIGCONT, in case a
test left it stopped, then SIGKILL), so no daemon outlives its test. Tests
that need "nothing is racy" (so that a scan visits only what the watcher
reports) put every mtime in the past first.

Tests marked ``xfail(strict=True)`` show defects: each says what a user loses.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import turnback
from tests.capture.test_commands import rows_of
from tests.conftest import TEST_KEY, Result, make_project, run_cli, tree_state, unprivileged_prefix
from turnback.capture.scan import ScanRules, Snapshot, load_snapshot, rescan_tree, scan_tree
from turnback.capture.watch import _Watcher, ask, watch_dir
from turnback.model import FileState
from turnback.procs import process_alive, process_start

RULES = ScanRules(max_file_bytes=16 << 20)
WAIT_S = 15.0
STARTED = re.compile(r"watching (?P<root>.+) \(pid (?P<pid>\d+)\): scans visit only what changed")
STATUS = re.compile(r"watching (?P<root>.+) \(pid (?P<pid>\d+), (?P<folders>\d+) folders\)")
GIT_ENV = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
PAST_NS = 1_000_000_000 * 10**9  # 2001: an mtime no scan counts as racy

Changes = list[tuple[str, str]]


# -- helpers --------------------------------------------------------------------------------


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    """Poll *predicate* until it holds; fail after *timeout* seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"still waiting after {timeout} s: {what}"
        time.sleep(0.02)


def _end(pid: int, start: int | None) -> None:
    """End one watcher a test started (by its pid and start time), stopped or not."""
    if not process_alive(pid, start):
        return
    for sig in (signal.SIGCONT, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    wait_for(lambda: not process_alive(pid, start), f"watcher {pid} to die after SIGKILL", 5)


class Reaper:
    """The stores whose watchers a test may have started, and the pids it saw started."""

    def __init__(self, home: Path):
        self.homes = [home]
        self.pids: list[tuple[int, int | None]] = []

    def recorded(self) -> list[tuple[int, int | None]]:
        found = list(self.pids)
        for home in self.homes:
            folder = Path(watch_dir(str(home)))
            for pid_file in folder.glob("*.pid") if folder.is_dir() else ():
                with contextlib.suppress(OSError, ValueError):
                    pid, start = (int(v) for v in pid_file.read_text().split()[:2])
                    found.append((pid, start))
        return found

    def end_all(self) -> None:
        for pid, start in self.recorded():
            _end(pid, start)


@pytest.fixture(autouse=True)
def reaper(home: Path) -> Iterator[Reaper]:
    """After each test: end every watcher it started, whatever state it left it in."""
    watchers = Reaper(home)
    yield watchers
    watchers.end_all()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The shared test project, plus a real git repository (never watched) and a folder link (never followed)."""
    root = make_project(tmp_path / "project")
    subprocess.run(["git", "init", "-q", str(root)], check=True, env={**os.environ, **GIT_ENV})
    (root / "link-to-src").symlink_to("src")
    return root


@pytest.fixture
def root(project: Path) -> str:
    return os.path.realpath(project)


@pytest.fixture
def sid(cli) -> str:  # type: ignore[no-untyped-def]
    assert cli("init").rc == 0
    return str(cli("session", "new", "--title", "watch").out.strip())


def start_watcher(cli, reaper: Reaper, root: str, **kwargs: Any) -> int:  # type: ignore[no-untyped-def]
    """``turnback watch start``; checks its exact line and returns the pid."""
    started = cli("watch", "start", **kwargs)
    match = STARTED.fullmatch(started.lines[0]) if started.lines else None
    if match is not None:
        pid = int(match["pid"])
        reaper.pids.append((pid, process_start(pid)))
    assert started.rc == 0, started.out + started.err
    assert match is not None and match["root"] == root, started.out
    return int(match["pid"])


def stop_watcher(cli, root: str, pid: int) -> None:  # type: ignore[no-untyped-def]
    stopped = cli("watch", "stop")
    assert (stopped.rc, stopped.out, stopped.err) == (0, f"stopped the watcher of {root} (pid {pid})\n", "")
    assert not process_alive(pid, None)


def status_folders(cli) -> int:  # type: ignore[no-untyped-def]
    status = cli("watch", "status")
    assert status.rc == 0, status.out + status.err
    match = STATUS.fullmatch(status.lines[0])
    assert match is not None and len(status.lines) == 1, status.out
    return int(match["folders"])


def folders_below(root: Path, skip: tuple[str, ...] = ()) -> int:
    """The folders a watcher of *root* watches: the root and every folder below it but ``.git`` (links not followed)."""
    count = 0
    for folder, dirs, _files in os.walk(root):
        rel = os.path.relpath(folder, root)
        if rel in skip:
            dirs[:] = []
            continue
        count += 1
        dirs[:] = [d for d in dirs if d != ".git"]
    return count


def exec_changes(cli, sid: str, script: str, env: dict[str, str] | None = None) -> Changes:  # type: ignore[no-untyped-def]
    """Run ``sh -c SCRIPT`` as a call; the (path, kind) of each change it recorded, in the recorded order."""
    ran = cli("exec", "--json", "--session", sid, "--", "sh", "-c", script, env=env)
    assert ran.rc == 0, ran.out + ran.err
    return [(change["path"], change["kind"]) for change in ran.json()["call"]["changes"]]


def in_turn(cli, sid: str, script: str, env: dict[str, str] | None = None) -> Changes:  # type: ignore[no-untyped-def]
    assert cli("turn", "begin", "--session", sid).rc == 0
    changes = exec_changes(cli, sid, script, env)
    assert cli("turn", "end", "--session", sid).rc == 0
    return changes


def project_state(project: Path) -> dict[str, Any]:
    """``tree_state`` of the project without ``.git`` (no scan records it, no undo touches it)."""
    return {p: s for p, s in tree_state(project).items() if p != ".git" and not p.startswith(".git/")}


def play_turns(  # type: ignore[no-untyped-def]
    cli, sid: str, project: Path, execs: list[tuple[str, Changes]], sizes: list[int], env: dict[str, str] | None = None
) -> list[tuple[dict[str, Any], bool]]:
    """Run *execs* in turns of *sizes* commands; each command's changes must be exactly the expected ones.

    Returns each turn's tree before it and whether it changed anything, for ``undo_turns_checking``.
    """
    assert sum(sizes) == len(execs)
    turns, at = [], 0
    for number, size in enumerate(sizes, 1):
        batch, at = execs[at : at + size], at + size
        turns.append((project_state(project), any(expected for _, expected in batch)))
        assert cli("turn", "begin", "--session", sid).rc == 0
        for script, expected in batch:
            assert exec_changes(cli, sid, script, env) == expected, f"turn {number}: {script}"
        assert cli("turn", "end", "--session", sid).rc == 0
    return turns


def undo_turns_checking(cli, sid: str, project: Path, turns: list[tuple[dict[str, Any], bool]]) -> None:  # type: ignore[no-untyped-def]
    """Undo the turns newest first; after each, the tree is byte for byte what it was before that turn.

    *turns* holds each turn's state before it and whether it changed anything (undo passes over a turn
    that changed nothing).
    """
    for number in range(len(turns), 0, -1):
        before, changed = turns[number - 1]
        if not changed:
            continue
        undone = cli("undo", "--yes", "--session", sid)
        assert undone.rc == 0, undone.out + undone.err
        assert project_state(project) == before, f"after undoing turn {number}"
    final = cli("undo", "--dry-run", "--session", sid)
    assert final.rc == 1, final.out + final.err


def open_engine(home: Path) -> turnback.Engine:
    return turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False)


def project_id(home: Path, root: str) -> str:
    with open_engine(home) as engine:
        project = engine.store.project_containing(root)
        assert project is not None
        return str(project.id)


def states_of(snapshot: Snapshot) -> dict[str, FileState]:
    return {path: entry.state() for path, entry in snapshot.items()}


def cache_matches_a_full_scan(home: Path, root: str) -> str | None:
    """The stat cache (kept up to date by partial scans) against a full scan of the tree now; its token."""
    with open_engine(home) as engine:
        project = engine.store.project_containing(root)
        assert project is not None
        cached = engine.store.latest_snapshot(project.id)
        assert cached is not None
        loaded = load_snapshot(engine.store, cached.id, cached.data)
        assert loaded is not None
        kept = loaded.snapshot
        full = scan_tree(engine.store, root, RULES, None, now_ns=time.time_ns())
        assert states_of(kept) == states_of(full.snapshot)
        return cached.watch_token


def set_old_mtimes(root: Path) -> None:
    """Give every file an mtime far in the past, so no scan counts it as racy (and re-reads it anyway)."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.utime(path, ns=(PAST_NS, PAST_NS))


# -- 1. start, status, stop -----------------------------------------------------------------


def test_start_status_and_stop_say_exactly_what_runs(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, root: str, sid: str, reaper: Reaper
) -> None:
    (project / "vendor" / "lib" / ".git" / "objects").mkdir(parents=True)  # a nested repository: not watched
    folders = folders_below(project)
    assert folders == 6  # the root, src, src/pkg, docs, vendor, vendor/lib

    pid = start_watcher(cli, reaper, root)
    assert process_alive(pid, None)
    status = cli("watch", "status")
    assert (status.rc, status.out, status.err) == (0, f"watching {root} (pid {pid}, {folders} folders)\n", "")
    as_json = cli("watch", "status", "--json")
    assert as_json.rc == 0
    assert as_json.json() == {"schema": 1, "project": root, "pid": pid, "folders": folders, "reason": None}
    from_elsewhere = run_cli(home, "watch", "status", str(project / "src" / "pkg"), cwd=project.parent)
    assert (from_elsewhere.rc, from_elsewhere.out) == (0, f"watching {root} (pid {pid}, {folders} folders)\n")

    again = cli("watch", "start")
    assert (again.rc, again.out, again.err) == (1, "", f"turnback: a watcher already runs for {root} (pid {pid})\n")
    again_json = cli("watch", "start", "--json")
    assert again_json.rc == 1
    error = again_json.json()["error"]
    assert {key: error[key] for key in ("type", "message", "exit")} == {
        "type": "RefusedError",
        "message": f"a watcher already runs for {root} (pid {pid})",
        "exit": 1,
    }
    assert isinstance(error["code"], str)
    assert process_alive(pid, None)

    stop_watcher(cli, root, pid)
    assert sorted(p.suffix for p in Path(watch_dir(str(home))).iterdir()) == [".lock", ".log"]  # no socket, no pid
    stopped = cli("watch", "stop")
    assert (stopped.rc, stopped.out, stopped.err) == (1, "no watcher runs here\n", "")
    none = cli("watch", "status")
    assert (none.rc, none.out, none.err) == (1, f"no watcher runs for {root}: every scan visits every path\n", "")
    none_json = cli("watch", "status", "--json")
    assert none_json.rc == 1
    assert none_json.json() == {"schema": 1, "project": root, "pid": None, "folders": 0, "reason": None}
    stop_json = cli("watch", "stop", "--json")
    assert stop_json.rc == 1
    assert stop_json.json() == {"schema": 1, "project": root, "stopped": None}

    started_json = cli("watch", "start", "--json")
    assert started_json.rc == 0, started_json.err
    data = started_json.json()
    second = data["pid"]
    assert isinstance(second, int) and second != pid
    reaper.pids.append((second, process_start(second)))
    assert data == {"schema": 1, "project": root, "pid": second, "folders": 6, "reason": None}
    stopped_json = cli("watch", "stop", "--json")
    assert (stopped_json.rc, stopped_json.json()) == (0, {"schema": 1, "project": root, "stopped": second})
    assert not process_alive(second, None)


@pytest.mark.parametrize("verb", ["start", "status", "stop"])
def test_watch_outside_any_project_is_a_usage_error(cli, tmp_path: Path, sid: str, verb: str) -> None:  # type: ignore[no-untyped-def]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = cli("watch", verb, cwd=elsewhere)
    assert (result.rc, result.out) == (2, "")
    assert result.err == f"turnback: {elsewhere} is in no turnback project; run turnback init there first\n"
    named = cli("watch", verb, str(elsewhere))
    assert (named.rc, named.err) == (
        2,
        f"turnback: {elsewhere} is in no turnback project; run turnback init there first\n",
    )
    assert not list(Path(watch_dir(str(tmp_path / "store"))).glob("*.pid"))


def test_the_folder_count_follows_folders_made_removed_and_renamed(  # type: ignore[no-untyped-def]
    cli, project: Path, root: str, sid: str, reaper: Reaper
) -> None:
    start_watcher(cli, reaper, root)
    assert status_folders(cli) == folders_below(project) == 4
    (project / "new" / "a" / "b").mkdir(parents=True)
    (project / ".git" / "extra" / "more").mkdir(parents=True)
    assert status_folders(cli) == 7
    os.rename(project / "new", project / "renamed")
    assert status_folders(cli) == 7
    shutil.rmtree(project / "renamed")
    wait_for(lambda: status_folders(cli) == 4, "the watches of a removed folder to go")
    (project / "docs").rename(project.parent / "docs-outside")  # moved out of the project
    assert status_folders(cli) == 3
    (project.parent / "docs-outside").rename(project / "docs")  # and back in
    assert status_folders(cli) == folders_below(project) == 4


# -- 2. commands with the watcher: exactly their changes, undone byte for byte -------------


def test_file_changes_of_commands_are_exact_and_undone_with_the_watcher(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, root: str, sid: str, reaper: Reaper
) -> None:
    pid = start_watcher(cli, reaper, root)
    turns: list[tuple[str, Changes]] = [
        (
            "printf 'more\\n' >> README.md; printf 'new\\n' > new.txt; rm docs/guide.md; "
            "chmod +x src/main.py; chmod -x run.sh; printf 'g\\n' > .git/turnback-test; printf x >> .git/description",
            [
                ("docs/guide.md", "deleted"),
                ("README.md", "modified"),
                ("run.sh", "mode"),
                ("src/main.py", "mode"),
                ("new.txt", "new"),
            ],
        ),
        (
            "ln -s docs dlink; ln -sfn src/main.py link-to-readme; ln -s missing dangling",
            [("link-to-readme", "modified"), ("dangling", "new"), ("dlink", "new")],
        ),
        ("printf aaaa > four.txt", [("four.txt", "new")]),
        ("printf bbbb > four.txt", [("four.txt", "modified")]),  # the same size, within the same second
        ("mv new.txt docs/new.txt", [("new.txt", "deleted"), ("docs/new.txt", "new")]),
        ("printf y >> .git/description; mkdir .git/more; printf z > .git/more/file", []),
        (
            "printf '\\000\\001\\377' > logo.bin; : > src/pkg/crlf.txt",
            [("logo.bin", "modified"), ("src/pkg/crlf.txt", "modified")],
        ),
    ]
    states = play_turns(cli, sid, project, turns, [1, 3, 3])
    token = cache_matches_a_full_scan(home, root)
    assert token is not None and token.startswith(f"{pid}-")  # the scans asked this watcher
    undo_turns_checking(cli, sid, project, states)
    stop_watcher(cli, root, pid)


def test_folder_changes_of_commands_are_exact_and_undone_with_the_watcher(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, tmp_path: Path, root: str, sid: str, reaper: Reaper
) -> None:
    outside = tmp_path / "outside"  # named through $OUT, so exec does not copy it as an outside path
    (outside / "incoming" / "sub").mkdir(parents=True)
    (outside / "incoming" / "x.txt").write_bytes(b"x\n")
    (outside / "incoming" / "sub" / "y.txt").write_bytes(b"y\n")
    env = {"OUT": str(outside)}
    pid = start_watcher(cli, reaper, root)
    turns: list[tuple[str, Changes]] = [
        (
            "mkdir -p a/b/c && printf 1 > a/b/c/one && printf 2 > a/two && cp -r src copy",
            [
                ("a", "new"),
                ("copy", "new"),
                ("a/b", "new"),
                ("a/two", "new"),
                ("copy/main.py", "new"),
                ("copy/pkg", "new"),
                ("a/b/c", "new"),
                ("copy/pkg/__init__.py", "new"),
                ("copy/pkg/crlf.txt", "new"),
                ("a/b/c/one", "new"),
            ],
        ),
        (
            "mv src source",
            [
                ("src/pkg/__init__.py", "deleted"),
                ("src/pkg/crlf.txt", "deleted"),
                ("src/main.py", "deleted"),
                ("src/pkg", "deleted"),
                ("src", "deleted"),
                ("source", "new"),
                ("source/main.py", "new"),
                ("source/pkg", "new"),
                ("source/pkg/__init__.py", "new"),
                ("source/pkg/crlf.txt", "new"),
            ],
        ),
        (
            'mv a "$OUT/a" && mv "$OUT/incoming" incoming',
            [
                ("a/b/c/one", "deleted"),
                ("a/b/c", "deleted"),
                ("a/b", "deleted"),
                ("a/two", "deleted"),
                ("a", "deleted"),
                ("incoming", "new"),
                ("incoming/sub", "new"),
                ("incoming/x.txt", "new"),
                ("incoming/sub/y.txt", "new"),
            ],
        ),
        (
            "rm README.md && mkdir README.md && printf in > README.md/inside",
            [("README.md", "modified"), ("README.md/inside", "new")],
        ),
        (
            "mv docs docs-old && mkdir docs && printf new > docs/guide.md",
            [("docs/guide.md", "modified"), ("docs-old", "new"), ("docs-old/guide.md", "new")],
        ),
        (
            "mv incoming source/incoming && printf z > source/incoming/sub/z.txt",
            [
                ("incoming/sub/y.txt", "deleted"),
                ("incoming/sub", "deleted"),
                ("incoming/x.txt", "deleted"),
                ("incoming", "deleted"),
                ("source/incoming", "new"),
                ("source/incoming/sub", "new"),
                ("source/incoming/x.txt", "new"),
                ("source/incoming/sub/y.txt", "new"),
                ("source/incoming/sub/z.txt", "new"),
            ],
        ),
        ("printf more >> source/incoming/sub/z.txt", [("source/incoming/sub/z.txt", "modified")]),
    ]
    states = play_turns(cli, sid, project, turns, [2, 2, 3], env)
    assert status_folders(cli) == folders_below(project)
    token = cache_matches_a_full_scan(home, root)
    assert token is not None and token.startswith(f"{pid}-")
    undo_turns_checking(cli, sid, project, states)
    stop_watcher(cli, root, pid)


FOLDER_TO_FILE = "rm -r copy && printf back > copy"
FOLDER_TO_FILE_CHANGES = [
    ("copy/pkg/__init__.py", "deleted"),
    ("copy/pkg/crlf.txt", "deleted"),
    ("copy/main.py", "deleted"),
    ("copy/pkg", "deleted"),
    ("copy", "modified"),
]


@pytest.mark.parametrize("watched", [True, False], ids=["watched", "unwatched"])
def test_a_folder_replaced_by_a_file_is_recorded_exactly(  # type: ignore[no-untyped-def]
    cli, project: Path, root: str, sid: str, reaper: Reaper, watched: bool
) -> None:
    shutil.copytree(project / "src", project / "copy")
    if watched:
        start_watcher(cli, reaper, root)
    assert in_turn(cli, sid, FOLDER_TO_FILE) == FOLDER_TO_FILE_CHANGES


@pytest.mark.parametrize("watched", [True, False], ids=["watched", "unwatched"])
def test_undo_puts_back_a_folder_a_command_replaced_by_a_file(  # type: ignore[no-untyped-def]
    cli, project: Path, root: str, sid: str, reaper: Reaper, watched: bool
) -> None:
    shutil.copytree(project / "src", project / "copy")
    if watched:
        start_watcher(cli, reaper, root)
    before = project_state(project)
    assert in_turn(cli, sid, FOLDER_TO_FILE) == FOLDER_TO_FILE_CHANGES
    undone = cli("undo", "--yes", "--session", sid)
    assert project_state(project) == before, undone.out


@pytest.mark.parametrize("watched", [True, False], ids=["watched", "unwatched"])
def test_undo_puts_back_a_folders_mode(  # type: ignore[no-untyped-def]
    cli, project: Path, root: str, sid: str, reaper: Reaper, watched: bool
) -> None:
    if watched:
        start_watcher(cli, reaper, root)
    before = project_state(project)
    assert in_turn(cli, sid, "chmod 700 src/pkg") == [("src/pkg", "modified")]
    assert cli("undo", "--yes", "--session", sid).rc == 0
    assert project_state(project) == before


def test_a_users_edits_between_commands_are_the_baseline_with_the_watcher(  # type: ignore[no-untyped-def]
    cli, project: Path, root: str, sid: str, reaper: Reaper
) -> None:
    start_watcher(cli, reaper, root)
    cli("turn", "begin", "--session", sid)
    assert exec_changes(cli, sid, "printf 'agent one\\n' >> README.md") == [("README.md", "modified")]
    # The user, between two commands: edits, creates a folder with files, deletes, renames a folder.
    (project / "docs" / "guide.md").write_bytes(b"the user's guide\n")
    (project / "mine" / "deep").mkdir(parents=True)
    (project / "mine" / "deep" / "m.txt").write_bytes(b"mine\n")
    (project / "logo.bin").unlink()
    (project / "src" / "pkg").rename(project / "src" / "package")
    (project / "README.md").write_bytes(b"# the user's readme\n")
    user_state = project_state(project)
    assert exec_changes(cli, sid, "printf 'agent two\\n' >> run.sh; printf more >> mine/deep/m.txt") == [
        ("mine/deep/m.txt", "modified"),
        ("run.sh", "modified"),
    ]
    cli("turn", "end", "--session", sid)
    preview = cli("undo", "--dry-run", "--session", sid)
    assert rows_of(preview) == [
        "restore     run.sh",
        "restore     mine/deep/m.txt",
        "skip        README.md (changed after the turn; --force overwrites it)",
    ]
    assert cli("undo", "--yes", "--session", sid).rc == 0
    assert project_state(project) == user_state


# -- 3. never missing a change --------------------------------------------------------------


@pytest.mark.parametrize("ended_by", ["watch stop", "SIGKILL"])
def test_changes_made_while_no_watcher_ran_are_the_baseline_of_the_next_watcher(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, root: str, sid: str, reaper: Reaper, ended_by: str
) -> None:
    first = start_watcher(cli, reaper, root)
    cli("turn", "begin", "--session", sid)
    assert exec_changes(cli, sid, "printf one > one.txt") == [("one.txt", "new")]
    old_token = cache_matches_a_full_scan(home, root)
    assert old_token is not None and old_token.startswith(f"{first}-")
    if ended_by == "watch stop":
        stop_watcher(cli, root, first)
    else:
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: not process_alive(first, None), "the killed watcher to be gone")
        status = cli("watch", "status")
        assert (status.rc, status.out) == (1, f"no watcher runs for {root}: every scan visits every path\n")
    # No watcher runs: the user edits, deletes, makes a folder, and rewrites a file the next command appends to.
    (project / "README.md").write_bytes(b"# edited while nothing watched\n")
    (project / "docs" / "guide.md").unlink()
    (project / "unwatched" / "sub").mkdir(parents=True)
    (project / "unwatched" / "sub" / "u.txt").write_bytes(b"u\n")
    (project / "one.txt").write_bytes(b"user's one")
    second = start_watcher(cli, reaper, root)
    assert second != first
    answer = ask(str(home), project_id(home, root), old_token)
    assert answer is not None and answer.paths is None and answer.reason is None  # not known: visit everything
    assert answer.token.startswith(f"{second}-")
    assert exec_changes(cli, sid, "true") == []
    baseline = project_state(project)
    assert exec_changes(cli, sid, "printf more >> one.txt; printf v > unwatched/sub/v.txt") == [
        ("one.txt", "modified"),
        ("unwatched/sub/v.txt", "new"),
    ]
    cli("turn", "end", "--session", sid)
    assert cache_matches_a_full_scan(home, root) is not None
    undone = cli("undo", "--yes", "--session", sid, "--force")
    assert undone.rc == 0, undone.out + undone.err
    state = project_state(project)
    assert {p: s for p, s in state.items() if p != "one.txt"} == {
        p: s for p, s in baseline.items() if p != "one.txt"
    }  # the user's edits stay: they were no command's
    assert not (project / "one.txt").exists()  # the first command's new file, taken back with --force


def test_a_token_of_one_watcher_means_nothing_to_another(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    first = _Watcher(str(tree), frozenset())
    second = _Watcher(str(tree), frozenset())
    try:
        token = first.answer(None)["token"]
        (tree / "sub" / "f").write_bytes(b"f")
        assert first.answer(token)["paths"] == [["sub/f", False]]
        for asked in (token, None, "", "garbage", f"{token}0", token.split(":")[0] + ":-1"):
            reply = second.answer(asked)
            assert reply["paths"] is None and reply["reason"] is None, asked
        mine = second.answer(None)["token"]
        assert second.answer(mine)["paths"] == []
        assert first.answer(mine)["paths"] is None
    finally:
        first.notify.close()
        second.notify.close()


def _max_queued_events() -> int:
    return int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())


def flood(paths: list[Path], events: int) -> None:
    """At least *events* inotify events (two per append: modify, close-write), never two alike in a row."""
    for i in range(events // 2 + 1):
        fd = os.open(paths[i % len(paths)], os.O_WRONLY | os.O_APPEND)
        os.write(fd, b".")
        os.close(fd)


def stopped(pid: int) -> contextlib.AbstractContextManager[None]:
    """The watcher *pid* stopped (SIGSTOP) inside the block: its inotify queue fills, nothing reads it."""

    @contextlib.contextmanager
    def block() -> Iterator[None]:
        os.kill(pid, signal.SIGSTOP)
        wait_for(lambda: Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T", "SIGSTOP")
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    return block()


def test_a_queue_overflow_makes_the_answer_unknown_and_the_next_command_stays_exact(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, root: str, sid: str, reaper: Reaper
) -> None:
    queue = _max_queued_events()
    if queue > 1_000_000:
        pytest.skip(f"fs.inotify.max_queued_events is {queue}: too many events to overflow it in a test")
    pid = start_watcher(cli, reaper, root)
    busy = [project / "busy-a.txt", project / "busy-b.txt"]
    for path in busy:
        path.write_bytes(b"")
    cli("turn", "begin", "--session", sid)
    assert exec_changes(cli, sid, "true") == []
    token = cache_matches_a_full_scan(home, root)
    assert token is not None and token.startswith(f"{pid}-")
    with stopped(pid):
        flood(busy, queue + 4000)
        (project / "docs" / "guide.md").write_bytes(b"lost in the overflow\n")
    answer = ask(str(home), project_id(home, root), token)
    assert answer is not None
    assert answer.paths is None and answer.reason is None  # events were lost: not known, a full scan
    after = ask(str(home), project_id(home, root), answer.token)
    assert after is not None and after.paths == {}  # the watcher goes on: what follows is known again
    status = cli("watch", "status")
    assert (status.rc, status.out) == (0, f"watching {root} (pid {pid}, 4 folders)\n")
    baseline = project_state(project)
    assert exec_changes(cli, sid, "printf agent >> README.md; printf n > src/n.txt") == [
        ("README.md", "modified"),
        ("src/n.txt", "new"),
    ]
    cli("turn", "end", "--session", sid)
    assert cache_matches_a_full_scan(home, root) is not None
    assert cli("undo", "--yes", "--session", sid).rc == 0
    assert project_state(project) == baseline  # the flood and the lost edit stay: they were the user's


def test_folders_made_or_renamed_during_a_queue_overflow_are_watched_afterwards(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, root: str, sid: str, reaper: Reaper
) -> None:
    queue = _max_queued_events()
    if queue > 1_000_000:
        pytest.skip(f"fs.inotify.max_queued_events is {queue}: too many events to overflow it in a test")
    set_old_mtimes(project)  # nothing racy: a scan visits only what the watcher reports
    pid = start_watcher(cli, reaper, root)
    busy = [project / "busy-a.txt", project / "busy-b.txt"]
    for path in busy:
        path.write_bytes(b"")
    cli("turn", "begin", "--session", sid)
    assert exec_changes(cli, sid, "true") == []
    with stopped(pid):
        flood(busy, queue + 4000)
        (project / "made").mkdir()  # its event is dropped: the queue is full
        (project / "docs").rename(project / "documents")
    assert exec_changes(cli, sid, "true") == []  # a full scan (the overflow): the baseline is right
    changes = exec_changes(cli, sid, "printf n > made/n.txt; printf more >> documents/guide.md")
    assert changes == [("documents/guide.md", "modified"), ("made/n.txt", "new")]
    assert status_folders(cli) == folders_below(project)


def test_changes_in_an_excluded_folder_read_the_same_with_and_without_the_watcher(
    home: Path, tmp_path: Path, reaper: Reaper
) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[snapshot]\nexclude = ["cache/", "*.log"]\n')
    results: dict[str, tuple[list[str], Changes, list[str], list[str]]] = {}
    for mode in ("watched", "unwatched"):
        twin = make_project(tmp_path / mode)
        (twin / "cache" / "sub").mkdir(parents=True)
        (twin / "cache" / "data").write_bytes(b"cached\n")
        (twin / "cache" / "sub" / "deep").write_bytes(b"deep\n")
        (twin / "src" / "app.log").write_bytes(b"log\n")

        def tb(*args: str, env: dict[str, str] | None = None, _twin: Path = twin) -> Result:
            return run_cli(home, *args, cwd=_twin, env=env)

        assert tb("init").rc == 0
        session = tb("session", "new").out.strip()
        if mode == "watched":
            start_watcher(tb, reaper, os.path.realpath(twin))
        tb("turn", "begin", "--session", session)
        lines = []
        for script in (
            "true",
            "printf more >> cache/sub/deep",
            "printf new > cache/sub/new; rm cache/data",
            "printf line >> src/app.log; printf x > README.md",
        ):
            ran = tb("exec", "--session", session, "--", "sh", "-c", script)
            assert ran.rc == 0, ran.err
            lines.append(ran.out)
        (twin / "cache" / "data").write_bytes(b"the user's cache\n")  # the user, between two commands
        changes = exec_changes(tb, session, "printf z > cache/sub/z")
        tb("turn", "end", "--session", session)
        preview = tb("undo", "--dry-run", "--session", session)
        undone = tb("undo", "--yes", "--session", session)
        assert undone.rc == 0, undone.out + undone.err
        rows = [line for line in undone.lines if not line.startswith("undo turn ")]
        done_at = next(i for i, line in enumerate(rows) if line.startswith("undone: "))
        results[mode] = (lines, changes, rows_of(preview), rows[done_at:])
    watched, unwatched = results["watched"], results["unwatched"]
    assert (
        watched[0]
        == unwatched[0]
        == [  # a change below an excluded folder shows in no exec line, either way
            "",
            "",
            "",
            "changed README.md +1 -3 · changed src/app.log (not covered)\n",
        ]
    )
    assert watched[1] == unwatched[1] == [("cache", "modified")]  # the user's edit of cache/data is no command's
    assert (
        watched[2]
        == unwatched[2]
        == [
            "not covered cache (excluded by snapshot.exclude (cache/))",
            "not covered src/app.log (excluded by snapshot.exclude (*.log))",
            "restore     README.md",
            "not covered cache (excluded by snapshot.exclude (cache/))",
            "not covered cache (excluded by snapshot.exclude (cache/))",
        ]
    )
    assert watched[3][0].startswith("undone: 1 file restored; what was replaced is in ")
    assert watched[3][1:] == unwatched[3][1:] == watched[2][:2] + watched[2][3:]  # the trash folders differ


# -- 4. the property: a partial scan equals a full scan ------------------------------------

NAMES = ("a", "b")
PATHS = (
    NAMES
    + tuple(f"{x}/{y}" for x in NAMES for y in NAMES)
    + tuple(f"{x}/{y}/{z}" for x in NAMES for y in NAMES for z in NAMES)
)
_path = st.sampled_from(PATHS)
OPERATION = st.one_of(
    st.tuples(st.just("write"), _path, st.binary(max_size=3)),
    st.tuples(st.just("append"), _path),
    st.tuples(st.just("delete"), _path),
    st.tuples(st.just("chmod"), _path, st.sampled_from([0o644, 0o755, 0o600, 0o700])),
    st.tuples(st.just("mkdir"), _path),
    st.tuples(st.just("rename"), _path, _path),
    st.tuples(st.just("nest"), _path, _path),
    st.tuples(st.just("symlink"), _path, st.sampled_from(["a", "../b", "nowhere"])),
    st.tuples(st.just("to_dir"), _path),
    st.tuples(st.just("to_file"), _path),
    st.tuples(st.just("move_out"), _path),
    st.tuples(st.just("move_in"), _path),
    st.tuples(st.just("drain")),
)
Operation = tuple[Any, ...]
PROPERTY = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def build_tree(root: Path) -> None:
    """a/ (a/a/ with two files, a file), b (a file), l -> b; every mtime in the past."""
    (root / "a" / "a").mkdir(parents=True)
    for rel, data in (("a/b", b"ab"), ("a/a/a", b"aaa"), ("a/a/b", b"aab"), ("b", b"b")):
        (root / rel).write_bytes(data)
    (root / "l").symlink_to("b")
    set_old_mtimes(root)


class Playground:
    """A tree, a place outside it, and the in-process watcher; plays operations (those that fail do nothing)."""

    def __init__(self, base: Path):
        self.root = base / "tree"
        self.outside = base / "outside"
        self.outside.mkdir()
        build_tree(self.root)
        self.watcher = _Watcher(str(self.root), frozenset())
        self.moved = 0

    def play(self, op: Operation) -> None:
        kind, full = op[0], self.root / op[1] if len(op) > 1 else self.root
        try:
            if kind == "write":
                full.write_bytes(op[2])
            elif kind == "append":
                with full.open("ab") as handle:
                    handle.write(b"+")
            elif kind == "delete":
                shutil.rmtree(full) if full.is_dir() and not full.is_symlink() else full.unlink()
            elif kind == "chmod" and not full.is_symlink():
                full.chmod(op[2] | (0o700 if full.is_dir() else 0))
            elif kind == "mkdir":
                full.mkdir()
                (full / "f").write_bytes(b"in a new folder")
            elif kind == "rename":
                os.rename(full, self.root / op[2])
            elif kind == "nest":  # mkdir NEW && mv OLD NEW/a
                (self.root / op[2]).mkdir()
                os.rename(full, self.root / op[2] / "a")
            elif kind == "symlink":
                if full.is_symlink() or full.is_file():
                    full.unlink()
                full.symlink_to(op[2])
            elif kind == "to_dir":
                full.unlink()
                full.mkdir()
                (full / "b").write_bytes(b"was a file")
            elif kind == "to_file":
                shutil.rmtree(full)
                full.write_bytes(b"was a folder")
            elif kind == "move_out":
                self.moved += 1
                os.rename(full, self.outside / f"out{self.moved}")
            elif kind == "move_in":
                self.moved += 1
                incoming = self.outside / f"in{self.moved}"
                (incoming / "a").mkdir(parents=True)
                (incoming / "a" / "b").write_bytes(b"moved in")
                os.rename(incoming, full)
            elif kind == "drain":
                self.watcher.drain()  # the daemon reads its queue whenever it wakes: at any point
        except OSError:
            pass


def check_rounds(store: Any, base: Path, rounds: list[list[Operation]]) -> None:
    """Per round: operations, then the watcher's answer; the partial scan must equal a full scan.

    Scans run with a *now* far in the future, so no entry is racy: a partial
    scan then visits nothing but what the watcher reports (a racy entry would
    be read again whatever it says). Between rounds every mtime is put back
    in the past (so a same-size rewrite in the same clock tick still shows),
    and the next round starts from a fresh full scan and token.
    """
    play = Playground(base)
    future = time.time_ns() + 10**15
    try:
        token = play.watcher.answer(None)["token"]
        previous = scan_tree(store, str(play.root), RULES, None, now_ns=future).snapshot
        for number, ops in enumerate(rounds, 1):
            for op in ops:
                play.play(op)
            reply = play.watcher.answer(token)
            assert reply["paths"] is not None, reply
            changed = {path: deep for path, deep in reply["paths"]}
            partial = rescan_tree(store, str(play.root), RULES, previous, changed, now_ns=future)
            full = scan_tree(store, str(play.root), RULES, None, now_ns=future)
            assert partial is not None
            assert states_of(partial.snapshot) == states_of(full.snapshot), f"round {number}: reported {changed}"
            # The cache is saved as what differs from the previous one, found at the paths the scan touched.
            assert partial.touched is not None
            differ = {
                p for p in previous.keys() | partial.snapshot.keys() if previous.get(p) != partial.snapshot.get(p)
            }
            assert differ <= partial.touched, f"round {number}: untouched paths differ: {differ - partial.touched}"
            set_old_mtimes(play.root)
            token = play.watcher.answer(token)["token"]
            previous = scan_tree(store, str(play.root), RULES, None, now_ns=future).snapshot
    finally:
        play.watcher.notify.close()


@PROPERTY
@given(ops=st.lists(OPERATION, max_size=12))
@example(ops=[("nest", "a", "b")])  # b is a file: mkdir fails, nothing moves
@example(ops=[("delete", "b"), ("nest", "a/a", "b"), ("append", "b/a/a")])
@example(ops=[("to_dir", "b"), ("rename", "a", "b/a"), ("move_in", "a"), ("symlink", "b/a/a", "../b")])
def test_a_partial_scan_of_what_the_watcher_reports_equals_a_full_scan(
    engine: turnback.Engine, tmp_path: Path, ops: list[Operation]
) -> None:
    with tempfile.TemporaryDirectory(dir=tmp_path) as base:
        check_rounds(engine.store, Path(base), [ops])


@PROPERTY
@given(rounds=st.lists(st.lists(OPERATION, max_size=8), min_size=2, max_size=3))
@example(rounds=[[("delete", "b"), ("nest", "a/a", "b")], [("append", "b/a/a")]])
def test_a_partial_scan_stays_equal_to_a_full_scan_round_after_round(
    engine: turnback.Engine, tmp_path: Path, rounds: list[list[Operation]]
) -> None:
    with tempfile.TemporaryDirectory(dir=tmp_path) as base:
        check_rounds(engine.store, Path(base), rounds)


# -- 5. what else a user relies on ----------------------------------------------------------


def test_a_watcher_ends_when_its_project_folder_is_moved(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, tmp_path: Path, root: str, sid: str, reaper: Reaper
) -> None:
    pid = start_watcher(cli, reaper, root)
    project.rename(tmp_path / "moved-away")
    wait_for(lambda: not process_alive(pid, None), "the watcher to end once the project folder was moved")
    assert not list(Path(watch_dir(str(home))).glob("*.sock"))
    assert not list(Path(watch_dir(str(home))).glob("*.pid"))
    project.mkdir()
    status = cli("watch", "status")
    assert (status.rc, status.out) == (1, f"no watcher runs for {root}: every scan visits every path\n")


def test_a_watcher_ends_when_its_project_folder_is_deleted(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, root: str, sid: str, reaper: Reaper
) -> None:
    pid = start_watcher(cli, reaper, root)
    shutil.rmtree(project)
    wait_for(lambda: not process_alive(pid, None), "the watcher to end once the project folder was deleted", 3)
    assert not list(Path(watch_dir(str(home))).glob("*.pid"))


@pytest.mark.parametrize("how", ["deleted and restored", "moved aside with its parent and restored"])
def test_a_project_folder_made_again_at_its_path_is_not_answered_for_by_the_old_watcher(
    home: Path, tmp_path: Path, reaper: Reaper, how: str
) -> None:
    project = make_project(tmp_path / "outer" / "project")
    set_old_mtimes(project)  # nothing racy: only what the watcher reports is visited
    backup = tmp_path / "backup"
    shutil.copytree(project, backup, symlinks=True)

    def tb(*args: str, env: dict[str, str] | None = None) -> Result:
        return run_cli(home, *args, cwd=project, env=env)

    assert tb("init").rc == 0
    session = tb("session", "new").out.strip()
    pid = start_watcher(tb, reaper, os.path.realpath(project))
    tb("turn", "begin", "--session", session)
    assert exec_changes(tb, session, "true") == []
    if how == "deleted and restored":
        shutil.rmtree(project)  # e.g. rm -rf project && tar x / git clone
    else:
        (tmp_path / "outer").rename(tmp_path / "outer-old")  # e.g. a checkout folder moved aside
    shutil.copytree(backup, project, symlinks=True)
    assert process_alive(pid, None)
    assert exec_changes(tb, session, "printf agent >> README.md") == [("README.md", "modified")]


def test_a_folder_moved_into_a_new_folder_is_still_watched(  # type: ignore[no-untyped-def]
    cli, project: Path, root: str, sid: str, reaper: Reaper
) -> None:
    set_old_mtimes(project)
    pid = start_watcher(cli, reaper, root)
    cli("turn", "begin", "--session", sid)
    assert exec_changes(cli, sid, "true") == []
    with stopped(pid):
        (project / "packages").mkdir()
        (project / "src").rename(project / "packages" / "src")
    assert exec_changes(cli, sid, "true") == []
    assert exec_changes(cli, sid, "printf more >> packages/src/main.py; printf n > packages/src/pkg/n.txt") == [
        ("packages/src/main.py", "modified"),
        ("packages/src/pkg/n.txt", "new"),
    ]


EXCHANGE = (
    "import ctypes, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "if libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2) != 0:\n"
    "    raise OSError(ctypes.get_errno(), 'renameat2')\n"
)


def test_two_folders_swapped_in_one_call_are_both_still_watched(  # type: ignore[no-untyped-def]
    cli, project: Path, root: str, sid: str, reaper: Reaper
) -> None:
    set_old_mtimes(project)
    start_watcher(cli, reaper, root)
    cli("turn", "begin", "--session", sid)
    swapped = cli("exec", "--json", "--session", sid, "--", sys.executable, "-c", EXCHANGE, "src", "docs")
    assert swapped.rc == 0, swapped.err
    assert (project / "docs" / "main.py").exists() and (project / "src" / "guide.md").exists()
    assert exec_changes(cli, sid, "printf more >> docs/main.py; printf more >> src/guide.md") == [
        ("docs/main.py", "modified"),
        ("src/guide.md", "modified"),
    ]


def test_a_write_through_a_hard_link_is_recorded_under_both_names(  # type: ignore[no-untyped-def]
    cli, project: Path, root: str, sid: str, reaper: Reaper
) -> None:
    set_old_mtimes(project)
    os.link(project / "README.md", project / "docs" / "README-link.md")
    cli("turn", "begin", "--session", sid)
    expected = [("README.md", "modified"), ("docs/README-link.md", "modified")]
    assert exec_changes(cli, sid, "printf one >> docs/README-link.md") == expected  # without a watcher
    set_old_mtimes(project)  # not racy: a scan visits it only when the watcher reports it
    start_watcher(cli, reaper, root)
    assert exec_changes(cli, sid, "true") == []
    assert exec_changes(cli, sid, "printf two >> docs/README-link.md") == expected


MMAP_WRITER = (
    "import mmap, os, sys, time\n"
    "fd = os.open(sys.argv[1], os.O_RDWR)\n"
    "mapped = mmap.mmap(fd, 0)\n"
    "os.close(fd)\n"
    "print('ready', flush=True)\n"
    "while not os.path.exists(sys.argv[2]):\n"
    "    time.sleep(0.01)\n"
    "mapped[0:4] = b'MMAP'\n"
    "mapped.flush()\n"
    "open(sys.argv[2] + '.done', 'w').close()\n"
)


def test_with_the_watcher_a_scan_visits_only_what_it_reports_so_an_mmap_write_goes_unseen(  # type: ignore[no-untyped-def]
    cli, project: Path, tmp_path: Path, root: str, sid: str, reaper: Reaper
) -> None:
    """The documented limit, and the proof that scans really visit only the reported paths.

    A write through ``mmap`` makes no inotify event (it does change the
    file's mtime). A mapping made before the command and written while it
    runs: without the watcher the full scan records it; with the watcher the
    partial scan does not visit the file.
    """
    mapped = project / "mapped.bin"
    mapped.write_bytes(b"\0" * 4096)
    cli("turn", "begin", "--session", sid)
    seen: dict[str, Changes] = {}
    for mode in ("unwatched", "watched"):
        set_old_mtimes(project)  # nothing racy: a racy file would be read again whatever the watcher says
        gate = tmp_path / f"gate-{mode}"
        writer = subprocess.Popen(
            [sys.executable, "-c", MMAP_WRITER, str(mapped), str(gate)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
            if mode == "watched":
                pid = start_watcher(cli, reaper, root)
            assert exec_changes(cli, sid, "true") == []  # the baseline: the mapping's open and close are old news
            command = 'touch "$G"; i=0; until [ -e "$G.done" ] || [ $i -ge 500 ]; do sleep 0.02; i=$((i+1)); done'
            seen[mode] = exec_changes(cli, sid, command, env={"G": str(gate)})
            assert writer.wait(WAIT_S) == 0
        finally:
            if writer.poll() is None:
                writer.kill()
                writer.wait()
    assert seen == {"unwatched": [("mapped.bin", "modified")], "watched": []}
    status = cli("watch", "status")
    assert status.out == f"watching {root} (pid {pid}, 4 folders)\n"


def test_status_says_why_every_scan_visits_everything_when_a_folder_cannot_be_watched(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, root: str, sid: str, reaper: Reaper
) -> None:
    prefix = unprivileged_prefix()
    if prefix is None:
        pytest.skip("running as root without setpriv: root watches a mode-000 folder")
    locked = project / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        started = cli("watch", "start", prefix=prefix)
        match = STARTED.fullmatch(started.lines[0]) if started.lines else None
        assert match is not None, started.out + started.err
        pid = int(match["pid"])
        reaper.pids.append((pid, process_start(pid)))
        reason = "cannot watch locked: Permission denied"
        assert (started.rc, started.lines[1:]) == (0, [f"but every scan visits everything: {reason}"])
        status = cli("watch", "status")
        assert (status.rc, status.lines) == (
            0,
            [f"watching {root} (pid {pid}, 4 folders)", f"but every scan visits everything: {reason}"],
        )
        assert cli("watch", "status", "--json").json()["reason"] == reason
        answer = ask(str(home), project_id(home, root), None)
        assert answer is not None and answer.paths is None and str(answer.reason) == reason
        cli("turn", "begin", "--session", sid)
        assert exec_changes(cli, sid, "printf x >> README.md") == [("README.md", "modified")]
    finally:
        locked.chmod(0o755)


def test_a_watcher_that_does_not_answer_is_said_so_and_scans_visit_everything(  # type: ignore[no-untyped-def]
    cli, project: Path, root: str, sid: str, reaper: Reaper
) -> None:
    pid = start_watcher(cli, reaper, root)
    cli("turn", "begin", "--session", sid)
    assert exec_changes(cli, sid, "true") == []
    with stopped(pid):
        status = cli("watch", "status")
        assert (status.rc, status.lines) == (
            0,
            [f"watching {root} (pid {pid}, 0 folders)", "but every scan visits everything: it does not answer"],
        )
        (project / "docs" / "guide.md").write_bytes(b"the user's, while the watcher hangs\n")
        assert exec_changes(cli, sid, "printf x >> README.md") == [("README.md", "modified")]
    assert status_folders(cli) == 4  # it answers again, and the edit made meanwhile is no command's
    assert exec_changes(cli, sid, "printf y >> README.md; printf n > docs/n.txt") == [
        ("README.md", "modified"),
        ("docs/n.txt", "new"),
    ]


def test_a_store_inside_the_project_is_neither_watched_nor_reported(project: Path, root: str, reaper: Reaper) -> None:
    inner = project / ".turnback-store"
    reaper.homes.append(inner)

    def tb(*args: str, env: dict[str, str] | None = None) -> Result:
        return run_cli(inner, *args, cwd=project, env=env)

    assert tb("init").rc == 0
    session = tb("session", "new").out.strip()
    pid = start_watcher(tb, reaper, root)
    assert (inner / "watch").is_dir()
    folders = folders_below(project, skip=(".turnback-store",))
    assert folders == 4
    assert status_folders(tb) == folders
    tb("turn", "begin", "--session", session)
    token = ask(str(inner), project_id(inner, root), None)
    assert token is not None
    assert exec_changes(tb, session, "printf x >> README.md; mkdir -p new/deep") == [
        ("README.md", "modified"),
        ("new", "new"),
        ("new/deep", "new"),
    ]
    answer = ask(str(inner), project_id(inner, root), token.token)
    assert answer is not None and answer.paths is not None
    assert {"README.md", "new"} <= set(answer.paths) <= {"README.md", "new", "new/deep"}  # not the store's writes
    assert status_folders(tb) == folders + 2
    tb("turn", "end", "--session", session)
    stop_watcher(tb, root, pid)


def test_two_projects_have_a_watcher_each(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, tmp_path: Path, root: str, sid: str, reaper: Reaper
) -> None:
    other = make_project(tmp_path / "other")
    other_root = os.path.realpath(other)

    def tb(*args: str, env: dict[str, str] | None = None) -> Result:
        return run_cli(home, *args, cwd=other, env=env)

    assert tb("init").rc == 0
    other_sid = tb("session", "new").out.strip()
    mine = start_watcher(cli, reaper, root)
    theirs = start_watcher(tb, reaper, other_root)
    assert mine != theirs
    assert cli("watch", "status").out == f"watching {root} (pid {mine}, 4 folders)\n"
    assert tb("watch", "status").out == f"watching {other_root} (pid {theirs}, 4 folders)\n"
    tb("turn", "begin", "--session", other_sid)
    assert exec_changes(tb, other_sid, f"printf x >> README.md; printf y >> {project}/README.md") == [
        ("README.md", "modified"),
        (f"{root}/README.md", "modified"),  # the other project's file, named on the command line: outside
    ]
    stop_watcher(cli, root, mine)
    assert process_alive(theirs, None)
    assert tb("watch", "status").out == f"watching {other_root} (pid {theirs}, 4 folders)\n"
    stop_watcher(tb, other_root, theirs)


def test_caches_saved_as_deltas_read_back_from_a_fresh_process_and_keep_their_base(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, root: str, sid: str, reaper: Reaper
) -> None:
    """With the watcher, each command saves the stat cache as the entries that changed since the last full
    one. Read back by another process (no decoded copy in memory), it is the tree a full scan sees; the full
    cache it is built on outlives every later save, and undo still restores every byte."""
    start_watcher(cli, reaper, root)
    before = project_state(project)
    cli("turn", "begin", "--session", sid)
    exec_changes(cli, sid, "true")  # the watcher's first scan visits everything: a full cache
    for number in range(6):
        assert exec_changes(
            cli, sid, f"printf 'round {number}\\n' >> README.md; mkdir -p new{number}; echo x > new{number}/f"
        ) == ([("README.md", "modified"), (f"new{number}", "new"), (f"new{number}/f", "new")])
    cli("turn", "end", "--session", sid)
    with open_engine(home) as engine:
        pid = project_id(home, root)
        rows = engine.store.db.all(
            "SELECT id, base_id FROM snapshots WHERE project_id=? AND purpose='cache' ORDER BY created_at", (pid,)
        )
        base_id = rows[-1][1]
        assert base_id is not None, rows  # a delta
        assert base_id in {row[0] for row in rows}, "the full cache a delta is built on was dropped"
    cache_matches_a_full_scan(home, root)
    assert cli("verify").rc == 0
    assert cli("undo", "--yes", "--session", sid).rc == 0
    assert project_state(project) == before

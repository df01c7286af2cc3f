"""The watcher a long-lived process starts by itself: Claude Code's Bash calls on a big project, no user step.

Every test plays Claude Code's part with real hook processes through the
real hook relay, which starts the project's watcher (a real detached
``_watch-tree`` process, real inotify) the first time a Bash call's scan
finds a project of ``watch.auto_paths`` paths or more with none running. The
threshold is lowered by config (the test project holds a dozen paths). What a
user relies on: each Bash call records exactly what its command changed,
whether the watcher ran, had not started yet, ended idle or lost events.

Every watcher a test starts is ended by the autouse ``reaper`` fixture (by
the pid files in the store), and the relay by ``stop_relay``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.capture.test_watch import (
    STATUS,
    Reaper,
    _max_queued_events,
    cache_matches_a_full_scan,
    flood,
    project_id,
    project_state,
    stopped,
    wait_for,
)
from tests.conftest import Result, run_cli, unprivileged_prefix
from tests.integrations.test_claude_code import Claude, cli
from tests.integrations.test_hook_relay import stop_relay, wait_for_relay
from turnback.procs import process_alive

Changes = list[tuple[str, str]]


@pytest.fixture(autouse=True)
def reaper(home: Path) -> Iterator[Reaper]:
    """After each test: end every watcher and the relay it started, whatever state it left them in."""
    watchers = Reaper(home)
    yield watchers
    stop_relay(home)
    watchers.end_all()


def lower_threshold(home: Path, project: Path, *settings: tuple[str, str]) -> None:
    for key, value in (("watch.auto_paths", "5"), *settings):
        assert cli(home, project, "config", "set", key, value).rc == 0


def watch_status(home: Path, project: Path) -> Result:
    return cli(home, project, "watch", "status")


def watcher_pid(home: Path, project: Path) -> int | None:
    """The pid ``turnback watch status`` names for the project, None when it says none runs."""
    status = watch_status(home, project)
    match = STATUS.fullmatch(status.lines[0]) if status.rc == 0 and status.lines else None
    return int(match["pid"]) if match else None


def wait_for_watcher(home: Path, reaper: Reaper) -> int:
    """The pid of the project's watcher once its pid file names it (read, not asked: an ask is a scan's, which
    would put off its idle end)."""
    wait_for(lambda: bool(reaper.recorded()), "the automatic watcher", timeout=60)
    ((pid, start),) = reaper.recorded()
    assert process_alive(pid, start)
    return pid


def all_calls(home: Path, project: Path) -> dict[str, Any]:
    """Every call of every session, by id."""
    listed = cli(home, project, "sessions", "--json")
    assert listed.rc == 0, listed
    calls = {}
    for session in listed.json()["sessions"]:
        shown = cli(home, project, "log", "--json", "--session", session["id"])
        assert shown.rc == 0, shown
        calls.update({call["id"]: call for turn in shown.json()["turns"] for call in turn["calls"]})
    return calls


def bash_changes(home: Path, project: Path, claude: Claude, command: str) -> Changes:
    """Run *command* as a Bash call (Pre, the command, Post); the (path, kind) of each change recorded for it,
    in path order."""
    earlier = all_calls(home, project)
    claude.bash(command)
    (new,) = [call for call_id, call in all_calls(home, project).items() if call_id not in earlier]
    assert new["tool"] == "exec", new  # a command a harness ran is recorded as exec
    return sorted((change["path"], change["kind"]) for change in new["changes"])


RELAY_STAYS = {"TURNBACK_HOOK_RELAY_IDLE_S": "120"}  # a loaded machine's hooks may be seconds apart: the relay
# that starts the watcher must serve the Bash call's before-event (``stop_relay`` ends it after each test)


def started_session(home: Path, project: Path, **kwargs: Any) -> Claude:
    kwargs.setdefault("env", RELAY_STAYS)
    claude = Claude(home, project, **kwargs)
    claude.prompt("run some commands")
    wait_for_relay(home)
    return claude


def test_the_relay_starts_the_watcher_of_a_big_project_and_bash_calls_record_exactly_what_changed(
    home: Path, project: Path, reaper: Reaper
) -> None:
    lower_threshold(home, project)
    before = project_state(project)
    claude = started_session(home, project)
    assert watcher_pid(home, project) is None
    assert bash_changes(home, project, claude, "printf one > first.txt") == [("first.txt", "new")]
    pid = wait_for_watcher(home, reaper)  # the first Bash call's scan found a big project: it started one
    assert bash_changes(home, project, claude, "true") == []  # the first scan after it starts visits everything
    changes = bash_changes(home, project, claude, "printf x >> README.md; printf n > src/n.txt; rm docs/guide.md")
    assert changes == [("README.md", "modified"), ("docs/guide.md", "deleted"), ("src/n.txt", "new")]
    token = cache_matches_a_full_scan(home, str(project.resolve()))
    assert token is not None and token.startswith(f"{pid}-")  # the watcher answered that scan
    claude.stop()
    assert cli(home, project, "undo", "--yes").rc == 0
    assert project_state(project) == before
    assert watcher_pid(home, project) == pid  # it serves on while commands come


def test_a_small_project_or_a_hook_without_the_relay_starts_no_watcher(home: Path, project: Path) -> None:
    claude = started_session(home, project)  # the default threshold: 20,000 paths
    assert bash_changes(home, project, claude, "printf one > first.txt") == [("first.txt", "new")]
    stop_relay(home)
    lower_threshold(home, project)
    alone = Claude(home, project, env={"TURNBACK_HOOK_RELAY": "0"})  # each hook its own short-lived process
    alone.prompt("no relay")
    assert bash_changes(home, project, alone, "printf two > second.txt") == [("second.txt", "new")]
    assert watch_status(home, project).rc == 1


def test_the_watcher_ends_when_idle_and_changes_made_meanwhile_are_found_by_full_scans(
    home: Path, project: Path, reaper: Reaper
) -> None:
    lower_threshold(home, project, ("watch.idle_s", "2"))
    before = project_state(project)
    claude = started_session(home, project)
    assert bash_changes(home, project, claude, "true") == []
    pid = wait_for_watcher(home, reaper)
    wait_for(lambda: not process_alive(pid, None), "the watcher to end after 2 s without a scan")
    assert watch_status(home, project).rc == 1
    (project / "docs" / "guide.md").write_bytes(b"the user's edit while no watcher ran\n")
    user_state = project_state(project)
    changes = bash_changes(home, project, claude, "printf agent >> README.md")
    assert changes == [("README.md", "modified")]  # the user's edit is the baseline: a full scan found it
    claude.stop()
    assert cli(home, project, "undo", "--yes").rc == 0
    assert project_state(project) == user_state != before


def test_two_sessions_of_one_project_share_one_watcher(home: Path, project: Path, reaper: Reaper) -> None:
    lower_threshold(home, project)
    first = started_session(home, project)
    second = Claude(home, project, session_id="another-session", env=RELAY_STAYS)
    second.prompt("another session on the same project")
    assert bash_changes(home, project, first, "printf a > a.txt") == [("a.txt", "new")]
    pid = wait_for_watcher(home, reaper)
    assert bash_changes(home, project, second, "printf b > b.txt") == [("b.txt", "new")]
    assert bash_changes(home, project, first, "printf c > c.txt") == [("c.txt", "new")]
    assert bash_changes(home, project, second, "printf d > d.txt; rm a.txt") == [("a.txt", "deleted"), ("d.txt", "new")]
    token = cache_matches_a_full_scan(home, str(project.resolve()))
    assert token is not None and token.startswith(f"{pid}-")
    assert watcher_pid(home, project) == pid
    pid_files = list((home / "watch").glob("*.pid"))
    assert len(pid_files) == 1, pid_files


def test_an_inotify_overflow_falls_back_to_a_full_scan(home: Path, project: Path, reaper: Reaper) -> None:
    queue = _max_queued_events()
    if queue > 1_000_000:
        pytest.skip(f"fs.inotify.max_queued_events is {queue}: too many events to overflow it in a test")
    lower_threshold(home, project)
    busy = [project / "busy-a.txt", project / "busy-b.txt"]
    for path in busy:
        path.write_bytes(b"")
    claude = started_session(home, project)
    assert bash_changes(home, project, claude, "true") == []
    pid = wait_for_watcher(home, reaper)
    assert bash_changes(home, project, claude, "true") == []
    with stopped(pid):
        flood(busy, queue + 4000)
        (project / "docs" / "guide.md").write_bytes(b"lost in the overflow\n")
    user_state = project_state(project)
    changes = bash_changes(home, project, claude, "printf agent >> README.md; printf n > src/n.txt")
    assert changes == [("README.md", "modified"), ("src/n.txt", "new")]  # the lost edit is the baseline
    claude.stop()
    assert cli(home, project, "undo", "--yes").rc == 0
    assert {p: s for p, s in project_state(project).items() if p not in ("README.md", "src/n.txt")} == {
        p: s for p, s in user_state.items() if p not in ("README.md", "src/n.txt")
    }
    assert project_state(project) == user_state
    assert watcher_pid(home, project) == pid  # it went on watching after the overflow


def test_a_harness_running_turnback_exec_gets_the_watcher_too(home: Path, project: Path, reaper: Reaper) -> None:
    lower_threshold(home, project)
    session = cli(home, project, "session", "new", "--title", "harness").out.strip()

    def exec_changes(script: str) -> Changes:
        ran = cli(home, project, "exec", "--json", "--session", session, "--", "sh", "-c", script)
        assert ran.rc == 0, ran
        return sorted((change["path"], change["kind"]) for change in ran.json()["call"]["changes"])

    assert cli(home, project, "turn", "begin", "--session", session, "--pid", str(os.getpid())).rc == 0
    assert exec_changes("printf a > a.txt") == [("a.txt", "new")]
    pid = wait_for_watcher(home, reaper)  # started by that exec process, and outliving it
    assert exec_changes("true") == []
    assert exec_changes("printf b >> a.txt; rm README.md") == [("README.md", "deleted"), ("a.txt", "modified")]
    token = cache_matches_a_full_scan(home, str(project.resolve()))
    assert token is not None and token.startswith(f"{pid}-")
    assert cli(home, project, "turn", "end", "--session", session).rc == 0


def test_the_mcp_server_starts_the_watcher_for_its_commands(home: Path, project: Path, reaper: Reaper) -> None:
    pytest.importorskip("mcp")
    from tests.integrations.test_mcp import ok, serve

    lower_threshold(home, project)

    async def body(session: Any) -> list[str]:
        lines = [await ok(session, "run_command", command="printf a > a.txt")]
        wait_for_watcher(home, reaper)
        lines.append(await ok(session, "run_command", command="true"))
        lines.append(await ok(session, "run_command", command="printf b >> a.txt"))
        return [text.splitlines()[-1] for text in lines]

    assert serve(home, project, project.parent / "mcp.log", body) == [
        "new a.txt",
        "(exit status 0)",
        "changed a.txt +1 -1",
    ]
    ((pid, _),) = reaper.recorded()
    token = cache_matches_a_full_scan(home, str(project.resolve()))
    assert token is not None and token.startswith(f"{pid}-")


def test_a_watcher_that_cannot_watch_every_folder_ends_and_is_not_started_again_soon(
    home: Path, project: Path, reaper: Reaper
) -> None:
    prefix = unprivileged_prefix()
    if prefix is None:
        pytest.skip("running as root without setpriv: root watches a mode-000 folder")
    lower_threshold(home, project)
    session = cli(home, project, "session", "new", "--title", "harness").out.strip()
    locked = project / "locked"
    locked.mkdir()
    locked.chmod(0)
    log = home / "watch" / f"{project_id(home, str(project.resolve()))}.log"
    said = (
        "turnback: the watcher started automatically ends: cannot watch locked: Permission denied; every scan "
        "visits everything, and no watcher starts by itself for this project for 10 minutes"
    )

    def exec_changes(script: str) -> Changes:
        ran = run_cli(
            home, "exec", "--json", "--session", session, "--", "sh", "-c", script, cwd=project, prefix=prefix
        )
        assert ran.rc == 0, ran
        return sorted((change["path"], change["kind"]) for change in ran.json()["call"]["changes"])

    try:
        assert cli(home, project, "turn", "begin", "--session", session, "--pid", str(os.getpid())).rc == 0
        assert exec_changes("printf a > a.txt") == [("a.txt", "new")]
        wait_for(lambda: log.exists() and log.read_text().splitlines() == [said], "the watcher's last word")
        assert exec_changes("printf b >> a.txt") == [("a.txt", "modified")]  # a full scan, and no new watcher
        time.sleep(1)
        assert log.read_text().splitlines() == [said]
        assert reaper.recorded() == []
        assert watch_status(home, project).rc == 1
    finally:
        locked.chmod(0o755)


def test_bash_pairs_on_a_watched_tree_record_exactly_what_changed_and_undo_gives_the_bytes_back(
    home: Path, project: Path, reaper: Reaper
) -> None:
    """Each Bash call's scans, vouched for by the watcher, visit only what changed: what each records is
    exactly its command's (files made, edited, deleted; folders made, renamed, removed, replaced by a file),
    the stat cache they keep matches a full scan, and undoing the turns gives every byte back."""
    lower_threshold(home, project)
    (project / "lib" / "deep" / "er").mkdir(parents=True)
    (project / "lib" / "deep" / "er" / "leaf.txt").write_bytes(b"leaf\n")
    (project / "lib" / "deep" / "top.txt").write_bytes(b"top\n")
    (project / "old").mkdir()
    (project / "old" / "gone.txt").write_bytes(b"to be removed with its folder\n")
    before = project_state(project)
    claude = started_session(home, project)
    assert bash_changes(home, project, claude, "true") == []
    pid = wait_for_watcher(home, reaper)
    assert bash_changes(home, project, claude, "true") == []  # the first scan after it starts visits everything
    turns = [
        (
            "printf x >> README.md; printf n > src/n.txt; rm docs/guide.md",
            [("README.md", "modified"), ("docs/guide.md", "deleted"), ("src/n.txt", "new")],
        ),
        (
            "mv lib moved",
            [
                ("lib", "deleted"),
                ("lib/deep", "deleted"),
                ("lib/deep/er", "deleted"),
                ("lib/deep/er/leaf.txt", "deleted"),
                ("lib/deep/top.txt", "deleted"),
                ("moved", "new"),
                ("moved/deep", "new"),
                ("moved/deep/er", "new"),
                ("moved/deep/er/leaf.txt", "new"),
                ("moved/deep/top.txt", "new"),
            ],
        ),
        (
            "mkdir -p made/a && printf 1 > made/a/one.txt && printf y >> moved/deep/top.txt",
            [("made", "new"), ("made/a", "new"), ("made/a/one.txt", "new"), ("moved/deep/top.txt", "modified")],
        ),
        ("rm -r old && printf file > old", [("old", "modified"), ("old/gone.txt", "deleted")]),
        ("printf z >> src/n.txt", [("src/n.txt", "modified")]),
    ]
    states = []
    for command, expected in turns:
        states.append(project_state(project))
        assert bash_changes(home, project, claude, command) == expected, command
        claude.stop()
        claude.prompt("next")
    token = cache_matches_a_full_scan(home, str(project.resolve()))
    assert token is not None and token.startswith(f"{pid}-")  # the watcher answered every scan since
    claude.stop()
    for state in reversed(states):
        assert cli(home, project, "undo", "--yes").rc == 0
        assert project_state(project) == state
    assert project_state(project) == before

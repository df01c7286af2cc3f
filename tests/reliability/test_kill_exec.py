"""kill -9 of ``turnback exec`` after every store commit; the next use of the session records the command.

``turnback exec -- sh -c SCRIPT`` runs a command that modifies 30 files of a
50-file project, creates 10 (some in new folders) and deletes 10
(``scenarios.build_exec``). With ``TURNBACK_FAULT_KILL_AFTER_COMMIT=N`` the
turnback process SIGKILLs itself right after its N-th committed store
transaction, for every N until one runs to the end. The command itself is not
killed with it (it is turnback's child, not turnback), so it either never
started or ran to its end. Then:

- the tree is exactly the one before the command or the one after it;
- ``turnback verify`` exits 0;
- the next use of the session (``turnback status``) records a command that
  ran, from the snapshot taken before it: ``turnback log`` shows the same
  changes as an uninterrupted exec, and ``turnback undo --yes`` gives back the
  pre-command tree byte for byte;
- a command that never started leaves nothing to undo, and the tree as it was.

exec makes no durable file-system step of its own (it writes no project file),
so ``TURNBACK_FAULT_KILL_AFTER`` never fires during it: checked too.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import tree_state
from tests.reliability.crashloop import Pristine
from tests.reliability.helpers import TreeState, bytes_lost, record, run, run_killed
from tests.reliability.scenarios import Case, build_exec

MAX_COMMITS = 60
RECORDED_LATER = "turnback stopped before it recorded the end; recorded when it was next used"


def _exec_call(log: dict[str, Any]) -> dict[str, Any] | None:
    calls = [call for turn in log["turns"] for call in turn["calls"] if call["tool"] == "exec"]
    assert len(calls) <= 1, calls
    return calls[0] if calls else None


def _changes(call: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((item["path"], item["kind"]) for item in call["changes"])


@pytest.fixture(scope="module")
def exec_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[TreeState, TreeState, list[tuple[str, str]]]:
    """An uninterrupted exec: the tree before and after, and the changes ``turnback log`` shows."""
    case = build_exec(tmp_path_factory.mktemp("exec-reference"))
    result = run(case.home, *case.args, cwd=case.project, env=case.extra)
    assert result.rc == 0, result.err
    post = tree_state(case.project)
    assert run(case.home, "turn", "end", "--session", case.session_id, cwd=case.project).rc == 0
    log = run(case.home, "log", "--session", case.session_id, "--json", cwd=case.project)
    call = _exec_call(log.json())
    assert call is not None and call["status"] == "done"
    changes = _changes(call)
    assert len([c for c in changes if c[1] == "modified"]) == 30
    assert len([c for c in changes if c[1] == "deleted"]) == 10
    assert {"newdir/deep/n9.txt", "newdir/deep", "newdir"} <= {path for path, _ in changes}
    undone = run(case.home, "undo", "--session", case.session_id, "--yes", cwd=case.project)
    assert undone.rc == 0, undone.err
    assert tree_state(case.project) == case.start
    return case.start, post, changes


def _crash_exec(case: Case, kill_after: int, reference: tuple[TreeState, TreeState, list[tuple[str, str]]]) -> str:
    """One crash point; returns what happened: ``ran`` (recorded later), ``not-started``, or ``completed``."""
    pre, post, changes = reference
    assert tree_state(case.project) == pre
    env = {**case.extra, "TURNBACK_FAULT_KILL_AFTER_COMMIT": str(kill_after)}
    killed, _pid = run_killed(case.home, *case.args, cwd=case.project, env=env)
    assert "Traceback" not in killed.err
    if killed.rc == 0:
        assert tree_state(case.project) == post
        return "completed"
    assert killed.rc == -signal.SIGKILL, (kill_after, killed.rc, killed.err)
    # The command is exec's child: it shares exec's stdout, so run_killed returned only after it ended.
    now = tree_state(case.project)
    assert now in (pre, post), "the tree is neither the one before the command nor the one after it"
    ran = now == post

    verified = run(case.home, "verify", cwd=case.project)
    assert verified.rc == 0, (kill_after, verified.out, verified.err)
    status = run(case.home, "status", "--session", case.session_id, cwd=case.project)  # the next use records it
    assert status.rc == 0, status.err
    assert run(case.home, "turn", "end", "--session", case.session_id, cwd=case.project).rc == 0
    log = run(case.home, "log", "--session", case.session_id, "--json", cwd=case.project)
    assert log.rc == 0, log.err
    call = _exec_call(log.json())
    undone = run(case.home, "undo", "--session", case.session_id, "--yes", "--json", cwd=case.project)
    assert "Traceback" not in undone.err
    if ran:
        assert call is not None, "a command that ran is not in the log"
        assert _changes(call) == changes, (kill_after, call)
        assert call["status"] in ("done", "failed") and not call["cut_short"], call
        assert undone.rc == 0, (kill_after, undone.out, undone.err)
        assert all(row["status"] == "done" for row in undone.json()["rows"]), undone.out
    else:
        assert call is None or call["changes"] == [], call
        assert undone.rc == 1 and "nothing to undo" in undone.err, (undone.out, undone.err)
    assert tree_state(case.project) == pre, f"kill after commit {kill_after}: undo did not give back the tree"
    assert bytes_lost(pre, tree_state(case.project)) == 0
    return "ran" if ran else "not-started"


@pytest.mark.slow
def test_kill_exec_after_every_commit_then_the_next_use_records_it(
    fast_tmp: Path, exec_reference: tuple[TreeState, TreeState, list[tuple[str, str]]]
) -> None:
    pristine = Pristine("exec", fast_tmp)
    outcomes: dict[int, str] = {}
    for kill_after in range(1, MAX_COMMITS + 1):
        outcome = _crash_exec(pristine.restore(), kill_after, exec_reference)
        outcomes[kill_after] = outcome
        if outcome == "completed":
            break
    else:
        pytest.fail(f"exec still killed after {MAX_COMMITS} commits")
    commits = max(outcomes) - 1
    ran = [n for n, outcome in outcomes.items() if outcome == "ran"]
    assert commits >= 5 and ran, outcomes
    # Once the command has started, every later crash point finds it ran.
    assert ran == list(range(ran[0], commits + 1)), outcomes
    record(
        "crash-exec",
        total_commits=commits,
        crash_points=commits,
        recorded_at_next_use=len(ran),
        not_started=commits - len(ran),
        bytes_lost=0,
    )


def test_exec_makes_no_durable_file_step_of_its_own(fast_tmp: Path) -> None:
    case = build_exec(fast_tmp)
    result = run(case.home, *case.args, cwd=case.project, env={**case.extra, "TURNBACK_FAULT_KILL_AFTER": "1"})
    assert result.rc == 0, (result.rc, result.err)

"""What turnback hands an agent, and what it vouches for: nothing of the store's, and nothing it cannot see.

- Every command turnback starts for an agent (``exec``, a background job,
  MCP ``run_command`` in tests/integrations/test_mcp.py) gets none of
  turnback's own settings: not the store's key, its folder, the keyring, the
  session or the hook relay's settings.
- The store's folder is never recorded as a change of a command, whether it
  lives inside the project or outside it and is named on the command line.
- ``covers`` says "covered" only when every path the command can touch is in
  what the snapshots hold; a command it cannot see through is not covered,
  with the reason.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import TEST_KEY, run_cli
from tests.reliability.helpers import record

JOB_WAIT_S = 30.0
COVERED = "covered: turnback undo takes back what it changes"
AGENT_SETTINGS = {
    "TURNBACK_SESSION": "set-by-the-harness",
    "TURNBACK_HOOK_RELAY": "0",
    "TURNBACK_HOOK_RELAY_IDLE_S": "3",
    "TURNBACK_NO_KEYRING": "1",
}


def new_session(home: Path, project: Path) -> str:
    assert run_cli(home, "init", cwd=project).rc == 0
    created = run_cli(home, "session", "new", "--title", "boundary", cwd=project)
    assert created.rc == 0, created.err
    sid = created.out.strip()
    begun = run_cli(home, "turn", "begin", "--session", sid, cwd=project)
    assert begun.rc == 0, begun.err
    return sid


def assert_no_store_settings(environment: str, home: Path) -> None:
    """*environment* (``env``'s output) names no setting of turnback's and holds neither the key nor the store."""
    names = [line.split("=", 1)[0] for line in environment.splitlines() if "=" in line]
    assert "PATH" in names, environment  # it is the command's environment
    assert [name for name in names if name.startswith("TURNBACK_")] == [], environment
    assert TEST_KEY not in environment
    assert str(home) not in environment


# -- 1. the agent's commands get none of turnback's settings ----------------------------------


def test_exec_gives_the_command_no_key_store_or_relay_setting(home: Path, project: Path) -> None:
    sid = new_session(home, project)
    ran = run_cli(home, "exec", "--session", sid, "--", "env", cwd=project, env=AGENT_SETTINGS)
    assert ran.rc == 0, ran.err
    assert_no_store_settings(ran.out, home)
    record("agent-boundary", case="exec environment", leaked=0)


def test_a_background_job_gets_no_key_store_or_relay_setting(home: Path, project: Path, tmp_path: Path) -> None:
    """The job's runner needs the key to open the store; the job's own command must not get it from the runner."""
    sid = new_session(home, project)
    output = tmp_path / "job.out"
    started = run_cli(
        home, "exec", "--session", sid, "--background", "--output", str(output), "--", "env", cwd=project,
        env=AGENT_SETTINGS,
    )  # fmt: skip
    assert started.rc == 0, started.err
    deadline = time.monotonic() + JOB_WAIT_S
    while True:
        jobs = run_cli(home, "jobs", "--session", sid, "--json", cwd=project).json()["jobs"]
        if not any(job["status"] == "running" for job in jobs):  # type: ignore[union-attr]
            break
        assert time.monotonic() < deadline, jobs
        time.sleep(0.1)
    assert [job["status"] for job in jobs] == ["done"], jobs  # type: ignore[union-attr]
    assert_no_store_settings(output.read_text(), home)
    record("agent-boundary", case="job environment", leaked=0)


# -- 2. the store's folder is never a change ---------------------------------------------------


def _assert_store_not_recorded(home: Path, project: Path, sid: str, command: str, *, env: dict[str, str]) -> None:
    """*command* (which names the store, or a folder holding it) and an ordinary change: only the latter is recorded."""
    ran = run_cli(home, "exec", "--session", sid, "--", "sh", "-c", command, cwd=project, env=env)
    assert ran.rc == 0, ran.err
    assert ran.out == "changed README.md +1 -3\n", ran.out
    assert run_cli(home, "turn", "end", "--session", sid, cwd=project, env=env).rc == 0
    preview = run_cli(home, "undo", "--dry-run", "--force", "--session", sid, cwd=project, env=env)
    assert preview.rc == 0, preview.err
    assert "turnback.db" not in preview.out and str(home) not in preview.out, preview.out
    assert [line for line in preview.lines if not line.startswith("undo turn ")] == ["restore     README.md"]
    record("agent-boundary", case="store named by a command", store_changes_recorded=0)


@pytest.mark.parametrize("named", ["the store", "a folder holding it"])
@pytest.mark.parametrize("mode", ["auto", "manual"])
def test_a_store_outside_the_project_named_by_a_command_is_no_change(
    tmp_path: Path, project: Path, named: str, mode: str
) -> None:
    """An outside path is copied (auto) or stamped (manual) before the command: the store in it is left out."""
    home = tmp_path / "outside" / "store"
    env = {"HOME": str(tmp_path / "outside")}
    sid = new_session(home, project)
    (home / "config.toml").write_text(f'mode = "{mode}"\n')
    folder = home if named == "the store" else home.parent
    _assert_store_not_recorded(home, project, sid, f"ls -R {folder} >/dev/null; echo new > README.md", env=env)


def test_a_store_inside_the_project_named_by_a_command_is_no_change(project: Path) -> None:
    home = project / ".turnback"
    sid = new_session(home, project)
    _assert_store_not_recorded(home, project, sid, "ls -R .turnback >/dev/null; echo new > README.md", env={})

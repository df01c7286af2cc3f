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

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.capture.test_commands import rows_of
from tests.conftest import TEST_KEY, Result, cli_env, make_project, python_for_user, run_cli, second_user
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


PARENT_ENVIRON = 'tr "\\0" "\\n" < /proc/$PPID/environ; echo "read: $?"'


AGENT_USER = "tbagent"


@pytest.mark.parametrize("background", [False, True], ids=["exec", "job"])
def test_the_command_cannot_read_the_key_from_its_parent_s_environment(background: bool) -> None:
    """The command runs as the same user as ``turnback exec`` (or the job's runner), whose environment holds
    the key: reading ``/proc/$PPID/environ`` must fail. As a real unprivileged user: root reads anything."""
    prefix = second_user(AGENT_USER) if os.geteuid() == 0 else []
    python, extra_env = python_for_user(prefix)
    top = Path(tempfile.mkdtemp(prefix="tb-agent-"))  # a folder the user owns: pytest's are root's alone
    try:
        home, project, output = top / "store", make_project(top / "project"), top / "job.out"
        if prefix:
            owner = pwd.getpwnam(AGENT_USER)
            for folder, _dirs, files in os.walk(top):
                for name in [folder, *(os.path.join(folder, f) for f in files)]:
                    os.chown(name, owner.pw_uid, owner.pw_gid, follow_symlinks=False)

        # One shell runs every step: a turn belongs to the process that began it (here, that shell).
        extra = f"--background --output {output}" if background else ""
        script = (
            f'set -e; tb() {{ {python} -m turnback "$@"; }}; tb init >/dev/null; S=$(tb session new);'
            f" tb turn begin --session $S; tb exec --session $S {extra} -- sh -c '{PARENT_ENVIRON}'"
        )
        env = cli_env(home, extra_env)
        proc = subprocess.run([*prefix, "sh", "-c", script], cwd=project, env=env, capture_output=True, timeout=120)
        ran = Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
        assert ran.rc == 0, ran.err
        if background:
            deadline = time.monotonic() + JOB_WAIT_S
            while "read: " not in (output.read_text() if output.exists() else ""):
                assert time.monotonic() < deadline, "the job never ran"
                time.sleep(0.1)
        seen = output.read_text() if background else ran.out + ran.err
        assert "Permission denied" in seen and "read: 0" not in seen, seen  # the read was refused ...
        assert TEST_KEY not in seen and "TURNBACK_" not in seen, seen  # ... and nothing of turnback's came out
        record("agent-boundary", case=f"parent environment ({'job' if background else 'exec'})", leaked=0)
    finally:
        shutil.rmtree(top, ignore_errors=True)


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
    assert rows_of(preview) == ["restore     README.md"]
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


# -- 3. covers vouches only for what the snapshots hold ----------------------------------------


@pytest.fixture
def covers(home: Path, project: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    """``covers(*argv)``: the exit code and the lines of ``turnback covers -- ARGV`` in the project."""
    sid = new_session(home, project)
    (project / "a.txt").write_bytes(b"a\n")
    (project / "src" / "x.py").write_bytes(b"a = 1\n")
    (tmp_path / "elsewhere").mkdir()
    (project / "out").symlink_to(tmp_path / "elsewhere" / "target.txt")

    def run(*argv: str, env: dict[str, str] | None = None) -> tuple[int, list[str]]:
        result = run_cli(home, "covers", "--session", sid, "--", *argv, cwd=project, env=env)
        assert "Traceback" not in result.err, result.err
        return result.rc, result.lines

    return run


def not_covered(*reasons: str) -> tuple[int, list[str]]:
    return 1, ["not covered:", *[f"  {reason}" for reason in reasons]]


WHOLE = "/ is the whole file system, which no snapshot holds"
CANNOT_SEE = {
    ("rm", "-rf", "/"): [WHOLE],
    ("find", "/", "-delete"): [WHOLE],
    ("bash", "-c", "rm -rf /"): [WHOLE],
    ("sh", "-c", "cd / && rm -rf *"): ["cd in a script: turnback does not follow the folder it moves to"],
    ("dd", "if=/dev/zero", "of=/dev/sda"): ["/dev/sda is a device or a system file, which no snapshot holds"],
    ("sh", "-c", "rm -rf $HOME"): [
        "a shell expansion ($…, `…`) in the script: turnback cannot tell which files it names"
    ],
    ("bash", "-c", "eval rm a.txt"): ["eval runs code turnback cannot see into"],
    ("python", "-c", "import shutil; shutil.rmtree('/')"): ["python runs code turnback cannot see into"],
    ("sh", "-c", "ls | xargs rm"): ["xargs runs code turnback cannot see into"],
    ("find", ".", "-name", "*.py", "-exec", "rm", "{}", ";"): [
        "find -exec runs other commands, which turnback cannot see into"
    ],
    ("sed", "-i", "s/a/b/w /etc/passwd", "src/x.py"): [
        "sed: a script that writes files (w) or runs commands (e): turnback cannot tell which files it changes"
    ],
    ("make", "clean"): ["make: turnback cannot tell which files it changes"],
    ("./run.sh",): ["./run.sh is a program turnback cannot see into"],
}


@pytest.mark.parametrize("argv", list(CANNOT_SEE), ids=[" ".join(argv) for argv in CANNOT_SEE])
def test_covers_refuses_what_it_cannot_see_through(covers, argv: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    assert covers(*argv) == not_covered(*CANNOT_SEE[argv])
    record("agent-boundary", case="covers refuses", command=" ".join(argv), vouched=0)


def test_covers_refuses_the_store_the_home_folder_and_paths_it_does_not_copy(  # type: ignore[no-untyped-def]
    covers, home: Path, project: Path, tmp_path: Path
) -> None:
    store = str(home)
    assert covers("rm", "-rf", store) == not_covered(f"{store} is turnback's store, which no snapshot holds")
    assert covers("sh", "-c", f"rm -f {store}/turnback.db") == not_covered(
        f"{store}/turnback.db is turnback's store, which no snapshot holds"
    )
    holder = str(tmp_path)
    assert covers("rm", "-rf", holder) == not_covered(f"{holder} holds turnback's store, which no snapshot holds")
    user_home = tmp_path / "userhome"
    user_home.mkdir()
    assert covers("rm", "-rf", "~", env={"HOME": str(user_home)}) == not_covered(
        f"{user_home} is the home folder itself, which turnback does not copy whole"
    )
    target = tmp_path / "elsewhere" / "target.txt"  # the link's target: the command line names only the link
    assert covers("sh", "-c", "echo x > out") == not_covered(
        f"{target} is outside the project, and turnback would not copy it before the command"
    )
    elsewhere = tmp_path / "elsewhere"  # a pattern: the files it matches are not named, so not copied
    assert covers("sh", "-c", f"rm {elsewhere}/*.log") == not_covered(
        f"{elsewhere} is outside the project, and turnback would not copy it before the command"
    )


def test_a_store_inside_the_project_is_not_covered(project: Path) -> None:
    home = project / ".turnback"
    sid = new_session(home, project)
    for argv, reason in (
        (["rm", "-rf", ".turnback"], f"{home} is turnback's store, which no snapshot holds"),
        (["rm", "-rf", "."], f"{project} holds turnback's store, which no snapshot holds"),
        (["find", ".", "-delete"], f"{project} holds turnback's store, which no snapshot holds"),
    ):
        result = run_cli(home, "covers", "--session", sid, "--", *argv, cwd=project)
        assert (result.rc, result.lines) == not_covered(reason), argv


@pytest.mark.parametrize(
    "argv",
    [
        ("rm", "a.txt"),
        ("sed", "-i", "s/a/b/", "src/x.py"),
        ("rm", "-rf", "src"),
        ("sh", "-c", "rm -f a.txt 2>/dev/null && echo done > src/log.txt"),
        ("bash", "-c", "cat > src/new.py <<'EOF'\nprint($HOME)\nEOF\nmv a.txt b.txt"),
        ("find", ".", "-name", "*.pyc", "-delete"),
        ("env", "LC_ALL=C", "sed", "-i", "-e", "s/a/b/", "src/x.py"),
        ("dd", "if=/dev/zero", "of=a.txt", "bs=1", "count=4"),
    ],
    ids=lambda argv: " ".join(argv),
)
def test_ordinary_commands_in_the_project_stay_covered(covers, argv: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    assert covers(*argv) == (0, [COVERED])

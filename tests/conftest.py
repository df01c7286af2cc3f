"""Shared fixtures: a sealed-off store, real project folders, and the CLI as a subprocess.

No test may touch the user's real store: ``TURNBACK_HOME`` always points
into the test's temp folder, and the keyring is never tried.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import turnback

TEST_KEY = "test-key-0123456789-abcdef"
ROOT = Path(__file__).resolve().parent.parent


# TURNBACK_TEST_BACKEND=postgresql: each test's store folder names a database of its own on the test server
# (store.url in its config.toml), so the suites that use it run against the PostgreSQL store.
TEST_BACKEND = os.environ.get("TURNBACK_TEST_BACKEND", "sqlite")


@pytest.fixture(autouse=True)
def sealed_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Path:
    """Every test gets its own store folder and key, and nothing from the caller's environment."""
    home = tmp_path / "store"
    monkeypatch.setenv("TURNBACK_HOME", str(home))
    monkeypatch.setenv("TURNBACK_KEY", TEST_KEY)
    monkeypatch.setenv("TURNBACK_NO_KEYRING", "1")
    monkeypatch.delenv("TURNBACK_SESSION", raising=False)
    monkeypatch.delenv("TURNBACK_FAULT_KILL_AFTER", raising=False)
    monkeypatch.delenv("TURNBACK_STORE", raising=False)
    monkeypatch.delenv("TURNBACK_HOST_ID", raising=False)
    if TEST_BACKEND == "postgresql":
        server = request.getfixturevalue("pg_server")
        home.mkdir(mode=0o700)
        (home / "config.toml").write_text(f'[store]\nurl = "{server.url(server.schema_for(home))}"\n')
    return home


@pytest.fixture
def home(sealed_env: Path) -> Path:
    return sealed_env


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    """A throwaway PostgreSQL server for this test process (tests/pgserver.py), or a skip saying why not."""
    from tests.pgserver import running_server

    yield from running_server()


@pytest.fixture
def engine(home: Path) -> Iterator[turnback.Engine]:
    with turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False) as opened:
        yield opened


def make_project(root: Path) -> Path:
    """A real project: text, CRLF, binary, executable, a symlink, nested folders."""
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "README.md").write_bytes(b"# project\n\nline two\n")
    (root / "src" / "main.py").write_bytes(b"import pkg\n\nprint('hi')\n")
    (root / "src" / "pkg" / "__init__.py").write_bytes(b"")
    (root / "src" / "pkg" / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    (root / "docs" / "guide.md").write_bytes(b"no final newline")
    (root / "logo.bin").write_bytes(bytes(range(256)) * 4)
    run = root / "run.sh"
    run.write_bytes(b"#!/bin/sh\necho run\n")
    run.chmod(0o755)
    (root / "link-to-readme").symlink_to("README.md")
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


@pytest.fixture
def session(engine: turnback.Engine, project: Path) -> turnback.Session:
    return engine.new_session(str(project), title="test")


def tree_state(root: Path) -> dict[str, tuple[str, bytes | str | None, int]]:
    """Everything under *root*: each path's kind, content (or link target) and mode, without following links.

    A FIFO, socket or device is listed by its type and device number, never opened.
    """
    state: dict[str, tuple[str, bytes | str | None, int]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                state[rel] = ("symlink", os.readlink(path), 0)
            elif stat.S_ISDIR(st.st_mode):
                state[rel] = ("dir", None, stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                state[rel] = ("file", path.read_bytes(), stat.S_IMODE(st.st_mode))
            else:
                state[rel] = ("special", f"{stat.S_IFMT(st.st_mode):o}:{st.st_rdev}", stat.S_IMODE(st.st_mode))
    return state


@dataclass(frozen=True)
class Result:
    rc: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    def json(self) -> dict[str, object]:
        import json

        data = json.loads(self.out)
        assert isinstance(data, dict)
        return data


def cli_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home.parent),
        "LANG": "C.UTF-8",
        "TURNBACK_HOME": str(home),
        "TURNBACK_KEY": TEST_KEY,
        "TURNBACK_NO_KEYRING": "1",
        "PYTHONPATH": str(ROOT / "src"),
        "TURNBACK_HOOK_RELAY_IDLE_S": "3",  # a hook relay a test started goes soon after it
    }
    env.update(extra or {})
    return env


def unprivileged_prefix() -> list[str] | None:
    """A command prefix that runs a program without root's power to ignore file permissions.

    Tests of "permission denied" need it when they run as root (root reads a
    mode-000 file); ``None`` when running as root without ``setpriv``.
    """
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner"]


def second_user(name: str) -> list[str]:
    """A command prefix that runs a program as *name*, another local user, made with ``useradd`` if missing.

    Skips (saying why) only where no user can be made or switched to: not root, or no ``useradd``/``runuser``.
    """
    useradd, runuser = shutil.which("useradd"), shutil.which("runuser")
    if os.geteuid() != 0 or useradd is None or runuser is None:
        pytest.skip(
            f"a second local user needs root, useradd and runuser (euid {os.geteuid()}, {useradd=}, {runuser=})"
        )
    if subprocess.run(["id", "-u", name], capture_output=True).returncode != 0:
        made = subprocess.run([useradd, "--no-create-home", "--shell", "/bin/sh", name], capture_output=True)
        if made.returncode not in (0, 9):  # 9: made meanwhile by a parallel test
            pytest.skip(f"useradd {name} failed: {made.stderr.decode(errors='replace').strip()}")
    return [runuser, "-u", name, "--"]


def python_for_user(prefix: list[str]) -> tuple[str, dict[str, str]]:
    """An interpreter the user that *prefix* runs as can start turnback with, and what to add to its
    environment: this one, or (when this one lives where the user cannot reach, e.g. under /root) the
    system's Python of the same version, given this environment's packages. Skips, saying why, if neither."""
    import site
    import sysconfig

    if subprocess.run([*prefix, sys.executable, "-c", "pass"], capture_output=True).returncode == 0:
        return sys.executable, {}
    system = shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}", path="/usr/bin:/bin")
    packages = os.pathsep.join([str(ROOT / "src"), sysconfig.get_paths()["purelib"], *site.getsitepackages()])
    if system is not None:
        probe = [*prefix, "env", f"PYTHONPATH={packages}", system, "-c", "import turnback.engine"]
        if subprocess.run(probe, capture_output=True).returncode == 0:
            return system, {"PYTHONPATH": packages}
    pytest.skip(f"no Python this user can run turnback with ({sys.executable} is out of its reach, {system=})")


def run_cli(
    home: Path,
    *args: str,
    cwd: Path | None = None,
    stdin: bytes = b"",
    env: dict[str, str] | None = None,
    prefix: list[str] | None = None,
    timeout: float = 120.0,
    python: str | None = None,
) -> Result:
    """Run ``python -m turnback ARGS`` as a subprocess with a cleared environment (and a deadline)."""
    proc = subprocess.run(
        [*(prefix or []), python or sys.executable, "-m", "turnback", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        env=cli_env(home, env),
        timeout=timeout,
    )
    return Result(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


@pytest.fixture
def cli(home: Path, project: Path):  # type: ignore[no-untyped-def]
    """``cli(*args, stdin=b"")`` runs the CLI in the project folder against the test store."""

    def run(
        *args: str,
        stdin: bytes = b"",
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        prefix: list[str] | None = None,
    ) -> Result:
        return run_cli(home, *args, cwd=cwd or project, stdin=stdin, env=env, prefix=prefix)

    return run

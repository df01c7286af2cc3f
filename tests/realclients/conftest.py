"""Driving the real Claude Code CLI offline: installed from npm once, pointed at :mod:`fakeapi` on 127.0.0.1.

The fixtures here install ``@anthropic-ai/claude-code`` (pinned) into a
cache folder outside the repository, put turnback's hooks into a temp
project with the real ``turnback install``, add a logging hook beside them,
and run ``claude -p`` with stream-json output (and, for the SDK's control
channel, stream-json input). See README.md in this folder.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import npmcache
from tests.conftest import cli_env, run_cli
from tests.realclients.fakeapi import FakeAPI

CLAUDE_CODE_VERSION = "2.1.332"
PACKAGE = "@anthropic-ai/claude-code"
HERE = Path(__file__).resolve().parent
LOG_HOOK = HERE / "loghook.py"
# Every hook event Claude Code 2.1 names that a tool call or a turn can send; the logging hook takes them all.
LOGGED_EVENTS = (
    "SessionStart",
    "SessionEnd",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PermissionDenied",
    "PostToolUse",
    "PostToolUseFailure",
    "PostToolBatch",
    "Notification",
    "Stop",
    "StopFailure",
    "PreCompact",
    "SubagentStart",
    "SubagentStop",
    "TaskCreated",
    "TaskCompleted",
)
# What keeps Claude Code offline and quiet: no telemetry, no update checks, no error reports, no retries of a
# failed request (the API error case wants the error at once), and root allowed to skip permissions.
OFFLINE_ENV = {
    "ANTHROPIC_API_KEY": "dummy",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    "CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL": "1",
    "CLAUDE_CODE_MAX_RETRIES": "0",
    "IS_SANDBOX": "1",
}


def cache_dir() -> Path:
    return npmcache.cache_dir(f"claude-code-{CLAUDE_CODE_VERSION}")


def _version_of(binary: Path) -> str | None:
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            capture_output=True,
            timeout=60,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(binary.parent), "IS_SANDBOX": "1"},
        )
    except OSError:
        return None
    return done.stdout.decode("utf-8", "replace").strip() if done.returncode == 0 else None


def _runnable(folder: Path) -> Path | None:
    """The installed ``claude`` of the pinned version: the wrapper's bin (the postinstall copied the native
    binary over it), else the platform package's binary itself (an npm that ran no postinstall)."""
    modules = folder / "node_modules" / "@anthropic-ai"
    for binary in (modules / "claude-code" / "bin" / "claude.exe", *sorted(modules.glob("claude-code-*/claude"))):
        if (_version_of(binary) or "").startswith(CLAUDE_CODE_VERSION):
            return binary
    return None


def install_claude_code() -> Path:
    """The ``claude`` binary of the pinned version, installed with npm on first use; skips if npm can't be had."""
    # npm fetches the platform's native binary (an optional dependency, from the same registry); the
    # postinstall copies it over bin/claude.exe, and as root it wants IS_SANDBOX=1.
    return npmcache.npm_install(PACKAGE, CLAUDE_CODE_VERSION, cache_dir(), _runnable, env={"IS_SANDBOX": "1"})


@pytest.fixture(scope="session")
def claude_binary() -> Path:
    return install_claude_code()


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI() as server:
        yield server


# -- one Claude Code in one project ------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """A finished ``claude -p``: exit code, stdout's stream-json messages, stderr."""

    rc: int
    messages: list[dict[str, Any]]
    err: str

    def result(self) -> dict[str, Any]:
        found = [m for m in self.messages if m.get("type") == "result"]
        assert found, self
        return found[-1]


def parse_lines(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for line in raw.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


class Stream:
    """``claude -p --input-format stream-json``: the SDK's stdio channel (user messages, control requests)."""

    def __init__(self, proc: subprocess.Popen[bytes]):
        self.proc = proc
        self.messages: list[dict[str, Any]] = []
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._seen = 0
        self._ids = iter(range(1, 10_000))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._err: list[bytes] = []
        threading.Thread(
            target=lambda: self._err.append(proc.stderr.read() if proc.stderr else b""), daemon=True
        ).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if line.startswith("{"):
                self._queue.put(json.loads(line))
        self._queue.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def user(self, text: str) -> None:
        self.send(
            {"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": None, "session_id": ""}
        )

    def control(self, subtype: str, **fields: Any) -> str:
        request_id = f"req_{next(self._ids)}"
        self.send({"type": "control_request", "request_id": request_id, "request": {"subtype": subtype, **fields}})
        return request_id

    def answer(self, request_id: str, response: dict[str, Any]) -> None:
        self.send(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": request_id, "response": response},
            }
        )

    def wait_for(self, matches: Callable[[dict[str, Any]], bool], timeout: float = 60.0) -> dict[str, Any]:
        """The next message (from where the last wait stopped) that *matches*."""
        deadline = time.monotonic() + timeout
        while True:
            while self._seen < len(self.messages):
                message = self.messages[self._seen]
                self._seen += 1
                if matches(message):
                    return message
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no such message within {timeout}s; had: {self.messages[-5:]}; {self.stderr()}")
            try:
                got = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            if got is None:
                raise AssertionError(f"Claude Code ended first (rc {self.proc.poll()}): {self.stderr()}")
            self.messages.append(got)

    def result(self, timeout: float = 60.0) -> dict[str, Any]:
        return self.wait_for(lambda m: m.get("type") == "result", timeout)

    def can_use_tool(self, timeout: float = 60.0) -> dict[str, Any]:
        return self.wait_for(
            lambda m: m.get("type") == "control_request" and m["request"].get("subtype") == "can_use_tool", timeout
        )

    def stderr(self) -> str:
        return b"".join(self._err).decode("utf-8", "replace")[-2000:]

    def close(self, timeout: float = 60.0) -> int:
        """End the input (as the SDK does when the user is done) and wait for Claude Code to exit."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def kill_commands_of(marker: str) -> list[int]:
    """SIGKILL every process whose command line holds *marker*, with its process group: Claude Code runs each
    Bash command in a process group of its own, so killing Claude Code leaves the command running."""
    killed = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue
        if marker.encode() in cmdline:
            try:
                group = os.getpgid(int(entry))
                if group != os.getpgrp():
                    os.killpg(group, signal.SIGKILL)
                else:
                    os.kill(int(entry), signal.SIGKILL)
                killed.append(int(entry))
            except ProcessLookupError:
                pass
    return killed


class RealClaude:
    """The real Claude Code in *project*, with turnback's hooks and the logging hook, talking to *api*."""

    def __init__(self, binary: Path, home: Path, project: Path, api: FakeAPI, work: Path):
        self.binary = binary
        self.home = home
        self.project = project
        self.api = api
        self.hook_log = work / "hook-events.jsonl"
        self.claude_tmp = work / "claude-tmp"  # background tasks' output files, instead of /tmp/claude-UID
        self.claude_tmp.mkdir(exist_ok=True)
        self.streams: list[Stream] = []
        installed = run_cli(home, "install", "claude-code", cwd=project)
        assert installed.rc == 0, installed
        self.settings = project / ".claude" / "settings.json"
        settings = json.loads(self.settings.read_text())
        logger = {"type": "command", "command": f"{sys.executable} {LOG_HOOK}"}
        for event in LOGGED_EVENTS:
            settings.setdefault("hooks", {}).setdefault(event, []).insert(0, {"hooks": [logger]})
        self.settings.write_text(json.dumps(settings, indent=2) + "\n")

    def env(self) -> dict[str, str]:
        return cli_env(
            self.home,
            {
                **OFFLINE_ENV,
                "ANTHROPIC_BASE_URL": self.api.url,
                "TURNBACK_TEST_HOOK_LOG": str(self.hook_log),
                "CLAUDE_CODE_TMPDIR": str(self.claude_tmp),
            },
        )

    def command(self, *args: str) -> list[str]:
        return [str(self.binary), "-p", "--output-format", "stream-json", "--verbose", *args]

    def run(self, prompt: str, *args: str, timeout: float = 120.0) -> Run:
        """One ``claude -p PROMPT`` to its end."""
        done = subprocess.run(
            self.command(*args, prompt),
            cwd=self.project,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
        )
        return Run(done.returncode, parse_lines(done.stdout), done.stderr.decode("utf-8", "replace"))

    def stream(self, *args: str) -> Stream:
        """Claude Code on the SDK's channel; ``--permission-prompt-tool stdio`` puts permission prompts on it."""
        proc = subprocess.Popen(
            self.command("--input-format", "stream-json", *args),
            cwd=self.project,
            env=self.env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        opened = Stream(proc)
        self.streams.append(opened)
        return opened

    def events(self) -> list[dict[str, Any]]:
        """Every hook payload Claude Code sent so far, in order."""
        if not self.hook_log.exists():
            return []
        return [json.loads(line) for line in self.hook_log.read_text().splitlines() if line.strip()]

    def names(self) -> list[str]:
        return [str(event["hook_event_name"]) for event in self.events()]

    def kill_commands(self) -> list[int]:
        """End the shell commands Claude Code started (their command lines name our CLAUDE_CODE_TMPDIR)."""
        return kill_commands_of(str(self.claude_tmp))

    def close(self) -> None:
        for opened in self.streams:
            opened.kill()
        self.kill_commands()


@pytest.fixture
def claude(claude_binary: Path, home: Path, project: Path, api: FakeAPI, tmp_path: Path) -> Iterator[RealClaude]:
    real = RealClaude(claude_binary, home, project, api, tmp_path)
    yield real
    real.close()


# -- the real Codex CLI ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def codex_binary() -> Path:
    from tests.realclients.codexcli import install_codex

    return install_codex()


@pytest.fixture
def codex(codex_binary: Path, home: Path, project: Path, tmp_path: Path) -> Iterator[Any]:
    from tests.realclients.codexcli import RealCodex
    from tests.realclients.fakeresponses import FakeResponses

    with FakeResponses() as responses:
        yield RealCodex(codex_binary, home, project, responses, tmp_path)


# -- the real Gemini CLI -----------------------------------------------------------------------


@pytest.fixture(scope="session")
def gemini_binary() -> Path:
    from tests.realclients.geminicli import install_gemini

    return install_gemini()


@pytest.fixture
def gemini(gemini_binary: Path, home: Path, project: Path, tmp_path: Path) -> Iterator[Any]:
    from tests.realclients.fakegemini import FakeGemini
    from tests.realclients.geminicli import RealGemini

    with FakeGemini() as api:
        yield RealGemini(gemini_binary, home, project, api, tmp_path)

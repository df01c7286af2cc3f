"""Driving the real Codex CLI offline: installed from npm once, pointed at :mod:`fakeresponses` on 127.0.0.1.

``@openai/codex`` (pinned) is a wrapper: npm fetches the native binary as an
optional dependency (``@openai/codex-linux-x64``) from the same registry. The
test's ``HOME`` holds ``~/.codex/config.toml``: a custom model provider with
``base_url`` to the fake and ``wire_api = "responses"``, and the model
``gpt-5.5`` (a model Codex knows, so that it offers ``apply_patch``).
Hooks are trusted as a user trusts them in Codex (``/hooks``, "Trust all and
continue"): :meth:`RealCodex.trust` writes what Codex writes then (see
README.md), with the hashes Codex itself computes (its app server's
``hooks/list``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests import npmcache
from tests.conftest import cli_env, run_cli
from tests.realclients.fakeresponses import FakeResponses

CODEX_VERSION = "0.171.0"
PACKAGE = "@openai/codex"
MODEL = "gpt-5.5"
HERE = Path(__file__).resolve().parent
LOG_HOOK = HERE / "loghook.py"
EXEC_FLAGS = ("--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check")
LOGGED_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "Interrupt",
    "PreCompact",
    "PostCompact",
    "Stop",
    "SessionEnd",
)


def _runnable(folder: Path) -> Path | None:
    """The platform package's native ``codex`` of the pinned version."""
    for binary in sorted((folder / "node_modules" / "@openai").glob("codex-*/vendor/*/bin/codex")):
        try:
            done = subprocess.run([str(binary), "--version"], capture_output=True, timeout=60, env={"HOME": "/"})
        except OSError:
            continue
        if done.returncode == 0 and done.stdout.decode().strip().endswith(CODEX_VERSION):
            return binary
    return None


def install_codex() -> Path:
    """The ``codex`` binary of the pinned version, installed with npm on first use; skips if npm can't be had."""
    return npmcache.npm_install(PACKAGE, CODEX_VERSION, npmcache.cache_dir(f"codex-{CODEX_VERSION}"), _runnable)


@dataclass(frozen=True)
class Run:
    rc: int
    messages: list[dict[str, Any]]
    err: str

    def thread_id(self) -> str:
        return str(next(m["thread_id"] for m in self.messages if m.get("type") == "thread.started"))


def toml_string(text: str) -> str:
    """*text* as a TOML basic string (JSON's escapes are TOML's for these)."""
    return json.dumps(text)


class RealCodex:
    """The real Codex in *project*, with turnback's hooks (the real ``turnback install codex``) and the
    logging hook, talking to *api*."""

    def __init__(self, binary: Path, home: Path, project: Path, api: FakeResponses, work: Path):
        self.binary = binary
        self.home = home
        self.project = project
        self.api = api
        self.hook_log = work / "codex-hook-events.jsonl"
        self.codex_home = home.parent / ".codex"
        self.codex_home.mkdir(exist_ok=True)
        self.config = self.codex_home / "config.toml"
        self.config.write_text(
            f"model = {toml_string(MODEL)}\n"
            'model_provider = "fake"\n'
            "check_for_update_on_startup = false\n"
            "[model_providers.fake]\n"
            'name = "fake"\n'
            f"base_url = {toml_string(api.url)}\n"
            'wire_api = "responses"\n'
            'env_key = "FAKE_OPENAI_KEY"\n'
        )
        self.install_output = run_cli(home, "install", "codex", cwd=project)
        assert self.install_output.rc == 0, self.install_output
        self.hooks_file = project / ".codex" / "hooks.json"
        hooks = json.loads(self.hooks_file.read_text())
        logger = {"type": "command", "command": f"{sys.executable} {LOG_HOOK}", "timeout": 3}
        for event in LOGGED_EVENTS:
            hooks.setdefault("hooks", {}).setdefault(event, []).insert(0, {"hooks": [logger]})
        self.hooks_file.write_text(json.dumps(hooks, indent=2) + "\n")

    def env(self) -> dict[str, str]:
        return cli_env(self.home, {"FAKE_OPENAI_KEY": "dummy", "TURNBACK_TEST_HOOK_LOG": str(self.hook_log)})

    def hooks(self) -> list[dict[str, Any]]:
        """What Codex's app server lists for this project: each hook's key, hash and trust status."""
        proc = subprocess.Popen(
            [str(self.binary), "app-server"],
            cwd=self.project,
            env=self.env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            hello = {"clientInfo": {"name": "turnback-tests", "version": "1"}}
            for message in (
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
                {"jsonrpc": "2.0", "method": "initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [str(self.project)]}},
            ):
                proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
            while True:
                line = proc.stdout.readline()
                assert line, "codex app-server ended without answering hooks/list"
                reply = json.loads(line)
                if reply.get("id") == 2:
                    return list(reply["result"]["data"][0]["hooks"])
        finally:
            proc.kill()
            proc.wait(timeout=30)

    def trust_folder(self) -> None:
        """What Codex writes to config.toml when the user answers "Trust and continue" to "Trust this
        folder?": without it, Codex loads none of the project's .codex/ (its hooks are not even listed)."""
        with self.config.open("a") as handle:
            handle.write(f'\n[projects.{toml_string(str(self.project))}]\ntrust_level = "trusted"\n')

    def trust_hooks(self) -> None:
        """What Codex writes to config.toml when the user chooses "Trust all and continue" in ``/hooks``:
        each hook's current hash under ``hooks.state``, keyed by file, event and position."""
        lines = ["", "[hooks.state]"]
        for hook in self.hooks():
            key, digest = toml_string(hook["key"]), toml_string(hook["currentHash"])
            lines += ["", f"[hooks.state.{key}]", f"trusted_hash = {digest}"]
        with self.config.open("a") as handle:
            handle.write("\n".join(lines) + "\n")

    def trust(self) -> None:
        self.trust_folder()
        self.trust_hooks()

    def exec(self, prompt: str, *, resume: str | None = None, timeout: float = 120.0) -> Run:
        """One ``codex exec --json`` to its end (``resume``: a turn of that earlier session)."""
        head = [str(self.binary), "exec"] + (["resume", resume] if resume else [])
        done = subprocess.run(
            [*head, *EXEC_FLAGS, prompt],
            cwd=self.project,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
        )
        messages = [json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")]
        return Run(done.returncode, messages, done.stderr.decode("utf-8", "replace"))

    def start(self, prompt: str) -> subprocess.Popen[bytes]:
        """``codex exec --json PROMPT`` left running (to be interrupted)."""
        return subprocess.Popen(
            [str(self.binary), "exec", *EXEC_FLAGS, prompt],
            cwd=self.project,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

    def events(self) -> list[dict[str, Any]]:
        if not self.hook_log.exists():
            return []
        return [json.loads(line) for line in self.hook_log.read_text().splitlines() if line.strip()]

    def names(self) -> list[str]:
        return [str(event["hook_event_name"]) for event in self.events()]

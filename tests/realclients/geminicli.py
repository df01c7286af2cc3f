"""Driving the real Gemini CLI offline: installed from npm once, pointed at :mod:`fakegemini` on 127.0.0.1.

``@google/gemini-cli`` (pinned) runs on Node.js (>= 20). The test's ``HOME``
holds ``~/.gemini/settings.json`` (``security.auth.selectedType =
"gemini-api-key"``) and ``~/.gemini/trustedFolders.json`` naming the project
``TRUST_FOLDER`` (what Gemini CLI writes when the user trusts the folder): a
project's hooks run only in a trusted folder. It runs as ``gemini -p PROMPT
--yolo`` with ``GEMINI_API_KEY`` and ``GOOGLE_GEMINI_BASE_URL``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests import npmcache
from tests.conftest import Result, cli_env, run_cli
from tests.realclients.fakegemini import FakeGemini

GEMINI_VERSION = "0.61.0"
PACKAGE = "@google/gemini-cli"
HERE = Path(__file__).resolve().parent
LOG_HOOK = HERE / "loghook.py"
LOGGED_EVENTS = ("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent", "SessionEnd", "Notification")


def _runnable(folder: Path) -> Path | None:
    binary = folder / "node_modules" / ".bin" / "gemini"
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            capture_output=True,
            timeout=120,
            env={"PATH": "/usr/bin:/bin", "HOME": str(folder)},
        )
    except OSError:
        return None
    return binary if done.returncode == 0 and done.stdout.decode().strip() == GEMINI_VERSION else None


def install_gemini() -> Path:
    """The ``gemini`` command of the pinned version, installed with npm on first use; skips if npm can't be had."""
    return npmcache.npm_install(PACKAGE, GEMINI_VERSION, npmcache.cache_dir(f"gemini-cli-{GEMINI_VERSION}"), _runnable)


class RealGemini:
    """The real Gemini CLI in *project*, with turnback's hooks (the real ``turnback install gemini``) and the
    logging hook, talking to *api*."""

    def __init__(self, binary: Path, home: Path, project: Path, api: FakeGemini, work: Path):
        self.binary = binary
        self.home = home
        self.project = project
        self.api = api
        self.hook_log = work / "gemini-hook-events.jsonl"
        user = home.parent / ".gemini"
        user.mkdir(exist_ok=True)
        (user / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
        (user / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
        self.install_output: Result = run_cli(home, "install", "gemini", cwd=project)
        assert self.install_output.rc == 0, self.install_output
        self.settings = project / ".gemini" / "settings.json"
        settings = json.loads(self.settings.read_text())
        logger = {"type": "command", "command": f"{sys.executable} {LOG_HOOK}", "timeout": 30000}
        for event in LOGGED_EVENTS:
            settings.setdefault("hooks", {}).setdefault(event, []).insert(0, {"hooks": [logger]})
        self.settings.write_text(json.dumps(settings, indent=2) + "\n")

    def env(self) -> dict[str, str]:
        return cli_env(
            self.home,
            {
                "GEMINI_API_KEY": "dummy",
                "GOOGLE_GEMINI_BASE_URL": self.api.url,
                "TURNBACK_TEST_HOOK_LOG": str(self.hook_log),
            },
        )

    def run(self, prompt: str, *args: str, timeout: float = 240.0) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [str(self.binary), "-p", prompt, "--yolo", *args],
            cwd=self.project,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
        )

    def events(self) -> list[dict[str, Any]]:
        if not self.hook_log.exists():
            return []
        return [json.loads(line) for line in self.hook_log.read_text().splitlines() if line.strip()]

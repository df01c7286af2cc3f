"""Adding turnback's hook entries to a Claude Code settings.json, a Codex hooks.json, a Gemini CLI
settings.json or a Cursor hooks.json, and taking exactly those away.

Other settings, and other hooks, are left as they are. turnback's entries
are the hook commands that end in ``turnback hook claude-code`` (or
``hook codex``…). The first three hold ``{"hooks": {EVENT: [{"matcher": ...,
"hooks": [{"type": "command", "command": ..., "timeout": ...}]}]}}``; Cursor's
``{"version": 1, "hooks": {EVENT: [{"command": ...}]}}``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import tempfile
from collections.abc import Callable
from typing import Any, NamedTuple

from turnback.catalog import Message
from turnback.errors import UsageError
from turnback.hooks.relay import CURSOR_EVENTS, HOOK_TIMEOUT_S  # the events installed are those the relay serves

MARK = "hook claude-code"
TOOLS_MATCHER = "Write|Edit|MultiEdit|NotebookEdit|Bash|PowerShell"
EVENTS: dict[str, str | None] = {
    "SessionStart": None,
    "UserPromptSubmit": None,
    "PreToolUse": TOOLS_MATCHER,
    "PostToolUse": TOOLS_MATCHER,
    "PostToolUseFailure": TOOLS_MATCHER,
    "PostToolBatch": None,
    "PreCompact": None,
    "Stop": None,
    "StopFailure": None,
    "SessionEnd": None,
}
CODEX_MARK = "hook codex"
CODEX_TOOLS_MATCHER = "Bash|apply_patch"
CODEX_EVENTS: dict[str, str | None] = {
    "SessionStart": None,
    "UserPromptSubmit": None,
    "PreToolUse": CODEX_TOOLS_MATCHER,
    "PostToolUse": CODEX_TOOLS_MATCHER,
    "Interrupt": None,
    "PreCompact": None,
    "PostCompact": None,
    "Stop": None,
    "SessionEnd": None,
}
# Codex cuts the timeout of these to 3 s (and says so at every start): written as it is used.
CODEX_SHORT_TIMEOUT_S = {"Interrupt": 3, "SessionEnd": 3}
GEMINI_MARK = "hook gemini"
GEMINI_TOOLS_MATCHER = "write_file|replace|run_shell_command"
GEMINI_EVENTS: dict[str, str | None] = {
    "SessionStart": None,
    "BeforeAgent": None,
    "BeforeTool": GEMINI_TOOLS_MATCHER,
    "AfterTool": GEMINI_TOOLS_MATCHER,
    "AfterAgent": None,
    "SessionEnd": None,
}
GEMINI_TIMEOUT_MS = HOOK_TIMEOUT_S * 1000  # Gemini CLI counts a hook's timeout in milliseconds
CURSOR_MARK = "hook cursor"


def hook_command(mark: str = MARK) -> str:
    """The command the agent runs: this Python running :mod:`turnback.hooks.launch` without ``site`` and
    isolated (``-S -I``: it starts in about half the time), both named by their full paths, so the hook works
    whatever PATH the agent has; *mark* (``hook claude-code``, ``hook codex``…) ends it."""
    launcher = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch.py")
    return shlex.join([sys.executable, "-S", "-I", launcher, *mark.split()])


class Harness(NamedTuple):
    """An agent turnback installs hooks for: where its hooks file is, and how turnback's entries go in."""

    name: str  # as ``turnback install`` names it
    mark: str  # what turnback's hook commands for it end with
    folder: str  # its settings folder, in a project or in the user's home
    file: str  # the file in it that holds the hooks
    add: Callable[[str], list[str]]  # merge turnback's entries into the file at a path; the events it now handles
    home_variable: str | None = None  # an environment variable that moves the user's folder (``CODEX_HOME``)

    def hooks_path(self, *, project: str | None, user_home: str) -> str:
        """``DIR/<folder>/<file>`` for a project, else the user's (``~/<folder>/<file>``)."""
        if project is not None:
            return os.path.join(os.path.realpath(project), self.folder, self.file)
        moved = os.environ.get(self.home_variable) if self.home_variable else None
        return os.path.join(moved or os.path.join(user_home, self.folder), self.file)


FIRED_FOLDER = "hooks-fired"


def _fired_path(home: str, harness: str, root: str) -> str:
    import hashlib

    return os.path.join(home, FIRED_FOLDER, f"{harness}-{hashlib.sha256(root.encode()).hexdigest()[:32]}")


def mark_fired(home: str, harness: str, root: str) -> None:
    """Leave the mark that *harness*'s hooks ran for the project at *root* (:func:`fired`): an agent that
    skips hooks nobody trusted says nothing, so only a hook's own mark tells they run."""
    path = _fired_path(home, harness, root)
    if not os.path.lexists(path):
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass


def fired(home: str, harness: str, root: str) -> bool:
    """Whether *harness*'s hooks ever ran for the project at *root* (:func:`mark_fired`)."""
    return os.path.lexists(_fired_path(home, harness, root))


def installed(path: str, mark: str) -> bool:
    """Whether the file at *path* holds one of turnback's entries (a file unreadable as settings: no); a
    Cursor entry is the hook itself, the others' a group of hooks."""
    try:
        hooks = _read(path).get("hooks")
    except UsageError:
        return False
    groups = [group for event in (hooks.values() if isinstance(hooks, dict) else ()) for group in event or ()]
    nested = [hook for group in groups if isinstance(group, dict) for hook in group.get("hooks") or ()]
    return any(_ours(hook, mark) for hook in (*groups, *nested))


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise UsageError(Message("settings_not_json", path=path, reason=str(exc))) from exc
    if not isinstance(data, dict):
        raise UsageError(Message("settings_not_object", path=path))
    return data


def _write(path: str, data: dict[str, Any]) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".settings-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(temp, os.stat(path).st_mode & 0o777)
        os.replace(temp, path)
    except BaseException:
        if os.path.lexists(temp):
            os.unlink(temp)
        raise


def _ours(hook: Any, mark: str = MARK) -> bool:
    return isinstance(hook, dict) and isinstance(hook.get("command"), str) and hook["command"].endswith(mark)


def _without_ours(groups: list[Any], mark: str = MARK) -> list[Any]:
    kept = []
    for group in groups:
        if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
            kept.append(group)
            continue
        hooks = [hook for hook in group["hooks"] if not _ours(hook, mark)]
        if hooks:
            kept.append({**group, "hooks": hooks})
        elif not any(_ours(hook, mark) for hook in group["hooks"]):
            kept.append(group)
    return kept


def install(
    path: str,
    events: dict[str, str | None] = EVENTS,
    mark: str = MARK,
    timeouts: dict[str, int] | None = None,
    default_timeout: int = HOOK_TIMEOUT_S,
) -> list[str]:
    """Merge turnback's hook entries (for *events*, their commands ending in *mark*) into the settings at
    *path*; the events it now handles."""
    data = _read(path)
    hooks = data.get("hooks")
    if hooks is None:
        hooks = data["hooks"] = {}
    if not isinstance(hooks, dict):
        raise UsageError(Message("settings_hooks_not_object", path=path))
    # The timeout is written out, not left to Claude Code's default (which differs between its versions): the
    # hook's exchange with the relay is bounded under it.
    for event, matcher in events.items():
        groups = hooks.get(event, [])
        if not isinstance(groups, list):
            raise UsageError(Message("settings_event_not_list", path=path, event=event))
        timeout = (timeouts or {}).get(event, default_timeout)
        group: dict[str, Any] = {"hooks": [{"type": "command", "command": hook_command(mark), "timeout": timeout}]}
        if matcher is not None:
            group = {"matcher": matcher, **group}
        hooks[event] = [*_without_ours(groups, mark), group]
    _write(path, data)
    return list(events)


def install_cursor(path: str) -> list[str]:
    """Merge turnback's entries into the Cursor hooks file at *path* (``{"version": 1, "hooks": {EVENT:
    [{"command": ...}]}}``: each entry is a hook, no group); the events it now handles. No timeout is
    written: Cursor's own default applies."""
    data = _read(path)
    data.setdefault("version", 1)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError(Message("settings_hooks_not_object", path=path))
    for event in CURSOR_EVENTS:
        entries = hooks.get(event, [])
        if not isinstance(entries, list):
            raise UsageError(Message("settings_event_not_list", path=path, event=event))
        hooks[event] = [
            *(entry for entry in entries if not _ours(entry, CURSOR_MARK)),
            {"command": hook_command(CURSOR_MARK)},
        ]
    _write(path, data)
    return list(CURSOR_EVENTS)


HARNESSES: dict[str, Harness] = {
    harness.name: harness
    for harness in (
        Harness("claude-code", MARK, ".claude", "settings.json", lambda path: install(path)),
        Harness(
            "codex",
            CODEX_MARK,
            ".codex",
            "hooks.json",
            lambda path: install(path, CODEX_EVENTS, CODEX_MARK, CODEX_SHORT_TIMEOUT_S),
            home_variable="CODEX_HOME",
        ),
        Harness(
            "gemini",
            GEMINI_MARK,
            ".gemini",
            "settings.json",
            lambda path: install(path, GEMINI_EVENTS, GEMINI_MARK, default_timeout=GEMINI_TIMEOUT_MS),
        ),
        Harness("cursor", CURSOR_MARK, ".cursor", "hooks.json", lambda path: install_cursor(path)),
    )
}


def uninstall(path: str, mark: str = MARK) -> int:
    """Remove exactly turnback's entries (commands ending in *mark*) from the settings at *path*; how many
    events had them."""
    data = _read(path)
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return 0
    removed = 0
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = [group for group in _without_ours(groups, mark) if not _ours(group, mark)]  # Cursor's: the hook
        if len(kept) != len(groups) or kept != groups:
            removed += 1
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        del data["hooks"]
    if removed:
        _write(path, data)
    return removed


__all__ = [
    "CODEX_EVENTS",
    "CODEX_MARK",
    "CURSOR_EVENTS",
    "CURSOR_MARK",
    "EVENTS",
    "GEMINI_EVENTS",
    "GEMINI_MARK",
    "HARNESSES",
    "MARK",
    "Harness",
    "fired",
    "hook_command",
    "install",
    "install_cursor",
    "installed",
    "mark_fired",
    "uninstall",
]

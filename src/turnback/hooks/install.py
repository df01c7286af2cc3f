"""Adding turnback's hook entries to a Claude Code settings.json, and taking exactly those away.

Other settings, and other hooks, are left as they are. turnback's entries
are the hook commands that end in ``turnback hook claude-code``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import tempfile
from typing import Any

from turnback.catalog import Message
from turnback.errors import UsageError
from turnback.hooks.relay import HOOK_TIMEOUT_S

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


def hook_command() -> str:
    """The command Claude Code runs: this Python running :mod:`turnback.hooks.launch` without ``site`` and
    isolated (``-S -I``: it starts in about half the time), both named by their full paths, so the hook works
    whatever PATH Claude Code has."""
    launcher = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch.py")
    return shlex.join([sys.executable, "-S", "-I", launcher, *MARK.split()])


def settings_path(*, project: str | None, user_home: str) -> str:
    if project is not None:
        return os.path.join(os.path.realpath(project), ".claude", "settings.json")
    return os.path.join(user_home, ".claude", "settings.json")


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


def _ours(hook: Any) -> bool:
    return isinstance(hook, dict) and isinstance(hook.get("command"), str) and hook["command"].endswith(MARK)


def _without_ours(groups: list[Any]) -> list[Any]:
    kept = []
    for group in groups:
        if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
            kept.append(group)
            continue
        hooks = [hook for hook in group["hooks"] if not _ours(hook)]
        if hooks:
            kept.append({**group, "hooks": hooks})
        elif not any(_ours(hook) for hook in group["hooks"]):
            kept.append(group)
    return kept


def install(path: str) -> list[str]:
    """Merge turnback's hook entries into the settings at *path*; the events it now handles."""
    data = _read(path)
    hooks = data.get("hooks")
    if hooks is None:
        hooks = data["hooks"] = {}
    if not isinstance(hooks, dict):
        raise UsageError(Message("settings_hooks_not_object", path=path))
    # The timeout is written out, not left to Claude Code's default (which differs between its versions): the
    # hook's exchange with the relay is bounded under it.
    command = {"type": "command", "command": hook_command(), "timeout": HOOK_TIMEOUT_S}
    for event, matcher in EVENTS.items():
        groups = hooks.get(event, [])
        if not isinstance(groups, list):
            raise UsageError(Message("settings_event_not_list", path=path, event=event))
        group: dict[str, Any] = {"hooks": [command]}
        if matcher is not None:
            group = {"matcher": matcher, **group}
        hooks[event] = [*_without_ours(groups), group]
    _write(path, data)
    return list(EVENTS)


def uninstall(path: str) -> int:
    """Remove exactly turnback's entries from the settings at *path*; how many events had them."""
    data = _read(path)
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return 0
    removed = 0
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = _without_ours(groups)
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


__all__ = ["EVENTS", "MARK", "hook_command", "install", "settings_path", "uninstall"]

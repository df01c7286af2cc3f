"""The engine: every verb a front end (CLI, hooks, MCP, HTTP) may call (see :mod:`turnback.engine.facade`).

``Engine`` is a thin facade; each concern lives in a module of its own:
``paths`` (where a path may be read or written), ``sessions`` (projects,
sessions, turns, busy marks), ``history`` (what the record shows), ``tools``
(file tools), ``commands`` (shell commands and jobs), ``watcher``,
``takeback`` (every plan's one preparation, then apply) and ``storage``
(caps, gc, settings).
"""

from __future__ import annotations

from turnback.capture.calls import TextEdit

from .facade import Engine, TurnHandle
from .kept import KeptStore
from .tools import CallHandle
from .values import (
    AgentNotice,
    CallHidden,
    CommandNotStarted,
    CommandResult,
    Coverage,
    ResendFile,
    SessionPick,
    SessionStatus,
    TextEdited,
    TurnDiff,
)

__all__ = [
    "AgentNotice",
    "CallHandle",
    "CallHidden",
    "CommandNotStarted",
    "CommandResult",
    "Coverage",
    "Engine",
    "KeptStore",
    "ResendFile",
    "SessionPick",
    "SessionStatus",
    "TextEdit",
    "TextEdited",
    "TurnDiff",
    "TurnHandle",
]

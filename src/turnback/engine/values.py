"""What the engine's verbs return besides the model's values, and the error of a command that never started."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, NamedTuple

from turnback.catalog import Message
from turnback.errors import UsageError
from turnback.model import Call, Plan, Session, Turn

if TYPE_CHECKING:
    from turnback.render.summary import NetChange


class CommandNotStarted(UsageError):
    """The command could not be started (not found, not executable); ``errno`` tells which."""

    def __init__(self, message: Message, errno: int | None):
        super().__init__(message)
        self.errno = errno


class SessionStatus(NamedTuple):
    session: Session
    head: Turn | None
    running: tuple[Turn, ...]
    busy: tuple[Message, ...]
    commands: tuple[Call, ...]
    interrupted: Plan | None
    kept_bytes: int


class ResendFile(NamedTuple):
    """A file an edit and resend would revert: how many calls changed it, and the lines a revert adds and removes."""

    path: str
    calls: int
    added: int
    removed: int


class Coverage(NamedTuple):
    """Whether turnback can take back what a command may destroy, and if not, why."""

    covered: bool
    reasons: tuple[Message, ...]


class AgentNotice(NamedTuple):
    """What the assistant must be told about *path* (``Reverted the change to PATH``), worded on delivery."""

    path: str
    message: Message


def notice_text(path: str) -> str:
    """The stored form of the notice that *path* was reverted: its code and parameters, not its words."""
    return json.dumps(Message("reverted_change_notice", path=path).to_json())


def stored_notice(path: str, text: str) -> AgentNotice:
    """A notice as stored: a message's JSON, or the English sentence an older turnback stored."""
    try:
        return AgentNotice(path, Message.from_json(json.loads(text)))
    except (ValueError, TypeError, KeyError):
        return AgentNotice(path, Message("plain", text=text))


class SessionPick(NamedTuple):
    """The session a command acts on, and the newer sessions of its project it passed over (they have no turns)."""

    session: Session
    passed_over: tuple[Session, ...] = ()


class TurnDiff(NamedTuple):
    """What one turn changed, path by path, and which of those paths git ignores (contents never shown)."""

    turn: Turn
    changes: tuple[NetChange, ...]
    ignored: frozenset[str]
    note: Message | None = None


class CallHidden(NamedTuple):
    """What of a call is never shown: the contents of *paths* (ignored by .gitignore), and, when *text* is set,
    what the agent's call carries of them (its arguments but paths and flags, its error message)."""

    paths: frozenset[str]
    text: bool


class CommandResult(NamedTuple):
    """A shell command's call, its exit status (``None`` while it runs on), and the ``changed …`` line."""

    call: Call
    exit_code: int | None
    timed_out: bool
    line: str


class TextEdited(NamedTuple):
    """An edit of a file's text: its call (``None`` for a preview), the path in the project, and what the file
    held before and holds after (what a diff of the edit shows)."""

    call: Call | None
    path: str
    before: bytes
    after: bytes


__all__ = [
    "AgentNotice",
    "CallHidden",
    "CommandNotStarted",
    "CommandResult",
    "Coverage",
    "ResendFile",
    "SessionPick",
    "SessionStatus",
    "TextEdited",
    "TurnDiff",
    "notice_text",
    "stored_notice",
]

"""The error tree of turnback.

Every error a user can meet is a :class:`TurnbackError` whose ``str()`` is one
sentence meant for the user and whose ``exit_code`` is what the CLI exits with::

    TurnbackError
      UsageError          2  unknown id, bad path, conflicting options
      RefusedError        1  no confirmation, stack rule, stale head, refused edit
        NothingToDoError  1  nothing to undo or revert
        UncoveredError    1  a call would destroy what turnback cannot keep a copy of
      BusyError           3  a turn, undo or command runs; names what runs
      StoreError          1  the store cannot be opened or read
        KeyUnavailableError  the key is missing, unsafe or wrong
        BlobCorruptError     a stored copy does not decrypt or match its id
          RecordDamagedError a stored record (a row or a sealed value in it) is damaged
        SchemaTooNewError    the store was written by a newer turnback
      UnsafePathError     1  symlink in the way, outside the project, permission denied

Outcomes for a single file during an undo or revert are not errors: they are
plan rows (``skip`` with a reason).
"""

from __future__ import annotations

from typing import ClassVar

from turnback.catalog import Message, word


class TurnbackError(Exception):
    """Base of every error turnback reports to a user.

    It carries a :class:`~turnback.catalog.Message` (``message``: a code and its parameters) that front ends
    word in the user's language; ``str()`` is its English text. A plain string is accepted where an outcome
    has no code of its own yet (a system error's text): it is shown as it is, in every language.
    """

    exit_code: ClassVar[int] = 1

    def __init__(self, message: Message | str, /) -> None:
        self.message = as_message(message)
        super().__init__(self.message.code)

    @property
    def code(self) -> str:
        return self.message.code

    def __str__(self) -> str:
        return word(self.message, "en")


def error_message(exc: BaseException) -> Message:
    """What *exc* says, as a message to keep: turnback's own, or the system's text as it is (untranslated)."""
    if isinstance(exc, TurnbackError):
        return exc.message
    return Message("plain", text=str(exc) or type(exc).__name__)


def as_message(text: Message | str) -> Message:
    """*text* as a message: text a harness or a user gave (an error, a reason) is kept and shown as it is."""
    return text if isinstance(text, Message) else Message("plain", text=text)


class UsageError(TurnbackError, ValueError):
    """The caller asked for something that cannot be: unknown id, bad path, bad option."""

    exit_code = 2


class RefusedError(TurnbackError):
    """turnback understood the request and declines it; nothing was changed."""

    exit_code = 1


class NothingToDoError(RefusedError):
    """There is nothing to undo, revert or apply."""


class UncoveredError(RefusedError):
    """A call would overwrite or remove content that turnback cannot keep a copy of; nothing was changed.

    ``uncovered`` names each path and why (over ``store.max_mib``, unreadable); the caller may go ahead
    without a copy (the CLI's ``--uncovered``), and the change is then recorded as not covered.
    """

    def __init__(self, uncovered: tuple[tuple[str, Message | str], ...]):
        self.uncovered = uncovered
        super().__init__(Message("uncovered_refused", why=self.why))

    @property
    def why(self) -> Message:
        named = tuple(Message("path_because", path=path, reason=reason) for path, reason in self.uncovered)
        return Message("cannot_keep_copy", paths=named)


class BusyError(TurnbackError):
    """Something runs in the session (a turn, an undo, a command); the message names it."""

    exit_code = 3


class StoreError(TurnbackError):
    """The store cannot be opened, read or written."""


class KeyUnavailableError(StoreError):
    """The store key is missing, stored unsafely, or does not open this store."""


class BlobCorruptError(StoreError):
    """A stored copy does not decrypt, or does not match its keyed hash."""


class RecordDamagedError(BlobCorruptError):
    """A stored record does not open, or holds a value it cannot hold; ``what`` names the record."""

    def __init__(self, what: Message):
        super().__init__(Message("record_damaged", what=what))
        self.what = what


class SchemaTooNewError(StoreError):
    """The store was written by a newer turnback than this one."""


class UnsafePathError(TurnbackError):
    """A path leaves the project, passes through a symbolic link, or cannot be accessed."""


__all__ = [
    "BlobCorruptError",
    "BusyError",
    "KeyUnavailableError",
    "NothingToDoError",
    "RecordDamagedError",
    "RefusedError",
    "SchemaTooNewError",
    "StoreError",
    "TurnbackError",
    "UncoveredError",
    "UnsafePathError",
    "UsageError",
]

"""The values turnback works with: projects, sessions, turns, calls, changes, plans.

All values are frozen (named tuples: cheap to define, which keeps the start
of a hook process short); the store builds them and the engine hands them
to front ends. Ids are sortable strings (UUIDv7 layout, 32 lower-case hex
digits: 48 bits of milliseconds, then random bits), so a unique prefix names
one and an id made later sorts after one made earlier.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Literal, NamedTuple, NewType

from turnback.catalog import Message
from turnback.paths import RelPath

ProjectId = NewType("ProjectId", str)
SessionId = NewType("SessionId", str)
TurnId = NewType("TurnId", str)
CallId = NewType("CallId", str)
OpId = NewType("OpId", str)
BlobId = NewType("BlobId", bytes)

SHORT_ID_LEN = 16
"""Hex digits shown for an id: the millisecond stamp and 16 random bits."""


class IdSource:
    """Makes sortable ids. Inject one with a fixed clock and seed for repeatable tests."""

    def __init__(self, clock_ms: Callable[[], int] | None = None, randbits: Callable[[int], int] | None = None):
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._randbits = randbits or (lambda n: int.from_bytes(os.urandom((n + 7) // 8), "big") >> (-n % 8))
        self._lock = threading.Lock()
        self._last_ms = -1
        self._counter = 0

    def new(self) -> str:
        with self._lock:
            now = self._clock_ms()
            if now > self._last_ms:
                self._last_ms = now
                self._counter = self._randbits(11)
            else:
                # Same millisecond, or the clock stepped back: keep this process's ids increasing.
                self._counter += 1
                if self._counter > 0xFFF:
                    self._last_ms += 1
                    self._counter = 0
            ms, counter = self._last_ms, self._counter
        value = (ms & ((1 << 48) - 1)) << 80
        value |= 0x7 << 76  # version 7
        value |= counter << 64
        value |= 0b10 << 62  # RFC 4122 variant
        value |= self._randbits(62)
        return f"{value:032x}"


def short_id(full_id: str) -> str:
    """The prefix of an id that output shows and the CLI accepts."""
    return full_id[:SHORT_ID_LEN]


StateKind = Literal["absent", "file", "symlink", "dir", "special"]
"""``special``: a FIFO, socket or device, which turnback never reads, writes or restores."""

PERMISSION_BITS = 0o777
SPECIAL_BITS = 0o7000  # setuid, setgid, sticky


class FileState(NamedTuple):
    """What one path holds: nothing, a file (content id, size, mode), a symlink (target) or a folder."""

    kind: StateKind
    blob: BlobId | None = None
    size: int | None = None
    mode: int | None = None
    target: str | None = None

    def same_as(self, other: FileState | None) -> bool:
        """Whether *other* holds the same thing, as compare-and-swap decides it.

        Files compare by content id and permission bits, links by target,
        folders by their permission bits where both are known (their
        entries are other paths).
        """
        if other is None or other.kind != self.kind:
            return False
        if self.kind == "file":
            return self.blob == other.blob and (self.mode or 0) & 0o7777 == (other.mode or 0) & 0o7777
        if self.kind == "symlink":
            return self.target == other.target
        if self.kind == "dir":
            if self.mode is None or other.mode is None:
                return True
            return self.mode & PERMISSION_BITS == other.mode & PERMISSION_BITS
        return self.kind != "special"

    @property
    def exists(self) -> bool:
        return self.kind != "absent"

    def describe(self) -> Message:
        """What the path holds, as a noun with its article (``a folder``)."""
        return {
            "file": Message("a_file"),
            "symlink": Message("a_symlink"),
            "dir": Message("a_folder"),
            "special": Message("a_special"),
        }.get(self.kind, Message("nothing"))


ABSENT = FileState("absent")

ChangeKind = Literal["new", "modified", "deleted", "moved", "mode"]


class Change(NamedTuple):
    """One path changed by one call: the state before, the state after, and flags."""

    id: int
    call_id: CallId
    seq: int
    path: RelPath
    before: FileState
    after: FileState | None  # None: the call never reported what it wrote
    partial: bool = False
    evicted: bool = False
    reverted: bool = False
    outside: bool = False  # an absolute path outside the project, copied per ``mode``
    not_covered: Message | None = None  # why no copy was kept (too large, excluded, unreadable, ...)

    @property
    def kind(self) -> ChangeKind:
        return change_kind(self.before, self.after)


def change_kind(before: FileState, after: FileState | None) -> ChangeKind:
    """How a path changed: ``new``, ``deleted``, ``mode`` (permission bits only) or ``modified``."""
    if not before.exists:
        return "new"
    if after is None:
        return "modified"
    if not after.exists:
        return "deleted"
    if before.kind == after.kind == "file" and before.blob == after.blob and before.mode != after.mode:
        return "mode"
    return "modified"


CallStatus = Literal["running", "done", "failed"]
CallKind = Literal["tool", "command", "job"]


class Call(NamedTuple):
    id: CallId
    turn_id: TurnId
    session_id: SessionId
    tool: str
    input: str | None
    status: CallStatus
    started_at: int
    ended_at: int | None
    error: Message | None = None  # why it failed, was denied or was cut short
    changes: tuple[Change, ...] = ()
    kind: CallKind = "tool"
    exit_code: int | None = None
    pid: int | None = None
    late: bool = False  # a job's changes recorded after its turn had ended
    unasked: bool = False  # a command the harness ran without asking, because turnback covers it

    @property
    def cut_short(self) -> bool:
        """The call's completion was never recorded: its writes may be cut short."""
        return self.status == "running" or any(c.partial for c in self.changes)


TurnStatus = Literal["running", "ended", "interrupted"]
UndoState = Literal["no", "yes", "partly"]


class Turn(NamedTuple):
    id: TurnId
    session_id: SessionId
    number: int
    parent: TurnId | None
    message: str | None
    status: TurnStatus
    undone: UndoState
    started_at: int
    ended_at: int | None
    holder_pid: int | None = None
    calls: tuple[Call, ...] = ()
    refs: tuple[RefChange, ...] = ()
    resent: bool = False  # its message was edited and resent: its calls are gone

    @property
    def changes(self) -> tuple[Change, ...]:
        return tuple(change for call in self.calls for change in call.changes)


class RefChange(NamedTuple):
    """A git ref a turn moved: HEAD, a branch, a tag or the stash; values as :class:`RefUpdate` has them."""

    id: int
    turn_id: TurnId
    name: str
    before: str | None
    after: str | None
    reverted: bool = False


def ref_short_name(name: str) -> str:
    """How a ref is named to a user: ``main``, ``tag v1``, ``stash``, ``HEAD``."""
    if name.startswith("refs/heads/"):
        return name[len("refs/heads/") :]
    if name.startswith("refs/tags/"):
        return "tag " + name[len("refs/tags/") :]
    if name == "refs/stash":
        return "stash"
    return name


def ref_value_text(value: str | None) -> str:
    """How a ref's value is shown: a 7-hex id, the branch of an attached HEAD, ``(none)``."""
    if value is None:
        return "(none)"
    if value.startswith("ref: "):
        return value[len("ref: ") :].removeprefix("refs/heads/")
    if len(value) in (40, 64) and all(c in "0123456789abcdef" for c in value):
        return value[:7]
    return value


class RefUpdate(NamedTuple):
    """A ref move in a plan: the ref must hold ``expect`` (``None``: not exist), and will hold ``target``.

    Values are object ids, or ``ref: refs/heads/NAME`` for an attached HEAD.
    """

    name: str
    expect: str | None
    target: str | None

    def text(self) -> str:
        """``main 1a2b3c4 -> 5d6e7f8``: the ref, what it holds now, what it will hold."""
        return f"{ref_short_name(self.name)} {ref_value_text(self.expect)} -> {ref_value_text(self.target)}"


class Project(NamedTuple):
    id: ProjectId
    root: str
    other_host: str | None = None  # the name of the host its files are on, when that is not this one
    other_host_gone: bool = False  # that host's lease ran out: it died (or lost the store), its processes with it


class Session(NamedTuple):
    id: SessionId
    project_id: ProjectId
    actor: str | None
    title: str | None
    incognito: bool
    head: TurnId | None
    created_at: int
    active_at: int


RowAction = Literal["restore", "trash", "skip", "not covered", "ref", "mark"]
RowStatus = Literal["pending", "done", "skipped", "failed"]
OpKind = Literal["undo", "revert", "rollback", "resend", "redo"]
OpStatus = Literal["planned", "applying", "done"]
OP_NOUNS: dict[OpKind, Message] = {
    "undo": Message("op_undo"),
    "revert": Message("op_revert"),
    "rollback": Message("op_rollback"),
    "resend": Message("op_resend"),
    "redo": Message("op_redo"),
}
"""Each kind of operation named in a sentence (``take back the undo 0a1b…``)."""


class PlanRow(NamedTuple):
    """One step of a plan: what a path holds now (``expect``), what it will hold (``target``), why.

    ``conflict`` marks a path that holds something other than what the
    turn or call wrote; ``force_only`` a conflict skipped, that ``--force``
    (``--anyway`` for a revert) would turn into a restore. ``change_ids`` are the changes the row
    takes back; applying the row marks them reverted.
    """

    seq: int
    action: RowAction
    path: RelPath
    reason: Message | None = None
    expect: FileState | None = None
    target: FileState | None = None
    change_ids: tuple[int, ...] = ()
    turn_id: TurnId | None = None
    force_only: bool = False
    conflict: bool = False
    warnings: tuple[Message, ...] = ()
    trash_name: str | None = None
    status: RowStatus = "pending"
    note: Message | None = None
    ref: RefUpdate | None = None
    outside: bool = False
    unmark: bool = False  # a redo row: done, its changes count as not taken back again

    @property
    def acts(self) -> bool:
        """Whether applying the row changes the store's record (restore, trash or mark)."""
        return self.action in ("restore", "trash", "mark")


class PlanSection(NamedTuple):
    """A header line of a plan (``undo turn ID: message``) and the turn it stands for."""

    turn_id: TurnId | None
    title: Message


class Plan(NamedTuple):
    id: OpId
    kind: OpKind
    session_id: SessionId
    project_id: ProjectId
    rows: tuple[PlanRow, ...]
    sections: tuple[PlanSection, ...] = ()
    turn_ids: tuple[TurnId, ...] = ()
    call_id: CallId | None = None
    force: bool = False
    status: OpStatus = "planned"
    created_at: int = 0
    notes: tuple[Message, ...] = ()
    head_from: TurnId | None = None  # rollback, resend, redo: the head the caller saw, checked before applying
    head_to: TurnId | None = None  # ... and the head it leaves (None: the session's start)
    moves_head: bool = False
    reverses: OpId | None = None  # redo: the operation it takes back
    resend_turn: TurnId | None = None  # resend: the turn whose message is edited
    resend_mode: str | None = None  # resend: revert, keep or anyway

    @property
    def force_only_rows(self) -> tuple[PlanRow, ...]:
        return tuple(row for row in self.rows if row.force_only)

    @property
    def acting_rows(self) -> tuple[PlanRow, ...]:
        return tuple(row for row in self.rows if row.acts)


class OpResult(NamedTuple):
    """What applying a plan did, row by row."""

    plan: Plan
    trash_dir: str | None
    resumed: bool = False
    notes: tuple[Message, ...] = ()  # e.g. a service that may still use a reverted configuration

    def count(self, action: RowAction, status: RowStatus = "done") -> int:
        return sum(1 for row in self.plan.rows if row.action == action and row.status == status)

    @property
    def changed(self) -> bool:
        """Whether the operation changed a file or marked one reverted."""
        return any(row.status == "done" for row in self.plan.rows)


class TurnSummary(NamedTuple):
    files: int
    added: int
    removed: int
    line: Message | None  # None: no file changed
    notes: tuple[Message, ...] = ()  # files changed outside the project; a turn whose commands ran unasked


__all__ = [
    "ABSENT",
    "OP_NOUNS",
    "PERMISSION_BITS",
    "SHORT_ID_LEN",
    "SPECIAL_BITS",
    "BlobId",
    "Call",
    "CallId",
    "CallKind",
    "Change",
    "ChangeKind",
    "FileState",
    "IdSource",
    "OpId",
    "OpResult",
    "Plan",
    "PlanRow",
    "PlanSection",
    "Project",
    "ProjectId",
    "RefChange",
    "RefUpdate",
    "RowAction",
    "Session",
    "SessionId",
    "Turn",
    "TurnId",
    "TurnSummary",
    "change_kind",
    "ref_short_name",
    "ref_value_text",
    "short_id",
]

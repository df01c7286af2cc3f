"""Why a plan row is what it is: the reasons, as messages, and the few rules that rewrite one.

A reason is a :class:`~turnback.catalog.Message`, often of several clauses (what happened; what a flag would do),
so code reads its parts, never its text.
"""

from __future__ import annotations

from turnback.catalog import Message
from turnback.model import CallId, short_id


def clauses(*parts: Message) -> Message:
    """One reason of several clauses (``changed after the turn; --force overwrites it``)."""
    return Message("clauses", parts=parts)


def first_clause(reason: Message) -> Message:
    """What a reason says happened, without what a flag would do about it."""
    parts = reason.params.get("parts") if reason.code == "clauses" else None
    return parts[0] if isinstance(parts, tuple) and parts else reason


def with_flag_command(reason: Message, command: str) -> Message:
    """*reason* with the flag it names replaced by the whole command that acts on it (``turnback undo 2 --force``)."""

    def swapped(key: str, value: object) -> object:
        if key == "flag":
            return command
        if isinstance(value, Message):
            return with_flag_command(value, command)
        if isinstance(value, tuple):
            return tuple(with_flag_command(item, command) if isinstance(item, Message) else item for item in value)
        return value

    return Message(reason.code, **{key: swapped(key, value) for key, value in reason.params.items()})


CHANGED_AFTER_TURN = Message("changed_after_turn")
UNDO_CONFLICT = clauses(CHANGED_AFTER_TURN, Message("flag_overwrites_it", flag="--force"))
ROLLBACK_CONFLICT = clauses(CHANGED_AFTER_TURN, Message("rollback_leaves_it"))
RESEND_CONFLICT = Message("resend_conflict")
RESEND_ANYWAY_CONFLICT = Message("resend_anyway_conflict")
REDO_CONFLICT = Message("redo_conflict")
ALREADY_REDONE = Message("already_redone")
CUT_SHORT = Message("cut_short_unknown")
CUT_SHORT_ROLLBACK = clauses(CUT_SHORT, Message("rollback_leaves_it"))
CUT_SHORT_UNDO = clauses(CUT_SHORT, Message("flag_overwrites_it", flag="--force"))
CUT_SHORT_REVERT = clauses(CUT_SHORT, Message("anyway_restores_earlier"))
LINK_IN_PLACE = Message("link_in_place")
SPECIAL_IN_PLACE = Message("special_in_place")
EVICTED = Message("copy_evicted")
ALREADY_EARLIER = Message("already_earlier")
COPY_MISSING = Message("copy_missing")
GOES_TO_TRASH = Message("now_goes_to_trash")
SETUID_NOT_RESTORED = Message("setuid_not_restored")


_RESTORE_REMEDIES = {"anyway_restores_earlier", "anyway_restores_over_it"}


def for_created(reason: Message) -> Message:
    """*reason* for a path the call created: what ``--anyway`` does there is delete it, not restore anything."""
    if reason.code in _RESTORE_REMEDIES:
        return Message("anyway_deletes_it")
    if reason.code == "clauses":
        parts = reason.params.get("parts")
        if isinstance(parts, tuple):
            return clauses(*(for_created(part) if isinstance(part, Message) else part for part in parts))
    return reason


def overlap_note(other: CallId, kind: str, running: bool) -> Message:
    """``may be background job 01a2…'s, which ran meanwhile``: whose a command's change may be."""
    what = {"job": Message("noun_background_job"), "command": Message("noun_command")}.get(kind, Message("noun_call"))
    return Message(
        "may_be_call_still_runs" if running else "may_be_call_ran_meanwhile", what=what, call=short_id(other)
    )


__all__ = [
    "ALREADY_EARLIER",
    "ALREADY_REDONE",
    "COPY_MISSING",
    "CUT_SHORT",
    "CUT_SHORT_REVERT",
    "CUT_SHORT_ROLLBACK",
    "CUT_SHORT_UNDO",
    "EVICTED",
    "GOES_TO_TRASH",
    "LINK_IN_PLACE",
    "REDO_CONFLICT",
    "RESEND_ANYWAY_CONFLICT",
    "RESEND_CONFLICT",
    "ROLLBACK_CONFLICT",
    "SETUID_NOT_RESTORED",
    "SPECIAL_IN_PLACE",
    "UNDO_CONFLICT",
    "clauses",
    "first_clause",
    "for_created",
    "overlap_note",
    "with_flag_command",
]

"""What every query class of the SQLite store shares: the connection, the keys, sealing, and row checks."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from typing import Any, get_args

from turnback.catalog import Message
from turnback.errors import BlobCorruptError, RecordDamagedError
from turnback.model import (
    BlobId,
    CallKind,
    CallStatus,
    FileState,
    IdSource,
    OpKind,
    OpStatus,
    ProjectId,
    RowAction,
    RowStatus,
    StateKind,
    TurnStatus,
    UndoState,
    short_id,
)
from turnback.store.blobs import PACKS_DIR, BlobStore
from turnback.store.crypto import ID_LEN, Crypto
from turnback.store.sql import SqlDatabase

OUTSIDE_SCOPE = "outside"  # the path-id scope of files outside any project (absolute paths)
TRASH_DIR = "trash"
LOCKS_DIR = "locks"
LOG_NAME = "turnback.log"

# What a sealed value's associated data names: its table's owner (and the item in it), for messages.
_SEALED_OWNERS: dict[str, tuple[Message, Message | None]] = {
    "projects": (Message("record_noun_project"), None),
    "sessions": (Message("record_noun_session"), None),
    "turns": (Message("record_noun_turn"), None),
    "calls": (Message("record_noun_call"), None),
    "changes": (Message("record_noun_call"), Message("record_noun_change")),
    "ops": (Message("record_noun_operation"), None),
    "op_rows": (Message("record_noun_operation"), Message("record_noun_row")),
    "ref_changes": (Message("record_noun_turn"), Message("record_noun_git_ref_change")),
    "busy_marks": (Message("record_noun_busy_mark"), None),
    "notices": (Message("record_noun_notice"), None),
    "snapshots": (Message("record_noun_snapshot"), None),
}


def record_named(noun: Message, record_id: str) -> Message:
    """ "call 1a2b3c": a stored record, by its kind and short id, as a damaged record's ``what`` names it."""
    return Message("record_named", noun=noun, id=short_id(record_id))


def record_item(item: Message, seq: object, owner: Message) -> Message:
    """ "change 2 of call 1a2b3c": one of a record's numbered items."""
    return Message("record_item_of", item=item, seq=str(seq), owner=owner)


def sealed_where(context: str) -> Message:
    """``changes.path:CALL:SEQ`` as "the path of change SEQ of call CALL": where a sealed value belongs."""
    name, _, ids = context.partition(":")
    table, _, column = name.partition(".")
    owner, item = _SEALED_OWNERS.get(table, (Message("plain", text=table), None))
    first, _, seq = ids.partition(":")
    where = record_named(owner, first)
    if item:
        where = record_item(item, seq, where)
    # The column is the database's own name for the value (``before target``): shown as it is, in every language.
    return Message("record_sealed_value", column=column.replace("_", " "), record=where) if column else where


def checked_choice(value: Any, allowed: tuple[str, ...], what: Message) -> Any:
    """*value* when it is one of *allowed*; else the record holding it is damaged (a flipped byte, a bad page)."""
    if value not in allowed:
        raise RecordDamagedError(what)
    return value


def checked_int(value: Any, what: Message, *, optional: bool = True) -> Any:
    if (value is None and optional) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise RecordDamagedError(what)


def checked_blob_id(value: Any, what: Message) -> BlobId | None:
    if value is None:
        return None
    if not isinstance(value, bytes) or len(value) != ID_LEN:
        raise RecordDamagedError(what)
    return BlobId(value)


STATE_KINDS: tuple[str, ...] = get_args(StateKind)
CALL_STATUSES: tuple[str, ...] = get_args(CallStatus)
CALL_KINDS: tuple[str, ...] = get_args(CallKind)
TURN_STATUSES: tuple[str, ...] = get_args(TurnStatus)
UNDO_STATES: tuple[str, ...] = get_args(UndoState)
ROW_ACTIONS: tuple[str, ...] = get_args(RowAction)
ROW_STATUSES: tuple[str, ...] = get_args(RowStatus)
OP_KINDS: tuple[str, ...] = get_args(OpKind)
OP_STATUSES: tuple[str, ...] = get_args(OpStatus)


def state_columns(state: FileState | None) -> tuple[Any, ...]:
    """A state's plain columns (kind, blob, size, mode); its link target is sealed on its own."""
    if state is None:
        return (None, None, None, None)
    return (state.kind, state.blob, state.size, state.mode)


class SqliteRecords:
    """An open SQLite store's connection, keys and clock; the query classes build on it."""

    def __init__(
        self,
        home: str,
        db: SqlDatabase,
        crypto: Crypto,
        *,
        clock: Callable[[], int] = time.time_ns,
        ids: IdSource | None = None,
    ):
        self.home = home
        self.db = db
        self.crypto = crypto
        self.blobs = BlobStore(db, crypto, self.packs_folder())
        # The TURNBACK_KEY-style secret the store was opened with, if any: turnback's own detached helpers
        # (a job runner, a watcher) are given it, as they would find it in the environment.
        self.key_secret: str | None = None
        self.clock = clock
        self.ids = ids or IdSource()
        self.reserve_used = False  # the disk was full and the space set aside was freed to go on
        # The content size of the copies this connection's change rows named (a copy named twice counted
        # twice): what any turn's kept copies can have grown by through it (``turn_kept_bytes_at_most``).
        self.copy_bytes_recorded = 0

    def close(self) -> None:
        self.db.close()

    def transaction(
        self, *, durable: bool = True, project: ProjectId | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """One write transaction on the store (``BEGIN IMMEDIATE``: SQLite's one writer); nested calls join it."""
        return self.db.transaction(durable=durable, project=project)

    def adopt_keys(self) -> None:
        """After ``crypto`` was replaced by a copied store's keys: what is sealed or keyed with them follows."""
        self.blobs = BlobStore(self.db, self.crypto, self.packs_folder())

    def packs_folder(self) -> str | None:
        """Where a first snapshot's workers write their pack files (``store.blobs``)."""
        return os.path.join(self.home, PACKS_DIR)

    def identities_follow(self, tables: tuple[str, ...]) -> None:
        """After rows were copied with their integer ids: SQLite numbers new rows after the largest anyway."""

    def truncate_log(self) -> None:
        """After a large write: give the disk back what the write-ahead log grew to."""
        self.db.truncate_log()

    @property
    def trash_root(self) -> str:
        return os.path.join(self.home, TRASH_DIR)

    @property
    def locks_dir(self) -> str:
        return os.path.join(self.home, LOCKS_DIR)

    @property
    def log_path(self) -> str:
        return os.path.join(self.home, LOG_NAME)

    def new_id(self) -> str:
        return self.ids.new()

    def now(self) -> int:
        return self.clock()

    # -- sealing ---------------------------------------------------------------------------

    def _seal(self, text: str | None, context: str) -> bytes | None:
        return self.crypto.seal_text(text, context)

    def _seal_json(self, value: Any, context: str) -> bytes:
        return self.crypto.seal(json.dumps(value).encode("utf-8", "surrogateescape"), context.encode())

    def _seal_message(self, message: Message | None, context: str) -> bytes | None:
        return self._seal(message.dumps() if message is not None else None, context)

    def _open_message(self, sealed: bytes | None, context: str) -> Message | None:
        """A sealed message; an older store's English sentence comes back as a ``plain`` one."""
        text = self._open(sealed, context)
        return Message.loads(text) if text is not None else None

    def _open(self, sealed: bytes | None, context: str) -> str | None:
        if sealed is None:
            return None
        return self._open_bytes(sealed, context).decode("utf-8", "surrogateescape")

    def _open_bytes(self, sealed: bytes, context: str) -> bytes:
        """Open a sealed column value; a damaged one (or one moved from another row) says which record it is."""
        if not isinstance(sealed, bytes):
            raise RecordDamagedError(sealed_where(context))
        try:
            return self.crypto.open(sealed, context.encode("utf-8", "surrogateescape"))
        except BlobCorruptError as exc:
            raise RecordDamagedError(sealed_where(context)) from exc

    def _open_json(self, sealed: bytes, context: str) -> Any:
        return json.loads(self._open_bytes(sealed, context).decode("utf-8", "surrogateescape"))

    def path_id(self, scope: str, path: str) -> bytes:
        """The keyed id of *path* in *scope*: a project id, or ``OUTSIDE_SCOPE`` for an absolute outside path."""
        return self.crypto.path_id(scope, path)

    def _scoped_path_id(self, project_id: str, path: str, *, outside: bool) -> bytes:
        return self.path_id(OUTSIDE_SCOPE if outside else project_id, path)

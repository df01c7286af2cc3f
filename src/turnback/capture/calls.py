"""File-tool calls: keep the earlier state and what will be written, then write.

Each tool first works out every path it will change (folders it makes
included), stores the state before and the state after in one transaction,
and only then touches the disk, atomically. If the process dies in between,
the call stays ``running`` and shows as "may be cut short"; its record is
enough to take it back. If the write fails, the record is corrected to what
the disk holds and the call is marked failed.

A harness that writes files itself uses :class:`CallRecorder`:
``before(path)`` keeps the earlier state, ``after(path)`` what was written.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Sequence
from typing import NamedTuple

from turnback.capture.states import capture_state, probe_state, stored_state_for_bytes
from turnback.catalog import Message
from turnback.errors import RefusedError, TurnbackError, UnsafePathError, UsageError, error_message
from turnback.fsio import StagedFile, Tree, current_umask, default_file_mode
from turnback.model import ABSENT, CallId, Change, FileState, Project, Turn
from turnback.paths import RelPath, parent_paths
from turnback.store.api import StoreBackend

# A call's input is kept for ``show --input``; the file text it carries is in the copies already, so only
# its start is kept (it counts towards store.max_mib).
MAX_INPUT_TEXT = 4 * 1024


class CallTarget(NamedTuple):
    """Where a file-tool call runs: the store, the project's tree, the running turn.

    *done_later*: where a turn that runs only while its call does (an MCP server's tool turn) collects its
    calls, to mark them done in the write that ends it, rather than in a write of their own.
    """

    store: StoreBackend
    tree: Tree
    project: Project
    turn: Turn
    incognito: bool
    done_later: list[CallId] | None = None

    def writes(self, *, durable: bool = True) -> contextlib.AbstractContextManager[None]:
        """A write transaction of the call's records, which are its project's alone: in a store shared by many
        sessions, it waits only for that project's writes (``StoreBackend.transaction``)."""
        return self.store.transaction(durable=durable, project=self.project.id)


class Location(NamedTuple):
    """A path a tool writes: its tree and the path in it, and how it is recorded.

    A project path is recorded relative to the project root; a path outside
    the project (allowed by ``mode``) is recorded as an absolute path and
    written through the root's tree, never following a link on the way.
    ``uncovered`` says why no copy is kept (``mode`` manual or cautious).
    """

    tree: Tree
    rel: RelPath
    outside: bool = False
    uncovered: Message | None = None

    @property
    def recorded(self) -> str:
        return "/" + self.rel if self.outside else self.rel

    def at(self, rel: RelPath) -> Location:
        return Location(self.tree, rel, self.outside, self.uncovered)


class PlannedChange(NamedTuple):
    where: Location
    before: FileState
    after: FileState


def _input_json(**fields: object) -> str:
    return json.dumps(fields, ensure_ascii=False)


def _clip(text: str) -> str:
    if len(text) <= MAX_INPUT_TEXT:
        return text
    return text[:MAX_INPUT_TEXT] + f"… ({len(text) - MAX_INPUT_TEXT} more characters)"


def _kept_input(target: CallTarget, raw_input: str | None) -> str | None:
    """What is kept of a file tool's arguments: nothing in an incognito session (they hold file text)."""
    if target.incognito or not raw_input:
        return None
    return _clip(raw_input)


def _content_text(data: bytes) -> str:
    """The written content as call input text: its start, or what it is when it is not text."""
    head = data[:MAX_INPUT_TEXT]
    try:
        shown = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if len(data) <= MAX_INPUT_TEXT or exc.start < len(head) - 3:
            return f"(binary content, {len(data)} bytes)"
        shown = head[: exc.start].decode("utf-8")  # the clip fell inside a character
    rest = len(data) - len(shown.encode("utf-8"))
    return shown + f"… ({rest} more bytes)" if rest else shown


def new_folder_state() -> FileState:
    return FileState("dir", mode=0o777 & ~current_umask())


def _missing_parents(where: Location) -> list[Location]:
    """Folders above *where* that do not exist yet, outermost first; a file or link in the way is refused."""
    missing: list[Location] = []
    for folder in parent_paths(where.rel):
        if missing:
            missing.append(where.at(folder))
            continue
        entry = where.tree.lstat(folder)
        if entry is None:
            missing.append(where.at(folder))
        elif entry.is_symlink:
            raise UnsafePathError(Message("no_write_through_link", path=where.at(folder).recorded))
        elif not entry.is_dir:
            raise UsageError(Message("is_kind_not_folder", path=where.at(folder).recorded, kind=entry.kind_name()))
    return missing


def _refuse_non_file(where: Location, state: FileState) -> None:
    """A write goes to a file: a folder, link or special file in its place is refused."""
    path = where.recorded
    if state.kind == "dir":
        raise UsageError(Message("write_folder", path=path))
    if state.kind == "symlink":
        raise UnsafePathError(Message("no_write_through_link", path=path))
    if state.kind == "special":
        raise UnsafePathError(Message("write_special", path=path))


def _keeps_copies(target: CallTarget, where: Location) -> bool:
    return not target.incognito and where.uncovered is None


class StagedAct(NamedTuple):
    """An action whose first part makes nothing visible (*stage*: a temp file written and fsynced beside its
    name), so it runs while the call's record commits; its second part, the rename, waits for the durable
    record (:meth:`StagedFile.replace`)."""

    stage: Callable[[], StagedFile]


Prepared = tuple[list[PlannedChange], Callable[[], None] | StagedAct]


class _StagedThreads:
    """The threads that run staged actions, each kept for ``IDLE_S`` after its last one.

    A thread started for each write cost 0.2-4 ms of the call on this busy 2-core machine (``Thread.start``
    waits until the new thread runs, and a new thread queues behind every other), where a waiting thread
    is woken at once. An action (a temp file written, or a replaced file closed after its call) goes to a
    waiting thread, else to a new one, so none queues behind another. Idle, a thread ends. A waiting one holds
    no lock a forked child takes, so a large scan still forks (``capture/scan/split.py``, FORK_SAFE_THREADS).
    """

    IDLE_S = 5.0

    class _Waiting:
        def __init__(self, wake: threading.Condition):
            self.wake = wake
            self.job: Callable[[], None] | None = None

    def __init__(self) -> None:
        self._forget()
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        """No thread waits (a forked child has none of its parent's threads)."""
        self._lock = threading.Lock()
        self._waiting: list[_StagedThreads._Waiting] = []

    def run(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._waiting:
                waiting = self._waiting.pop()
                waiting.job = job
                waiting.wake.notify()
                return
        threading.Thread(target=self._serve, args=(job,), name="turnback-staged-write", daemon=True).start()

    def _serve(self, job: Callable[[], None] | None) -> None:
        me = self._Waiting(threading.Condition(self._lock))
        while job is not None:
            job()
            with self._lock:
                me.job = None
                self._waiting.append(me)
                me.wake.wait_for(lambda: me.job is not None, timeout=self.IDLE_S)
                if me.job is None:  # no action came: end (run() took it off the list if one did)
                    self._waiting.remove(me)
                job = me.job


_STAGED = _StagedThreads()


class _Overlap:
    """A :class:`StagedAct`'s temp file written and fsynced in another thread while the record commits (both wait
    on fsyncs, which release the GIL), so a write costs one sync less of wall time. The rename and the folder's
    fsync are the calling thread's, once the record is durable: the call waits for the other thread at most
    once (each wait for another thread costs a wake-up; on this machine's virtual CPUs 0.1 ms and more)."""

    def __init__(self, act: StagedAct) -> None:
        self._done = threading.Event()
        self._staged: StagedFile | None = None
        self._error: BaseException | None = None
        _STAGED.run(lambda: self._stage(act))

    def _stage(self, act: StagedAct) -> None:
        try:
            self._staged = act.stage()
        except BaseException as exc:
            self._error = exc
        finally:
            self._done.set()

    def replace(self) -> None:
        """The record is durable: make the change visible (raise what writing the temp file raised)."""
        self._wait()
        if self._error is not None:
            raise self._error
        assert self._staged is not None
        replaced = self._staged.replace(hold_replaced=True)
        if replaced is not None:
            _STAGED.run(lambda: os.close(replaced))  # frees the replaced file's blocks, after the call

    def refuse(self) -> None:
        """The record failed: the temp file is removed once it is written, and nothing is renamed."""
        self._wait()
        if self._staged is not None:
            self._staged.discard()

    def _wait(self) -> None:
        # Never go on while the thread is mid-write: an interrupt (Ctrl-C) waits for it, then goes on.
        interrupted: BaseException | None = None
        while not self._done.is_set():
            try:
                self._done.wait()
            except BaseException as exc:
                interrupted = exc
        if interrupted is not None:
            raise interrupted


def _perform(target: CallTarget, tool: str, raw_input: str, prepare: Callable[[], Prepared]) -> CallId:
    """Work out the call's changes and record them (one transaction), act, then settle the record.

    *prepare* reads the disk, stores the states, and returns the changes and
    the action that makes them; it raises to refuse the call. A
    :class:`StagedAct` starts while the record commits.
    """
    store = target.store
    overlap: _Overlap | None = None
    try:
        with target.writes():
            changes, act = prepare()
            call_id = store.create_call(target.turn, tool, _kept_input(target, raw_input))
            change_ids = []
            if not target.incognito:
                for seq, change in enumerate(changes):
                    where = change.where
                    change_ids.append(
                        store.add_change(
                            call_id,
                            seq,
                            target.project.id,
                            RelPath(where.recorded),
                            change.before,
                            change.after,
                            outside=where.outside,
                            not_covered=where.uncovered,
                        )
                    )
            if isinstance(act, StagedAct):
                overlap = _Overlap(act)  # last in the transaction: its commit is what the thread overlaps
    except BaseException:
        if overlap is not None:
            overlap.refuse()
        raise
    try:
        if overlap is not None:
            overlap.replace()
        elif not isinstance(act, StagedAct):
            act()
    except BaseException as exc:
        outcome = Message("failed_write_holds_before")
        with target.writes():
            for change_id, change in zip(change_ids, changes, strict=False):
                try:
                    actual = capture_state(change.where.tree, change.where.rel, store)
                except TurnbackError:
                    continue
                if actual.same_as(change.before):
                    store.delete_change(change_id)
                    outcome = Message("failed_write_holds_before")
                elif actual.same_as(change.after):
                    # The rename got through and a later step (the folder's fsync) failed.
                    outcome = Message("failed_write_holds_new")
                else:
                    store.set_change_after(change_id, actual, partial=True)
                    outcome = Message("failed_write_holds_neither")
            store.finish_call(call_id, "failed", error_message(exc))
        if isinstance(exc, OSError) and not isinstance(exc, TurnbackError):
            written = changes[-1].where.recorded if changes else tool
            raise UnsafePathError(
                Message("cannot_write", path=written, error=str(exc.strerror or exc), outcome=outcome)
            ) from exc
        raise
    # Losing this mark to a power cut only makes the call show "may be cut short", which it handles.
    if target.done_later is not None:
        target.done_later.append(call_id)
    else:
        with target.writes(durable=False):
            store.finish_call(call_id, "done")
    return call_id


def _content_plan(target: CallTarget, where: Location, data: bytes, before: FileState) -> list[PlannedChange]:
    parents = _missing_parents(where)
    mode = before.mode if before.kind == "file" and before.mode is not None else default_file_mode()
    if _keeps_copies(target, where):
        after = stored_state_for_bytes(target.store, data, mode)
    else:
        after = FileState("file", size=len(data), mode=mode)
    return [PlannedChange(folder, ABSENT, new_folder_state()) for folder in parents] + [
        PlannedChange(where, before, after)
    ]


def _stored_before(target: CallTarget, where: Location) -> FileState:
    """What the path holds, its content stored; without a copy to keep, only what kind of thing it is."""
    if _keeps_copies(target, where):
        return capture_state(where.tree, where.rel, target.store)
    try:
        return probe_state(where.tree, where.rel, target.store)._replace(blob=None)
    except UnsafePathError:
        entry = where.tree.lstat(where.rel)
        if where.uncovered is None or entry is None or not entry.is_file:
            raise
        return FileState("file", size=entry.size, mode=entry.permissions)  # unreadable: what its stat says


def _staged_write(where: Location, data: bytes, mode: int) -> StagedAct:
    """The atomic write of *data* to a path whose folder exists: its temp file is made while the record commits."""
    return StagedAct(lambda: where.tree.stage_file(where.rel, [data], mode))


def record_write(
    target: CallTarget, where: Location, data: bytes, *, tool: str = "write", raw_input: str | None = None
) -> CallId:
    """Write *data* (making missing folders), keeping what the path held before.

    *tool* and *raw_input* name the call as the agent made it (an MCP
    ``edit_file`` with several edits is recorded as the write of its result).
    """

    def prepare() -> Prepared:
        before = _stored_before(target, where)
        _refuse_non_file(where, before)
        changes = _content_plan(target, where, data, before)
        mode = changes[-1].after.mode or default_file_mode()
        if len(changes) > 1:  # folders to make first: they would show before the record is durable
            return changes, lambda: where.tree.write_atomic(where.rel, [data], mode, create_parents=True)
        return changes, _staged_write(where, data, mode)

    shown = raw_input if raw_input is not None else _input_json(path=where.recorded, content=_content_text(data))
    return _perform(target, tool, shown, prepare)


class TextEdit(NamedTuple):
    """One replacement of an edit: *old* text by *new*."""

    old: str
    new: str


class Edited(NamedTuple):
    """An edit's call (``None`` for a preview), and what the file held before and holds after."""

    call_id: CallId | None
    before: bytes
    after: bytes


def _edit_source(where: Location, max_file_mib: int) -> tuple[bytes, int]:
    """What the file to edit holds, and its permissions; refused when it is no regular file or is over
    *max_file_mib* (it is edited in memory: read never more than the limit, even if it grows meanwhile)."""
    path = where.recorded
    entry = where.tree.lstat(where.rel)
    if entry is None:
        raise UsageError(Message("edit_missing", path=path))
    if entry.is_dir:
        raise UsageError(Message("edit_folder", path=path))
    if not entry.is_file:
        raise UnsafePathError(Message("edit_not_regular", path=path, kind=entry.kind_name()))
    limit = max_file_mib << 20
    too_big = RefusedError(Message("edit_too_big", path=path, limit=max_file_mib))
    if entry.size > limit:
        raise too_big
    chunks, read = [], 0
    for chunk in where.tree.iter_chunks(where.rel):
        read += len(chunk)
        if read > limit:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks), entry.permissions


def _check_edits(edits: Sequence[TextEdit], *, numbered: bool) -> None:
    """Refuse, before the file is read, an edit that could change nothing (an unnumbered one's rule)."""
    if numbered:
        return
    for edit in edits:
        if not edit.old:
            raise UsageError(Message("edit_old_empty"))
        if edit.old == edit.new:
            raise UsageError(Message("edit_same_text"))


def edited_bytes(
    data: bytes, path: str, edits: Sequence[TextEdit], *, replace_all: bool = False, numbered: bool = False
) -> bytes:
    """*data* with each edit made in turn, on what the edits before it left.

    Each old text must occur once, or (unnumbered) every time with *replace_all*. *numbered*: the edits
    are a list the agent gave (an MCP ``edit_file``'s), named by number in what is refused.
    """
    for number, edit in enumerate(edits, 1):
        old, new = edit.old.encode("utf-8", "surrogateescape"), edit.new.encode("utf-8", "surrogateescape")
        count = data.count(old) if old else 0
        if numbered and count == 0:
            raise UsageError(Message("edit_numbered", number=number, why=Message("edit_old_missing", path=path)))
        if numbered and count > 1:
            raise UsageError(
                Message("edit_numbered", number=number, why=Message("edit_old_repeated", count=count, path=path))
            )
        if count == 0:
            raise UsageError(Message("edit_old_missing", path=path))
        if count > 1 and not replace_all:
            raise UsageError(Message("edit_old_ambiguous", count=count, path=path))
        data = data.replace(old, new, -1 if replace_all else 1)
    return data


def preview_edit(
    where: Location, edits: Sequence[TextEdit], *, max_file_mib: int, replace_all: bool = False, numbered: bool = False
) -> Edited:
    """What :func:`record_edit` would write, recording and writing nothing."""
    _check_edits(edits, numbered=numbered)
    data, _ = _edit_source(where, max_file_mib)
    return Edited(None, data, edited_bytes(data, where.recorded, edits, replace_all=replace_all, numbered=numbered))


def record_edit(
    target: CallTarget,
    where: Location,
    edits: Sequence[TextEdit],
    *,
    max_file_mib: int,
    replace_all: bool = False,
    numbered: bool = False,
    tool: str = "edit",
    raw_input: str | None = None,
) -> Edited:
    """Make *edits* in the file (see :func:`edited_bytes`), keeping what it held before.

    The edit is made in memory, so a file over *max_file_mib* (``snapshot.max_file_mib``) is refused
    before it is read: memory stays bounded, and no copy is recorded that the store cap would drop.
    *tool* and *raw_input* name the call as the agent made it (an MCP ``edit_file``).
    """
    _check_edits(edits, numbered=numbered)
    path = where.recorded
    contents: list[bytes] = []

    def prepare() -> Prepared:
        data, permissions = _edit_source(where, max_file_mib)
        edited = edited_bytes(data, path, edits, replace_all=replace_all, numbered=numbered)
        contents[:] = [data, edited]
        if _keeps_copies(target, where):
            blob, size = target.store.put_content([data])
            before = FileState("file", blob=blob, size=size, mode=permissions)
        else:
            before = FileState("file", size=len(data), mode=permissions)
        changes = _content_plan(target, where, edited, before)
        return changes, _staged_write(where, edited, permissions)

    if raw_input is None:
        (edit,) = edits
        raw_input = _input_json(path=path, old=edit.old, new=edit.new, all=replace_all)
    call_id = _perform(target, tool, raw_input, prepare)
    return Edited(call_id, *contents)


def record_delete(target: CallTarget, where: Location) -> CallId:
    """Delete the file, link or empty folder, keeping what it held."""
    path = where.recorded

    def prepare() -> Prepared:
        entry = where.tree.lstat(where.rel)
        if entry is None:
            raise UsageError(Message("path_missing", path=path))
        if not (entry.is_file or entry.is_symlink or entry.is_dir):
            raise UnsafePathError(Message("delete_special", path=path, kind=entry.kind_name()))
        if entry.is_dir and where.tree.has_entries(where.rel):
            raise UsageError(Message("delete_folder_not_empty", path=path))
        before = _stored_before(target, where)

        def act() -> None:
            if entry.is_dir:
                where.tree.rmdir(where.rel)
            else:
                where.tree.unlink(where.rel)

        return [PlannedChange(where, before, ABSENT)], act

    return _perform(target, "delete", _input_json(path=path), prepare)


def record_move(target: CallTarget, src: Location, dst: Location) -> CallId:
    """Move a file or link (replacing a file at the destination, making missing folders)."""
    if src.outside or dst.outside:
        raise UsageError(Message("move_outside"))
    if src.rel == dst.rel:
        raise UsageError(Message("move_same_path"))
    if dst.rel.startswith(src.rel + "/"):
        raise UsageError(Message("move_into_itself", path=src.rel))

    def prepare() -> Prepared:
        src_before = _stored_before(target, src)
        if not src_before.exists:
            raise UsageError(Message("path_missing", path=src.rel))
        if src_before.kind == "dir":
            raise UsageError(Message("move_folder", path=src.rel))
        if src_before.kind == "special":
            raise UnsafePathError(Message("move_special", path=src.rel))
        dst_before = _stored_before(target, dst)
        if dst_before.kind == "dir":
            raise UsageError(Message("move_onto_folder", path=dst.rel))
        if dst_before.kind == "special":
            raise UnsafePathError(Message("move_onto_special", path=dst.rel))
        changes = [PlannedChange(folder, ABSENT, new_folder_state()) for folder in _missing_parents(dst)]
        changes += [PlannedChange(src, src_before, ABSENT), PlannedChange(dst, dst_before, src_before)]
        return changes, lambda: src.tree.rename(src.rel, dst.rel, create_parents=True)

    return _perform(target, "move", _input_json(source=src.rel, destination=dst.rel), prepare)


def record_mkdir(target: CallTarget, where: Location) -> CallId:
    """Make the folder and any missing folders above it; an existing folder is left as it is."""

    def prepare() -> Prepared:
        entry = where.tree.lstat(where.rel)
        if entry is not None and not entry.is_dir:
            raise UsageError(Message("mkdir_exists_not_folder", path=where.recorded, kind=entry.kind_name()))
        if entry is not None:
            return [], lambda: None
        folders = [*_missing_parents(where), where]
        changes = [PlannedChange(folder, ABSENT, new_folder_state()) for folder in folders]
        return changes, lambda: where.tree.mkdir(where.rel, create_parents=True)

    return _perform(target, "mkdir", _input_json(path=where.recorded), prepare)


class CallRecorder:
    """A call whose files the harness writes itself: ``before(path)``, write, ``after(path)``."""

    def __init__(self, target: CallTarget, call_id: CallId):
        self.target = target
        self.id = call_id

    @classmethod
    def begin(cls, target: CallTarget, tool: str, raw_input: str | None) -> CallRecorder:
        with target.writes():
            call_id = target.store.create_call(target.turn, tool, _kept_input(target, raw_input))
        return cls(target, call_id)

    def _next_seq(self) -> int:
        return len(self.target.store.changes_of_call(self.id))

    def before(self, where: Location) -> None:
        """Keep what the path (and each missing folder above it) holds before the harness writes it."""
        if self.target.incognito:
            return
        store = self.target.store
        with self.target.writes():
            recorded = {change.path for change in store.changes_of_call(self.id)}
            if where.recorded in recorded:
                return
            seq = self._next_seq()
            for folder in [*_missing_parents(where), where]:
                if folder.recorded in recorded:
                    continue
                state = ABSENT if folder is not where else _stored_before(self.target, where)
                store.add_change(
                    self.id,
                    seq,
                    self.target.project.id,
                    RelPath(folder.recorded),
                    state,
                    None,
                    partial=True,
                    outside=folder.outside,
                    not_covered=folder.uncovered,
                )
                seq += 1

    def recorded_before(self, where: Location) -> FileState | None:
        """What ``before`` kept of *where* in this call, if it was called."""
        for change in self.target.store.changes_of_call(self.id):
            if change.path == where.recorded:
                return change.before
        return None

    def after(self, where: Location) -> None:
        """Record what the path (and the folders ``before`` found missing) holds after the write."""
        if self.target.incognito:
            return
        store = self.target.store
        with self.target.writes():
            recorded: dict[str, Change] = {change.path: change for change in store.changes_of_call(self.id)}
            if where.recorded not in recorded:
                raise UsageError(Message("call_after_without_before", path=where.recorded))
            for folder in [*(where.at(p) for p in parent_paths(where.rel)), where]:
                change = recorded.get(folder.recorded)
                if change is None or change.after is not None:
                    continue
                actual = _stored_before(self.target, folder)
                if actual.same_as(change.before):
                    store.delete_change(change.id)
                else:
                    store.set_change_after(change.id, actual, partial=False)

    def finish(self, *, failed: Message | None = None) -> None:
        with self.target.writes():
            self.target.store.finish_call(self.id, "failed" if failed else "done", failed)


__all__ = [
    "CallRecorder",
    "CallTarget",
    "Edited",
    "Location",
    "TextEdit",
    "edited_bytes",
    "preview_edit",
    "record_delete",
    "record_edit",
    "record_mkdir",
    "record_move",
    "record_write",
]

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

import json
from collections.abc import Callable
from dataclasses import dataclass

from turnback.capture.states import capture_state, probe_state, stored_state_for_bytes
from turnback.errors import TurnbackError, UnsafePathError, UsageError
from turnback.fsio import Tree, current_umask, default_file_mode
from turnback.model import ABSENT, CallId, FileState, Project, Turn
from turnback.paths import RelPath, parent_paths
from turnback.store import Store

MAX_INPUT_TEXT = 64 * 1024


@dataclass(frozen=True, slots=True)
class CallTarget:
    """Where a file-tool call runs: the store, the project's tree, the running turn."""

    store: Store
    tree: Tree
    project: Project
    turn: Turn
    incognito: bool


@dataclass(frozen=True, slots=True)
class PlannedChange:
    path: RelPath
    before: FileState
    after: FileState


def _input_json(**fields: object) -> str:
    return json.dumps(fields, ensure_ascii=False)


def _clip(text: str) -> str:
    if len(text) <= MAX_INPUT_TEXT:
        return text
    return text[:MAX_INPUT_TEXT] + f"… ({len(text) - MAX_INPUT_TEXT} more characters)"


def _content_text(data: bytes) -> str:
    """The written content as call input text: the first 64 KiB, decoded for display."""
    shown = data[:MAX_INPUT_TEXT].decode("utf-8", "replace")
    return shown if len(data) <= MAX_INPUT_TEXT else shown + f"… ({len(data) - MAX_INPUT_TEXT} more bytes)"


def new_folder_state() -> FileState:
    return FileState("dir", mode=0o777 & ~current_umask())


def _missing_parents(target: CallTarget, path: RelPath) -> list[RelPath]:
    """Folders above *path* that do not exist yet, outermost first; a file or link in the way is refused."""
    missing: list[RelPath] = []
    for folder in parent_paths(path):
        if missing:
            missing.append(folder)
            continue
        entry = target.tree.lstat(folder)
        if entry is None:
            missing.append(folder)
        elif entry.is_symlink:
            raise UnsafePathError(f"{folder} is a symbolic link; turnback does not write through links")
        elif not entry.is_dir:
            raise UsageError(f"{folder} is {entry.kind_name()}, not a folder")
    return missing


def _refuse_non_file(path: RelPath, state: FileState, verb: str) -> None:
    if state.kind == "dir":
        raise UsageError(f"{path} is a folder; turnback can only {verb} a file")
    if state.kind == "symlink":
        raise UnsafePathError(f"{path} is a symbolic link; turnback does not {verb} through links")
    if state.kind == "special":
        raise UnsafePathError(f"{path} is a FIFO, socket or device; turnback does not {verb} it")


Prepared = tuple[list[PlannedChange], Callable[[], None]]


def _perform(target: CallTarget, tool: str, raw_input: str, prepare: Callable[[], Prepared]) -> CallId:
    """Work out the call's changes and record them (one transaction), act, then settle the record.

    *prepare* reads the disk, stores the states, and returns the changes and
    the action that makes them; it raises to refuse the call.
    """
    store = target.store
    with store.transaction():
        changes, act = prepare()
        call_id = store.create_call(target.turn, tool, _clip(raw_input))
        change_ids = []
        if not target.incognito:
            for seq, change in enumerate(changes):
                change_ids.append(
                    store.add_change(call_id, seq, target.project.id, change.path, change.before, change.after)
                )
    try:
        act()
    except BaseException as exc:
        with store.transaction():
            for change_id, change in zip(change_ids, changes, strict=False):
                try:
                    actual = capture_state(target.tree, change.path, store)
                except TurnbackError:
                    continue
                if actual.same_as(change.before):
                    store.delete_change(change_id)
                elif not actual.same_as(change.after):
                    store.set_change_after(change_id, actual, partial=True)
            store.finish_call(call_id, "failed", str(exc) or type(exc).__name__)
        raise
    # Losing this mark to a power cut only makes the call show "may be cut short", which it handles.
    with store.transaction(durable=False):
        store.finish_call(call_id, "done")
    return call_id


def _content_plan(target: CallTarget, path: RelPath, data: bytes, before: FileState) -> list[PlannedChange]:
    parents = _missing_parents(target, path)
    mode = before.mode if before.kind == "file" and before.mode is not None else default_file_mode()
    after = stored_state_for_bytes(target.store, data, mode) if not target.incognito else FileState("file", mode=mode)
    return [PlannedChange(folder, ABSENT, new_folder_state()) for folder in parents] + [
        PlannedChange(path, before, after)
    ]


def _stored_before(target: CallTarget, path: RelPath) -> FileState:
    if target.incognito:
        return probe_state(target.tree, path, target.store)
    return capture_state(target.tree, path, target.store)


def record_write(target: CallTarget, path: RelPath, data: bytes) -> CallId:
    """Write *data* to *path* (making missing folders), keeping what it held before."""

    def prepare() -> Prepared:
        before = _stored_before(target, path)
        _refuse_non_file(path, before, "write")
        changes = _content_plan(target, path, data, before)
        mode = changes[-1].after.mode or default_file_mode()
        return changes, lambda: target.tree.write_atomic(path, [data], mode, create_parents=True)

    return _perform(target, "write", _input_json(path=path, content=_content_text(data)), prepare)


def record_edit(target: CallTarget, path: RelPath, old: str, new: str, *, replace_all: bool = False) -> CallId:
    """Replace *old* with *new* in *path*: exactly once, or every time with *replace_all*."""
    if not old:
        raise UsageError("the old text is empty; give the text to replace")
    if old == new:
        raise UsageError("the old and the new text are the same; nothing would change")

    def prepare() -> Prepared:
        entry = target.tree.lstat(path)
        if entry is None:
            raise UsageError(f"{path} does not exist; use write to create it")
        if entry.is_dir:
            raise UsageError(f"{path} is a folder; turnback can only edit a file")
        if not entry.is_file:
            raise UnsafePathError(
                f"{path} is {entry.kind_name()}; turnback edits only regular files, never through links"
            )
        data = target.tree.read_bytes(path)
        old_bytes, new_bytes = old.encode("utf-8"), new.encode("utf-8")
        count = data.count(old_bytes)
        if count == 0:
            raise UsageError(f"the old text is not in {path}; nothing was changed")
        if count > 1 and not replace_all:
            raise UsageError(
                f"the old text occurs {count} times in {path}; give more of the text around it, or use --all"
            )
        edited = data.replace(old_bytes, new_bytes, -1 if replace_all else 1)
        if target.incognito:
            before = FileState("file", size=len(data), mode=entry.permissions)
        else:
            blob, size = target.store.put_content([data])
            before = FileState("file", blob=blob, size=size, mode=entry.permissions)
        changes = _content_plan(target, path, edited, before)
        return changes, lambda: target.tree.write_atomic(path, [edited], entry.permissions)

    return _perform(target, "edit", _input_json(path=path, old=old, new=new, all=replace_all), prepare)


def record_delete(target: CallTarget, path: RelPath) -> CallId:
    """Delete the file, link or empty folder at *path*, keeping what it held."""

    def prepare() -> Prepared:
        entry = target.tree.lstat(path)
        if entry is None:
            raise UsageError(f"{path} does not exist")
        if not (entry.is_file or entry.is_symlink or entry.is_dir):
            raise UnsafePathError(f"{path} is {entry.kind_name()}; turnback does not delete it")
        if entry.is_dir and target.tree.has_entries(path):
            raise UsageError(f"{path} is a folder with files in it; delete its files first")
        before = _stored_before(target, path)
        act = (lambda: target.tree.rmdir(path)) if entry.is_dir else (lambda: target.tree.unlink(path))
        return [PlannedChange(path, before, ABSENT)], act

    return _perform(target, "delete", _input_json(path=path), prepare)


def record_move(target: CallTarget, src: RelPath, dst: RelPath) -> CallId:
    """Move the file or link *src* to *dst* (replacing a file there, making missing folders)."""
    if src == dst:
        raise UsageError("the source and the destination are the same path")
    if dst.startswith(src + "/"):
        raise UsageError(f"cannot move {src} into itself")

    def prepare() -> Prepared:
        src_before = _stored_before(target, src)
        if not src_before.exists:
            raise UsageError(f"{src} does not exist")
        if src_before.kind == "dir":
            raise UsageError(f"{src} is a folder; turnback moves files and links (run the move with exec)")
        if src_before.kind == "special":
            raise UnsafePathError(f"{src} is a FIFO, socket or device; turnback does not move it")
        dst_before = _stored_before(target, dst)
        if dst_before.kind == "dir":
            raise UsageError(f"{dst} is a folder; give the full path of the file to move to")
        if dst_before.kind == "special":
            raise UnsafePathError(f"{dst} is a FIFO, socket or device; turnback does not write over it")
        changes = [PlannedChange(folder, ABSENT, new_folder_state()) for folder in _missing_parents(target, dst)]
        changes += [PlannedChange(src, src_before, ABSENT), PlannedChange(dst, dst_before, src_before)]
        return changes, lambda: target.tree.rename(src, dst, create_parents=True)

    return _perform(target, "move", _input_json(source=src, destination=dst), prepare)


def record_mkdir(target: CallTarget, path: RelPath) -> CallId:
    """Make the folder *path* and any missing folders above it; an existing folder is left as it is."""

    def prepare() -> Prepared:
        entry = target.tree.lstat(path)
        if entry is not None and not entry.is_dir:
            raise UsageError(f"{path} exists and is {entry.kind_name()}, not a folder")
        if entry is not None:
            return [], lambda: None
        folders = [*_missing_parents(target, path), path]
        changes = [PlannedChange(folder, ABSENT, new_folder_state()) for folder in folders]
        return changes, lambda: target.tree.mkdir(path, create_parents=True)

    return _perform(target, "mkdir", _input_json(path=path), prepare)


class CallRecorder:
    """A call whose files the harness writes itself: ``before(path)``, write, ``after(path)``."""

    def __init__(self, target: CallTarget, call_id: CallId):
        self.target = target
        self.id = call_id

    @classmethod
    def begin(cls, target: CallTarget, tool: str, raw_input: str | None) -> CallRecorder:
        with target.store.transaction():
            call_id = target.store.create_call(target.turn, tool, _clip(raw_input) if raw_input else None)
        return cls(target, call_id)

    def _next_seq(self) -> int:
        row = self.target.store.db.one("SELECT COALESCE(MAX(seq), -1) FROM changes WHERE call_id=?", (self.id,))
        return int(row[0]) + 1

    def _recorded(self) -> dict[RelPath, int]:
        return {change.path: change.id for change in self.target.store.changes_of_call(self.id)}

    def before(self, path: RelPath) -> None:
        """Keep what *path* (and each missing folder above it) holds before the harness writes it."""
        if self.target.incognito:
            return
        store = self.target.store
        with store.transaction():
            recorded = self._recorded()
            if path in recorded:
                return
            seq = self._next_seq()
            for folder in _missing_parents(self.target, path):
                if folder not in recorded:
                    store.add_change(self.id, seq, self.target.project.id, folder, ABSENT, None, partial=True)
                    seq += 1
            before = capture_state(self.target.tree, path, store)
            store.add_change(self.id, seq, self.target.project.id, path, before, None, partial=True)

    def after(self, path: RelPath) -> None:
        """Record what *path* (and the folders ``before`` found missing) holds after the write."""
        if self.target.incognito:
            return
        store = self.target.store
        with store.transaction():
            recorded = {change.path: change for change in store.changes_of_call(self.id)}
            if path not in recorded:
                raise UsageError(f"the call never recorded the state of {path} before writing it; call before() first")
            for folder in [*parent_paths(path), path]:
                change = recorded.get(folder)
                if change is None or change.after is not None:
                    continue
                actual = capture_state(self.target.tree, folder, store)
                if actual.same_as(change.before):
                    store.delete_change(change.id)
                else:
                    store.set_change_after(change.id, actual, partial=False)

    def finish(self, *, failed: str | None = None) -> None:
        with self.target.store.transaction():
            self.target.store.finish_call(self.id, "failed" if failed else "done", failed)


__all__ = [
    "CallRecorder",
    "CallTarget",
    "record_delete",
    "record_edit",
    "record_mkdir",
    "record_move",
    "record_write",
]

"""File tools: write, edit, delete, move, make a folder and read for the assistant, and calls whose files a
harness writes itself (:class:`CallHandle`). Every one keeps what a path held before it changes it."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from turnback.capture import calls as capture
from turnback.capture.calls import CallRecorder, CallTarget, Location, TextEdit
from turnback.catalog import Message
from turnback.errors import (
    RefusedError,
    TurnbackError,
    UncoveredError,
    UnsafePathError,
    UsageError,
    as_message,
    error_message,
)
from turnback.fsio import Tree
from turnback.model import Call, Project, SessionId

from .values import TextEdited

if TYPE_CHECKING:
    from .facade import Engine


class CallHandle:
    """A call whose files the harness writes itself: ``before(path)``, write, ``after(path)``, ``end()``."""

    def __init__(self, engine: Engine, recorder: CallRecorder, cwd: str | None):
        self._engine = engine
        self._recorder = recorder
        self._cwd = cwd
        self.id = recorder.id

    def _path(self, path: str) -> Location:
        return self._engine._paths.locate(self._recorder.target.project, path, self._cwd)

    def _link_target(self, where: Location, link: str | None) -> Location | None:
        """Where the link *where* (pointing at *link*) leads, when a write through it can land there."""
        if link is None:
            return None
        folder = os.path.dirname(os.path.join(where.tree.root, where.rel))
        try:
            target = self._path(os.path.realpath(os.path.join(folder, link)))
        except TurnbackError:
            return None  # the store, or outside a confined root: nothing there is written through it
        return target if target.recorded != where.recorded else None

    def before(self, path: str, *, uncovered: bool = False) -> None:
        """Keep what *path* holds; when it is a link, what it leads to as well (a harness may write through it).

        A copy turnback cannot keep is refused (:class:`UncoveredError`), unless *uncovered*: then the path is
        recorded as not covered, and the change cannot be undone.
        """
        where = self._path(path)
        entry = where.tree.lstat(where.rel)
        target = None
        if entry is not None and entry.is_symlink:
            target = self._link_target(where, os.readlink(os.path.join(where.tree.root, where.rel)))
        kept = self._engine._tools.keepable(
            self._recorder.target, [where] if target is None else [where, target], uncovered
        )
        for location in kept:
            self._recorder.before(location)

    def after(self, path: str) -> None:
        """Record what *path* (and, when it was a link, what it led to) holds after the write."""
        where = self._path(path)
        was = self._recorder.recorded_before(where)
        self._recorder.after(where)
        target = self._link_target(where, was.target if was is not None and was.kind == "symlink" else None)
        if target is not None and self._recorder.recorded_before(target) is not None:
            self._recorder.after(target)

    def end(self, *, failed: Message | str | None = None, after: Sequence[str] = ()) -> Call:
        """End the call, as failed when *failed* says why (a harness's own text is kept as it is); *after*:
        paths to record :meth:`after` for first, in the same write."""
        with self._engine.store.transaction():
            for path in after:
                self.after(path)
            self._recorder.finish(failed=as_message(failed) if failed is not None else None)
        return self._engine.store.call(self.id)

    def __enter__(self) -> CallHandle:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.end(failed=error_message(exc) if exc is not None else None)


def _shown_input(raw_input: object) -> str | None:
    """A call's input as recorded: text as it is, anything else as JSON."""
    return None if raw_input is None else raw_input if isinstance(raw_input, str) else json.dumps(raw_input)


class FileTools:
    """The file-tools facet of an :class:`~turnback.engine.Engine`."""

    def __init__(self, engine: Engine):
        self._engine = engine
        self._store = engine.store
        # Each session's project and whether it is incognito, read once: neither ever changes (an MCP server
        # writes in one session all along, and each call would read both again).
        self._session_places: dict[SessionId, tuple[Project, bool]] = {}

    def target(self, session_id: SessionId) -> CallTarget:
        """Where a call of the session is recorded: its project's tree and its running turn."""
        sessions = self._engine._sessions
        turn = sessions.current_turn(session_id)
        place = self._session_places.get(session_id)
        if place is None:
            session = self._store.session(session_id)
            place = self._session_places[session_id] = (sessions.project_of(session), session.incognito)
        project, incognito = place
        return CallTarget(self._store, Tree(project.root), project, turn, incognito, sessions.done_later(session_id))

    def _writable(
        self, session_id: SessionId, target: CallTarget, path: str, cwd: str | None, *, follow_last: bool = True
    ) -> Location:
        """Where *path* is written, unless the file was reverted since the assistant last read it (then refused).

        A file the revert removed has nothing to read: writing it anew is fine.
        """
        where = self._engine._paths.locate(target.project, path, cwd, follow_last=follow_last)
        if self._store.must_read(session_id, where.recorded) and where.tree.lstat(where.rel) is not None:
            raise RefusedError(Message("reverted_since_read", path=where.recorded))
        return where

    def write(
        self,
        session_id: SessionId,
        path: str,
        data: bytes,
        *,
        cwd: str | None = None,
        tool: str = "write",
        raw_input: object = None,
        uncovered: bool = False,
    ) -> Call:
        """Write *data* to *path* (making missing folders), keeping what it held before.

        Every file tool refuses (:class:`UncoveredError`) to destroy what it cannot keep a copy of (see
        :meth:`keepable`); *uncovered* goes ahead, and records the change as one that cannot be undone.
        """
        target = self.target(session_id)
        (where,) = self.keepable(target, [self._writable(session_id, target, path, cwd)], uncovered)
        return self._store.call(capture.record_write(target, where, data, tool=tool, raw_input=_shown_input(raw_input)))

    def edit(
        self,
        session_id: SessionId,
        path: str,
        edits: Sequence[TextEdit],
        *,
        replace_all: bool = False,
        numbered: bool = False,
        cwd: str | None = None,
        uncovered: bool = False,
        dry_run: bool = False,
        tool: str = "edit",
        raw_input: object = None,
    ) -> TextEdited:
        """Make *edits* in *path*, each on what the ones before left: each old text must occur once, or
        every time with *replace_all*. *numbered*: a list the agent gave, named by number in what is
        refused. *dry_run*: what the edit would write, recording and changing nothing."""
        if dry_run:
            project = self._engine._sessions.project_of_session(session_id)
            where = self._engine._paths.locate(project, path, cwd)
            limit = self._engine.config_for(project).max_file_mib
            preview = capture.preview_edit(where, edits, max_file_mib=limit, replace_all=replace_all, numbered=numbered)
            return TextEdited(None, where.recorded, preview.before, preview.after)
        target = self.target(session_id)
        (where,) = self.keepable(target, [self._writable(session_id, target, path, cwd)], uncovered)
        edited = capture.record_edit(
            target,
            where,
            edits,
            max_file_mib=self._engine.config_for(target.project).max_file_mib,
            replace_all=replace_all,
            numbered=numbered,
            tool=tool,
            raw_input=_shown_input(raw_input),
        )
        call = self._store.call(edited.call_id) if edited.call_id else None
        return TextEdited(call, where.recorded, edited.before, edited.after)

    def delete(self, session_id: SessionId, path: str, *, cwd: str | None = None, uncovered: bool = False) -> Call:
        target = self.target(session_id)
        where = self._writable(session_id, target, path, cwd, follow_last=False)
        (where,) = self.keepable(target, [where], uncovered)
        return self._store.call(capture.record_delete(target, where))

    def move(
        self,
        session_id: SessionId,
        src: str,
        dst: str,
        *,
        cwd: str | None = None,
        uncovered: bool = False,
        replace: bool = True,
    ) -> Call:
        """Move a file, link or folder; *replace* False refuses a destination that exists.

        A folder moves as a command (``mv``) whose change the scans record: the user takes it back like
        any other call.
        """
        target = self.target(session_id)
        wheres = [self._writable(session_id, target, path, cwd, follow_last=False) for path in (src, dst)]
        if not replace and wheres[1].tree.lstat(wheres[1].rel) is not None:
            raise RefusedError(Message("destination_exists", path=dst))
        entry = wheres[0].tree.lstat(wheres[0].rel)
        if entry is not None and entry.is_dir and not any(where.outside for where in wheres):
            return self._move_folder(session_id, src, dst, *(os.path.join(target.project.root, w.rel) for w in wheres))
        kept = self.keepable(target, wheres, uncovered)
        reason = next((where.uncovered for where in kept if where.uncovered), None)
        if reason is not None:  # a move's two states are one content: without a copy of it, neither is covered
            kept = [where._replace(uncovered=where.uncovered or reason) for where in kept]
        return self._store.call(capture.record_move(target, kept[0], kept[1]))

    def _move_folder(self, session_id: SessionId, src: str, dst: str, src_path: str, dst_path: str) -> Call:
        result = self._engine._commands.run_command(session_id, ["mv", "--", src_path, dst_path])
        if result.exit_code != 0:
            raise RefusedError(Message("folder_move_failed", src=src, dst=dst, status=result.exit_code))
        return result.call

    def mkdir(self, session_id: SessionId, path: str, *, cwd: str | None = None) -> Call:
        target = self.target(session_id)
        return self._store.call(capture.record_mkdir(target, self._engine._paths.locate(target.project, path, cwd)))

    def read(self, session_id: SessionId, path: str, *, cwd: str | None = None) -> bytes:
        """Read a file for the assistant; a file reverted since it last read it may be changed again."""
        project = self._engine._sessions.project_of_session(session_id)
        where = self._engine._paths.locate(project, path, cwd)
        try:
            data = where.tree.read_bytes(where.rel)
        except FileNotFoundError:
            raise UsageError(Message("file_does_not_exist", path=where.recorded)) from None
        with self._store.transaction():
            self._store.mark_read(session_id, where.recorded)
        return data

    def keepable(self, target: CallTarget, wheres: Sequence[Location], uncovered: bool = False) -> list[Location]:
        """*wheres*, when turnback can keep a copy of what each holds before a call overwrites or removes it.

        The one rule for every file tool: a copy the call needs must fit ``store.max_mib`` beside what the
        running turn keeps already (the cap never drops the newest turn's copies, so a copy that does not
        fit would put the store over its cap), and the file must be readable. Otherwise the call is refused
        (:class:`UncoveredError`, nothing changed); with *uncovered* the paths come back marked not covered
        with the reason, so the change is recorded as one that cannot be undone and every view says so.
        An incognito session, and an outside path the mode copies nothing of, keep no copy anyway.
        """
        from turnback.ops import maintenance
        from turnback.render.diff import human_size

        if target.incognito:
            return list(wheres)
        max_mib = self._engine.config.store_max_mib
        sized: list[tuple[int, int]] = []  # (index, size) of each file whose copy the call needs
        refused: dict[int, Message] = {}
        for index, where in enumerate(wheres):
            entry = where.tree.lstat(where.rel) if where.uncovered is None else None
            if entry is None or not entry.is_file:
                continue
            try:
                with where.tree.open_file(where.rel):
                    pass
            except FileNotFoundError:
                continue
            except UnsafePathError as exc:
                refused[index] = Message("copy_unreadable", why=exc.message)
                continue
            sized.append((index, entry.size))
        # The exact figure reads every copy of the turn: read it only when a bound that costs nothing while no
        # other process writes says a copy may not fit.
        cap = max_mib << 20
        if sized and self._store.turn_kept_bytes_at_most(target.turn.id) + sum(size for _, size in sized) > cap:
            kept = maintenance.turn_kept_bytes(self._store, target.turn.id)
            needed = kept
            for index, size in sized:
                if needed + size <= cap:
                    needed += size
                    continue
                if size <= cap and self._already_kept(wheres[index]):
                    continue  # e.g. what an earlier call of the turn wrote: its copy costs nothing more
                refused[index] = Message(
                    "copy_over_cap_beside_turn" if kept else "copy_over_cap",
                    size=human_size(size),
                    max_mib=max_mib,
                    kept=human_size(kept),
                )
        if not refused:
            return list(wheres)
        if not uncovered:
            raise UncoveredError(tuple((wheres[i].recorded, reason) for i, reason in sorted(refused.items())))
        return [where._replace(uncovered=refused[i]) if i in refused else where for i, where in enumerate(wheres)]

    def _already_kept(self, where: Location) -> bool:
        """Whether the store holds what *where* holds now (its copy is content-addressed): read and hashed only
        when the cap would refuse it otherwise."""
        from turnback.capture.states import probe_state

        try:
            state = probe_state(where.tree, where.rel, self._store)
        except (OSError, UnsafePathError):
            return False
        return state.blob is not None and self._store.blobs.has(state.blob)

    def begin_call(
        self,
        session_id: SessionId,
        tool: str,
        raw_input: object = None,
        *,
        cwd: str | None = None,
        external_id: tuple[str, str] | None = None,
        before: Sequence[str] = (),
        uncovered: bool = False,
    ) -> CallHandle:
        """Start a call whose files the harness writes itself (see :class:`CallHandle`).

        *external_id* (harness, id), e.g. a tool use id, lets another process find the call again.
        *before*: paths to record :meth:`CallHandle.before` for now, in the same write (one fsync, not three:
        a hook's agent waits for it). A copy of one that turnback cannot keep refuses the call, nothing
        recorded (:class:`UncoveredError`), unless *uncovered* (see :meth:`keepable`).
        """
        target = self.target(session_id)
        with self._store.transaction():
            handle = CallHandle(self._engine, CallRecorder.begin(target, tool, _shown_input(raw_input)), cwd)
            if external_id is not None:
                self._store.set_call_external_id(handle.id, self._store.external_id(*external_id))
            for path in before:
                handle.before(path, uncovered=uncovered)
        return handle

    def external_call(self, session_id: SessionId, harness: str, external: str) -> Call | None:
        """The call a harness knows by its own id (begun by another process), if any."""
        call_id = self._store.call_by_external_id(session_id, self._store.external_id(harness, external))
        return self._store.call(call_id) if call_id else None

    def resume_call(self, call_ref: str, *, cwd: str | None = None) -> CallHandle:
        """The handle of a call begun earlier (by another process), to record ``after`` and end it."""
        call = self._engine._history.call(call_ref)
        session = self._store.session(call.session_id)
        project = self._engine._sessions.project_of(session)
        target = CallTarget(self._store, Tree(project.root), project, self._store.turn(call.turn_id), session.incognito)
        return CallHandle(self._engine, CallRecorder(target, call.id), cwd)


__all__ = ["CallHandle", "FileTools"]

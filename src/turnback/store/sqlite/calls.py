"""Calls and their changes: recording a call and what it changed, and finding other calls on the same path."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Set

from turnback.catalog import Message
from turnback.errors import RecordDamagedError, UsageError
from turnback.model import (
    Call,
    CallId,
    CallKind,
    CallStatus,
    Change,
    FileState,
    ProjectId,
    SessionId,
    Turn,
    TurnId,
)
from turnback.paths import RelPath
from turnback.store.records import CallProcesses, CallSnapshots, OverlappingCall, PathKey, RunningCommand
from turnback.store.sqlite.base import (
    CALL_KINDS,
    CALL_STATUSES,
    STATE_KINDS,
    SqliteRecords,
    checked_blob_id,
    checked_choice,
    checked_int,
    record_item,
    record_named,
    state_columns,
)

_CALL_COLUMNS = ", ".join(
    f"calls.{column} AS {column}"
    for column in (
        "id",
        "turn_id",
        "session_id",
        "tool",
        "input_enc",
        "status",
        "started_at",
        "ended_at",
        "error_enc",
        "kind",
        "exit_code",
        "pid",
        "late",
        "unasked",
    )
)
# Paths asked about in one query: each is a bound parameter, well under SQLite's and PostgreSQL's limits.
_PATHS_PER_QUERY = 500


def _asked(by_id: dict[bytes, PathKey], path_id: object) -> PathKey | None:
    """The path asked about that a row's *path_id* names; ``None`` for a row no path asked about matches (only a
    damaged index gives one: the row is not taken for another path's)."""
    return by_id.get(path_id) if isinstance(path_id, bytes) else None


_CHANGE_COLUMNS = (
    "id, call_id, seq, path_enc, before_kind, before_blob, before_size, before_mode, before_target_enc,"
    " after_kind, after_blob, after_size, after_mode, after_target_enc, partial, evicted, reverted,"
    " outside, not_covered_enc"
)


def _copy_bytes(state: FileState | None) -> int:
    """The content size a state's copy keeps, if it names one."""
    return (state.size or 0) if state is not None and state.blob is not None else 0


class CallQueries(SqliteRecords):
    # -- calls -------------------------------------------------------------------------------

    def create_call(
        self,
        turn: Turn,
        tool: str,
        raw_input: str | None,
        *,
        kind: CallKind = "tool",
        snapshot_id: str | None = None,
        baseline_id: str | None = None,
        unasked: bool = False,
    ) -> CallId:
        call_id = CallId(self.new_id())
        self.db.execute(
            "INSERT INTO calls(id, turn_id, session_id, tool, input_enc, status, started_at, kind, snapshot_id,"
            " baseline_id, unasked)"
            " VALUES(?,?,?,?,?,?,?,?,?,?,?)",
            (
                call_id,
                turn.id,
                turn.session_id,
                tool,
                self._seal(raw_input, f"calls.input:{call_id}"),
                "running",
                self.now(),
                kind,
                snapshot_id,
                baseline_id,
                int(unasked),
            ),
        )
        return call_id

    def finish_call(
        self,
        call_id: CallId,
        status: CallStatus,
        error: Message | None = None,
        *,
        exit_code: int | None = None,
        late: bool = False,
    ) -> None:
        self.db.execute(
            "UPDATE calls SET status=?, ended_at=?, error_enc=?, exit_code=?, late=? WHERE id=?",
            (status, self.now(), self._seal_message(error, f"calls.error:{call_id}"), exit_code, int(late), call_id),
        )

    def _call_from_row(self, row: sqlite3.Row, *, with_changes: bool = True) -> Call:
        call_id = CallId(row["id"])
        what = record_named(Message("record_noun_call"), call_id)
        if not isinstance(row["tool"], str):
            raise RecordDamagedError(what)
        return Call(
            id=call_id,
            turn_id=TurnId(row["turn_id"]),
            session_id=SessionId(row["session_id"]),
            tool=row["tool"],
            input=self._open(row["input_enc"], f"calls.input:{call_id}"),
            status=checked_choice(row["status"], CALL_STATUSES, what),
            started_at=checked_int(row["started_at"], what, optional=False),
            ended_at=checked_int(row["ended_at"], what),
            error=self._open_message(row["error_enc"], f"calls.error:{call_id}"),
            changes=self.changes_of_call(call_id) if with_changes else (),
            kind=checked_choice(row["kind"], CALL_KINDS, what),
            exit_code=checked_int(row["exit_code"], what),
            pid=checked_int(row["pid"], what),
            late=bool(row["late"]),
            unasked=bool(row["unasked"]),
        )

    def call(self, call_id: CallId) -> Call:
        row = self.db.one(f"SELECT {_CALL_COLUMNS} FROM calls WHERE id=?", (call_id,))
        if row is None:
            raise UsageError(Message("no_such_call", call=call_id))
        return self._call_from_row(row)

    def calls_of_turn(self, turn_id: TurnId) -> tuple[Call, ...]:
        rows = self.db.all(f"SELECT {_CALL_COLUMNS} FROM calls WHERE turn_id=? ORDER BY calls.rowid", (turn_id,))
        return tuple(self._call_from_row(row) for row in rows)

    # -- commands and jobs: their processes and snapshots --------------------------------------

    def set_call_processes(
        self,
        call_id: CallId,
        *,
        pid: int | None = None,
        pid_start: int | None = None,
        watcher_pid: int | None = None,
        watcher_start: int | None = None,
    ) -> None:
        """Name the command's process and the process that will record its end."""
        if pid is not None:
            self.db.execute("UPDATE calls SET pid=?, pid_start=? WHERE id=?", (pid, pid_start, call_id))
        if watcher_pid is not None:
            self.db.execute(
                "UPDATE calls SET watcher_pid=?, watcher_start=? WHERE id=?", (watcher_pid, watcher_start, call_id)
            )

    def call_processes(self, call_id: CallId) -> CallProcesses:
        """A command call's pid and its start time, and its watcher's pid and start time."""
        row = self.db.one("SELECT pid, pid_start, watcher_pid, watcher_start FROM calls WHERE id=?", (call_id,))
        if row is None:
            return CallProcesses(None, None, None, None)
        return CallProcesses(row["pid"], row["pid_start"], row["watcher_pid"], row["watcher_start"])

    def running_commands(self, project_id: ProjectId) -> list[RunningCommand]:
        """Commands and jobs of the project not recorded as ended: each with its pid's start time and its watcher."""
        rows = self.db.all(
            f"SELECT {_CALL_COLUMNS}, calls.pid_start AS pid_start, calls.watcher_pid AS watcher_pid,"
            " calls.watcher_start AS watcher_start FROM calls"
            " JOIN sessions ON sessions.id = calls.session_id"
            " WHERE calls.status='running' AND calls.kind IN ('command', 'job') AND sessions.project_id=?"
            " ORDER BY calls.rowid",
            (project_id,),
        )
        return [
            RunningCommand(
                self._call_from_row(row, with_changes=False), row["pid_start"], row["watcher_pid"], row["watcher_start"]
            )
            for row in rows
        ]

    def command_calls(self, *, session_id: SessionId | None, project_id: ProjectId | None) -> list[Call]:
        """Jobs and commands past their timeout (those with a watcher of their own), oldest first."""
        where = "calls.session_id=?" if session_id else "sessions.project_id=?"
        rows = self.db.all(
            f"SELECT {_CALL_COLUMNS} FROM calls JOIN sessions ON sessions.id = calls.session_id"
            f" WHERE {where} AND (calls.kind='job' OR (calls.kind='command' AND calls.watcher_pid IS NOT NULL"
            " AND calls.exit_code IS NULL AND calls.status<>'failed')) ORDER BY calls.rowid",
            (session_id or project_id,),
        )
        return [self._call_from_row(row) for row in rows]

    def call_snapshot_ids(self, call_id: CallId) -> CallSnapshots:
        """A command's own snapshot and the stat cache it started from."""
        row = self.db.one("SELECT snapshot_id, baseline_id FROM calls WHERE id=?", (call_id,))
        return CallSnapshots(None, None) if row is None else CallSnapshots(row["snapshot_id"], row["baseline_id"])

    # -- changes ------------------------------------------------------------------------------

    def add_change(
        self,
        call_id: CallId,
        seq: int,
        project_id: ProjectId,
        path: RelPath,
        before: FileState,
        after: FileState | None,
        *,
        partial: bool = False,
        outside: bool = False,
        not_covered: Message | None = None,
    ) -> int:
        where = f"{call_id}:{seq}"
        self.copy_bytes_recorded += _copy_bytes(before) + _copy_bytes(after)
        inserted = self.db.one(
            "INSERT INTO changes(call_id, seq, project_id, path_id, path_enc,"
            " before_kind, before_blob, before_size, before_mode, before_target_enc,"
            " after_kind, after_blob, after_size, after_mode, after_target_enc, partial, outside, not_covered_enc)"
            " VALUES(?,?,?,?,?, ?,?,?,?,?, ?,?,?,?,?, ?,?,?) RETURNING id",
            (
                call_id,
                seq,
                project_id,
                self._scoped_path_id(project_id, path, outside=outside),
                self._seal(path, f"changes.path:{where}"),
                *state_columns(before),
                self._seal(before.target, f"changes.before_target:{where}"),
                *state_columns(after),
                self._seal(after.target if after else None, f"changes.after_target:{where}"),
                int(partial),
                int(outside),
                self._seal_message(not_covered, f"changes.not_covered:{where}"),
            ),
        )
        change_id: int = inserted["id"]
        return change_id

    def set_change_after(self, change_id: int, after: FileState, *, partial: bool) -> None:
        row = self.db.one("SELECT call_id, seq FROM changes WHERE id=?", (change_id,))
        if row is None:
            raise UsageError(Message("no_such_change", change=change_id))
        where = f"{row['call_id']}:{row['seq']}"
        self.copy_bytes_recorded += _copy_bytes(after)
        self.db.execute(
            "UPDATE changes SET after_kind=?, after_blob=?, after_size=?, after_mode=?, after_target_enc=?, partial=?"
            " WHERE id=?",
            (
                *state_columns(after),
                self._seal(after.target, f"changes.after_target:{where}"),
                int(partial),
                change_id,
            ),
        )

    def delete_change(self, change_id: int) -> None:
        self.db.execute("DELETE FROM changes WHERE id=?", (change_id,))

    def _state_from_row(self, row: sqlite3.Row, side: str, where: str, what: Message) -> FileState:
        """The state *side* ("before" or "after") of a change row."""
        return FileState(
            kind=checked_choice(row[f"{side}_kind"], STATE_KINDS, what),
            blob=checked_blob_id(row[f"{side}_blob"], what),
            size=checked_int(row[f"{side}_size"], what),
            mode=checked_int(row[f"{side}_mode"], what),
            target=self._open(row[f"{side}_target_enc"], f"changes.{side}_target:{where}"),
        )

    def _change_from_row(self, row: sqlite3.Row) -> Change:
        where = f"{row['call_id']}:{row['seq']}"
        what = record_item(
            Message("record_noun_change"), row["seq"], record_named(Message("record_noun_call"), str(row["call_id"]))
        )
        path = self._open(row["path_enc"], f"changes.path:{where}")
        if path is None:
            raise RecordDamagedError(what)
        return Change(
            id=row["id"],
            call_id=CallId(row["call_id"]),
            seq=row["seq"],
            path=RelPath(path),
            before=self._state_from_row(row, "before", where, what),
            after=None if row["after_kind"] is None else self._state_from_row(row, "after", where, what),
            partial=bool(row["partial"]),
            evicted=bool(row["evicted"]),
            reverted=bool(row["reverted"]),
            outside=bool(row["outside"]),
            not_covered=self._open_message(row["not_covered_enc"], f"changes.not_covered:{where}"),
        )

    def changes_of_call(self, call_id: CallId) -> tuple[Change, ...]:
        rows = self.db.all(f"SELECT {_CHANGE_COLUMNS} FROM changes WHERE call_id=? ORDER BY seq", (call_id,))
        return tuple(self._change_from_row(row) for row in rows)

    def mark_changes_reverted(self, change_ids: Iterable[int], *, reverted: bool = True) -> None:
        ids = list(change_ids)
        if ids:
            self.db.executemany("UPDATE changes SET reverted=? WHERE id=?", [(int(reverted), cid) for cid in ids])

    # -- other calls on the same path ------------------------------------------------------------

    def later_calls_on_path(
        self, project_id: ProjectId, path: RelPath, call_id: CallId, *, outside: bool = False
    ) -> list[CallId]:
        """Calls after *call_id* (in any session of the project) that changed *path*, oldest first."""
        rows = self.db.all(
            "SELECT DISTINCT calls.id AS id, calls.rowid FROM changes JOIN calls ON calls.id = changes.call_id"
            " WHERE changes.project_id=? AND changes.path_id=?"
            " AND calls.rowid > (SELECT rowid FROM calls WHERE id=?) ORDER BY calls.rowid",
            (project_id, self._scoped_path_id(project_id, path, outside=outside), call_id),
        )
        return [CallId(row["id"]) for row in rows]

    def pending_later_call(
        self, project_id: ProjectId, path: RelPath, call_id: CallId, excluding: set[str], *, outside: bool = False
    ) -> CallId | None:
        """The newest call after *call_id* (any session of the project, not in *excluding*) whose change
        of *path* is not taken back: while it stands, an undo of *call_id*'s change must not act."""
        return self.pending_later_calls(project_id, call_id, [(path, outside)], excluding).get((path, outside))

    def pending_later_calls(
        self, project_id: ProjectId, call_id: CallId, paths: Iterable[PathKey], excluding: Set[str]
    ) -> dict[PathKey, CallId]:
        """:meth:`pending_later_call` of each of *paths* (path, outside) at once: a query per few hundred paths,
        not one per path. A path no such call changed is not in the answer."""
        found: dict[PathKey, CallId] = {}
        for by_id, marks in self._path_id_batches(project_id, paths):
            rows = self.db.all(
                "SELECT changes.path_id AS path_id, calls.id AS id"
                " FROM changes JOIN calls ON calls.id = changes.call_id"
                f" WHERE changes.project_id=? AND changes.path_id IN ({marks}) AND changes.reverted=0"
                " AND calls.rowid > (SELECT rowid FROM calls WHERE id=?) ORDER BY calls.rowid DESC",
                (project_id, *by_id, call_id),
            )
            for row in rows:
                key = _asked(by_id, row["path_id"])
                if key is not None and key not in found and row["id"] not in excluding:
                    found[key] = CallId(row["id"])
        return found

    def overlapping_calls_on_path(
        self, project_id: ProjectId, path: RelPath, call_id: CallId, *, outside: bool = False
    ) -> list[OverlappingCall]:
        """Other calls (any session of the project) that changed *path* and were running when *call_id* ended,
        or were file tools' calls running while it ran (or still run as a command or job, their changes not known
        yet): (id, kind, running), oldest first.

        A command's change is what differs between its scans; a call running meanwhile may have made it: a
        call whose own end scan, later, saw it too, or a file tool's call, which names what it wrote.
        """
        return self.overlapping_calls_on_paths(project_id, call_id, [(path, outside)]).get((path, outside), [])

    def overlapping_calls_on_paths(
        self, project_id: ProjectId, call_id: CallId, paths: Iterable[PathKey]
    ) -> dict[PathKey, list[OverlappingCall]]:
        """:meth:`overlapping_calls_on_path` of each of *paths* (path, outside) at once: the call's window and
        the commands still running asked once, the changes of other calls a query per few hundred paths."""
        keys = list(paths)
        window = self.db.one("SELECT started_at, ended_at FROM calls WHERE id=?", (call_id,))
        if window is None or not keys:
            return {}
        start = window["started_at"]
        end = window["ended_at"] if window["ended_at"] is not None else self.now()
        changed: dict[PathKey, list[sqlite3.Row]] = {key: [] for key in keys}
        for by_id, marks in self._path_id_batches(project_id, keys):
            for row in self.db.all(
                "SELECT DISTINCT changes.path_id AS path_id, calls.id AS id, calls.kind AS kind,"
                " calls.status = 'running' AS running, calls.rowid AS position"
                " FROM changes JOIN calls ON calls.id = changes.call_id"
                f" WHERE changes.project_id=? AND changes.path_id IN ({marks}) AND changes.reverted=0 AND calls.id<>?"
                " AND calls.started_at < ? AND (calls.ended_at IS NULL OR calls.ended_at > ?"
                " OR (calls.kind = 'tool' AND calls.ended_at > ?))",
                (project_id, *by_id, call_id, end, end, start),
            ):
                key = _asked(by_id, row["path_id"])
                if key is not None:
                    changed[key].append(row)
        running = self.db.all(
            "SELECT calls.id AS id, calls.kind AS kind, 1 AS running, calls.rowid AS position"
            " FROM calls JOIN sessions ON sessions.id = calls.session_id"
            " WHERE calls.status = 'running' AND calls.kind IN ('command', 'job') AND sessions.project_id=?"
            " AND calls.id<>? AND calls.started_at < ?",
            (project_id, call_id, end),
        )
        found: dict[PathKey, list[OverlappingCall]] = {}
        for key, rows in changed.items():
            ordered = sorted({row["id"]: row for row in [*rows, *running]}.values(), key=lambda row: row["position"])
            found[key] = [OverlappingCall(CallId(row["id"]), str(row["kind"]), bool(row["running"])) for row in ordered]
        return found

    def _path_id_batches(
        self, project_id: ProjectId, paths: Iterable[PathKey]
    ) -> Iterator[tuple[dict[bytes, PathKey], str]]:
        """*paths*' keyed ids, a few hundred at a time (under every backend's limit of bound parameters): each
        batch's ids (in order, to bind) with the path each names, and the batch's placeholders."""
        by_id = {self._scoped_path_id(project_id, path, outside=outside): (path, outside) for path, outside in paths}
        ids = list(by_id)
        for first in range(0, len(ids), _PATHS_PER_QUERY):
            part = {path_id: by_id[path_id] for path_id in ids[first : first + _PATHS_PER_QUERY]}
            yield part, ", ".join("?" * len(part))

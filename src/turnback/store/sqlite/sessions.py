"""Projects and sessions: registering a project, a session's record and head, external ids, busy marks."""

from __future__ import annotations

import os
import sqlite3

from turnback.catalog import Message
from turnback.errors import RecordDamagedError, UsageError
from turnback.model import CallId, Project, ProjectId, Session, SessionId, TurnId, short_id
from turnback.store.records import BusyMark, IdTable, RegisteredProject
from turnback.store.sqlite.base import SqliteRecords

# What an id of each kind is called in a message about it (the nouns resolve_id's callers give).
_ID_NOUNS = {
    "session": Message("record_noun_session"),
    "turn": Message("record_noun_turn"),
    "operation": Message("record_noun_operation"),
    "call": Message("record_noun_call"),
}
_SESSION_COLUMNS = "id, project_id, actor_enc, title_enc, incognito, head, created_at, active_at"


class ProjectQueries(SqliteRecords):
    def _root_id(self, root: str) -> bytes:
        """The keyed id a project is found by from its root (a shared store scopes it by host)."""
        return self.crypto.path_id("root", root)

    def _insert_project(self, project_id: ProjectId, root_id: bytes, root: str, created_at: int) -> None:
        self.db.execute(
            "INSERT INTO projects(id, root_id, root_enc, created_at) VALUES(?,?,?,?)",
            (project_id, root_id, self._seal(root, f"projects.root:{project_id}"), created_at),
        )

    def copy_project(self, project_id: ProjectId, root: str, created_at: int) -> None:
        """A project copied from another store, under its id (``store/copy.py``)."""
        self._insert_project(project_id, self._root_id(root), root, created_at)

    def register_project(self, root: str) -> RegisteredProject:
        """The project at *root* (a real path), registering it if new; and whether it was new."""
        root_id = self._root_id(root)
        with self.transaction():
            row = self.db.one("SELECT id FROM projects WHERE root_id=?", (root_id,))
            if row:
                return RegisteredProject(Project(ProjectId(row["id"]), root), False)
            project_id = ProjectId(self.new_id())
            self._insert_project(project_id, root_id, root, self.now())
        return RegisteredProject(Project(project_id, root), True)

    def project_by_root(self, root: str) -> Project | None:
        row = self.db.one("SELECT id FROM projects WHERE root_id=?", (self._root_id(root),))
        return Project(ProjectId(row["id"]), root) if row else None

    def project(self, project_id: ProjectId) -> Project:
        row = self.db.one("SELECT id, root_enc FROM projects WHERE id=?", (project_id,))
        if row is None:  # every project id comes from a stored record (a session's, a plan's)
            raise RecordDamagedError(Message("record_project_missing", project=short_id(project_id)))
        root = self._open(row["root_enc"], f"projects.root:{row['id']}")
        assert root is not None
        return Project(ProjectId(row["id"]), root)

    def project_containing(self, path: str) -> Project | None:
        """The registered project whose root is *path* or a folder above it."""
        current = os.path.realpath(path)
        while True:
            project = self.project_by_root(current)
            if project:
                return project
            parent = os.path.dirname(current)
            if parent == current:
                return None
            current = parent

    def projects(self) -> list[Project]:
        return [self.project(ProjectId(row["id"])) for row in self.db.all("SELECT id FROM projects ORDER BY id")]


class SessionQueries(SqliteRecords):
    def _session_from_row(self, row: sqlite3.Row) -> Session:
        sid = row["id"]
        return Session(
            id=SessionId(sid),
            project_id=ProjectId(row["project_id"]),
            actor=self._open(row["actor_enc"], f"sessions.actor:{sid}"),
            title=self._open(row["title_enc"], f"sessions.title:{sid}"),
            incognito=bool(row["incognito"]),
            head=TurnId(row["head"]) if row["head"] else None,
            created_at=row["created_at"],
            active_at=row["active_at"],
        )

    def create_session(
        self, project_id: ProjectId, *, actor: str | None, title: str | None, incognito: bool
    ) -> Session:
        session_id = SessionId(self.new_id())
        now = self.now()
        with self.transaction():
            self.db.execute(
                f"INSERT INTO sessions({_SESSION_COLUMNS}) VALUES(?,?,?,?,?,NULL,?,?)",
                (
                    session_id,
                    project_id,
                    self._seal(actor, f"sessions.actor:{session_id}"),
                    self._seal(title, f"sessions.title:{session_id}"),
                    int(incognito),
                    now,
                    now,
                ),
            )
        return self.session(session_id)

    def session(self, session_id: SessionId) -> Session:
        row = self.db.one(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id=?", (session_id,))
        if row is None:
            raise UsageError(Message("no_such_session", session=session_id))
        return self._session_from_row(row)

    def sessions(self, project_id: ProjectId | None = None) -> list[Session]:
        if project_id is None:
            rows = self.db.all(f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY active_at DESC, id DESC")
        else:
            rows = self.db.all(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE project_id=? ORDER BY active_at DESC, id DESC",
                (project_id,),
            )
        return [self._session_from_row(row) for row in rows]

    def touch_session(self, session_id: SessionId) -> None:
        self.db.execute("UPDATE sessions SET active_at=? WHERE id=?", (self.now(), session_id))

    def set_head_if_equals(self, session_id: SessionId, old: TurnId | None, new: TurnId | None) -> bool:
        """Move the session's head from *old* to *new*; False (and nothing changed) when it is not at *old*."""
        cursor = self.db.execute(
            "UPDATE sessions SET head=? WHERE id=? AND head IS NOT DISTINCT FROM ?", (new, session_id, old)
        )
        return cursor.rowcount == 1

    def resolve_id(self, table: IdTable, prefix: str, noun: str) -> str:
        """The one id in *table* that starts with *prefix*; a clear error for none or several."""
        cleaned = prefix.strip().lower()
        if not cleaned or any(c not in "0123456789abcdef" for c in cleaned):
            raise UsageError(Message("id_not_hex", prefix=repr(prefix), noun=_ID_NOUNS[noun]))
        rows = self.db.all(
            f"SELECT id FROM {table} WHERE id >= ? AND id < ? ORDER BY id LIMIT 6",
            (cleaned, cleaned + "g"),
        )
        if not rows:
            raise UsageError(Message("id_prefix_unknown", prefix=cleaned, noun=_ID_NOUNS[noun]))
        if len(rows) > 1:
            shown = tuple(str(row["id"])[:20] for row in rows[:5])
            raise UsageError(Message("id_prefix_ambiguous", prefix=cleaned, noun=_ID_NOUNS[noun], ids=shown))
        return str(rows[0]["id"])

    # -- a harness's own ids -----------------------------------------------------------------

    def external_id(self, kind: str, value: str) -> bytes:
        """A harness's own id (a Claude Code session id, a tool use id) as a keyed id: findable, never stored plain."""
        return self.crypto.path_id("external:" + kind, value)

    def session_by_external_id(self, external: bytes) -> Session | None:
        row = self.db.one(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE external_id=?", (external,))
        return self._session_from_row(row) if row else None

    def set_session_external_id(self, session_id: SessionId, external: bytes) -> None:
        self.db.execute("UPDATE sessions SET external_id=? WHERE id=?", (external, session_id))

    def call_by_external_id(self, session_id: SessionId, external: bytes) -> CallId | None:
        row = self.db.one(
            "SELECT id FROM calls WHERE session_id=? AND external_id=? ORDER BY rowid DESC", (session_id, external)
        )
        return CallId(row["id"]) if row else None

    def set_call_external_id(self, call_id: CallId, external: bytes) -> None:
        self.db.execute("UPDATE calls SET external_id=? WHERE id=?", (external, call_id))

    # -- busy marks -------------------------------------------------------------------------

    def add_busy_mark(self, session_id: SessionId, reason: str, pid: int | None, pid_start: int | None) -> str:
        mark_id = self.new_id()
        with self.transaction():
            self.db.execute(
                "INSERT INTO busy_marks(id, session_id, reason_enc, pid, pid_start, created_at) VALUES(?,?,?,?,?,?)",
                (mark_id, session_id, self._seal(reason, f"busy_marks.reason:{mark_id}"), pid, pid_start, self.now()),
            )
        return mark_id

    def busy_marks(self, session_id: SessionId) -> list[BusyMark]:
        """The session's busy marks: id, reason, holder pid and its start time."""
        rows = self.db.all(
            "SELECT id, reason_enc, pid, pid_start FROM busy_marks WHERE session_id=? ORDER BY created_at",
            (session_id,),
        )
        return [
            BusyMark(
                row["id"],
                self._open(row["reason_enc"], f"busy_marks.reason:{row['id']}") or "",
                row["pid"],
                row["pid_start"],
            )
            for row in rows
        ]

    def remove_busy_mark(self, mark_id: str) -> None:
        self.db.execute("DELETE FROM busy_marks WHERE id=?", (mark_id,))

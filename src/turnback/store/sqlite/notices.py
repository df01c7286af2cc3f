"""Notices to the assistant (what an undo changed under it), each delivered once, and the paths it must read again."""

from __future__ import annotations

from collections.abc import Sequence

from turnback.model import SessionId
from turnback.store.records import Notice, SealedNotice
from turnback.store.sqlite.base import SqliteRecords


class NoticeQueries(SqliteRecords):
    def add_notices(self, session_id: SessionId, items: Sequence[tuple[str, str]]) -> None:
        """Queue notices (path, text) for the assistant, and require it to read each path again."""
        for path, text in items:
            inserted = self.db.one(
                "INSERT INTO notices(session_id, body_enc, created_at) VALUES(?, ?, ?) RETURNING id",
                (session_id, b"\0", self.now()),
            )
            notice_id = inserted["id"]
            body = self._seal_json([path, text], f"notices:{notice_id}")
            self.db.execute("UPDATE notices SET body_enc=? WHERE id=?", (body, notice_id))
            self.db.execute(
                "INSERT INTO must_read(session_id, path_id) VALUES(?,?) ON CONFLICT DO NOTHING",
                (session_id, self.path_id(session_id, path)),
            )

    def take_notices(self, session_id: SessionId) -> list[Notice]:
        """The session's pending notices, each delivered once (and a notice said twice, once)."""
        with self.transaction():
            rows = self.db.all(
                "SELECT id, body_enc FROM notices WHERE session_id=? AND delivered=0 ORDER BY id", (session_id,)
            )
            self.db.executemany("UPDATE notices SET delivered=1 WHERE id=?", [(row["id"],) for row in rows])
        items: list[Notice] = []
        for row in rows:
            notice = self.open_notice(row["id"], row["body_enc"])
            if notice not in items:
                items.append(notice)
        return items

    def sealed_notices(self, session_id: SessionId) -> list[SealedNotice]:
        """Every notice of the session as stored, delivered or not (``verify`` opens each on its own)."""
        rows = self.db.all("SELECT id, body_enc FROM notices WHERE session_id=? ORDER BY id", (session_id,))
        return [SealedNotice(row["id"], row["body_enc"]) for row in rows]

    def open_notice(self, notice_id: int, body: bytes) -> Notice:
        """A notice's path and text, from its sealed row."""
        path, text = self._open_json(body, f"notices:{notice_id}")
        return Notice(str(path), str(text))

    def must_read(self, session_id: SessionId, path: str) -> bool:
        row = self.db.one(
            "SELECT 1 FROM must_read WHERE session_id=? AND path_id=?", (session_id, self.path_id(session_id, path))
        )
        return row is not None

    def mark_read(self, session_id: SessionId, path: str) -> None:
        self.db.execute(
            "DELETE FROM must_read WHERE session_id=? AND path_id=?", (session_id, self.path_id(session_id, path))
        )

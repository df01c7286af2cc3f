"""Tree snapshots (the stat caches and what a command's outside paths held), and content put in the store."""

from __future__ import annotations

from collections.abc import Iterable

from turnback.model import ProjectId
from turnback.store.records import CachedSnapshot, StoredContent
from turnback.store.sqlite.base import SqliteRecords


class SnapshotQueries(SqliteRecords):
    def save_snapshot(
        self,
        project_id: ProjectId,
        data: bytes,
        entries: int,
        *,
        purpose: str = "cache",
        watch_token: str | None = None,
        content_bytes: int | None = None,
        base_id: str | None = None,
    ) -> str:
        """Keep a tree snapshot (opaque, compressed by the caller); *content_bytes*: what its copies hold.

        ``cache``: the project's stat cache; older caches are dropped once no
        running command started from them and no kept cache is built on them
        (*base_id*: the full cache a cache of only the changed entries needs).
        ``call``: what a command's outside paths held before it ran; dropped
        once the command has ended.
        """
        snapshot_id = self.new_id()
        with self.transaction():
            self.db.execute(
                "INSERT INTO snapshots(id, project_id, purpose, created_at, entries, data_enc, watch_token,"
                " content_bytes, base_id) VALUES(?,?,?,?,?,?,?,?,?)",
                (
                    snapshot_id,
                    project_id,
                    purpose,
                    self.now(),
                    entries,
                    self.crypto.seal(data, f"snapshots:{snapshot_id}".encode()),
                    watch_token,
                    content_bytes,
                    base_id,
                ),
            )
            # A base still protected by a row deleted here goes with the next save.
            self.db.execute(
                "DELETE FROM snapshots WHERE project_id=? AND id<>? AND (purpose<>'cache' OR ?='cache')"
                " AND id NOT IN (SELECT snapshot_id FROM calls WHERE status='running' AND snapshot_id IS NOT NULL)"
                " AND id NOT IN (SELECT baseline_id FROM calls WHERE status='running' AND baseline_id IS NOT NULL)"
                " AND id NOT IN (SELECT base_id FROM snapshots WHERE project_id=? AND base_id IS NOT NULL)",
                (project_id, snapshot_id, purpose, project_id),
            )
        return snapshot_id

    def snapshot(self, snapshot_id: str) -> bytes | None:
        row = self.db.one("SELECT data_enc FROM snapshots WHERE id=?", (snapshot_id,))
        return None if row is None else self._open_bytes(row["data_enc"], f"snapshots:{snapshot_id}")

    def latest_snapshot(self, project_id: ProjectId, *, data: bool = True) -> CachedSnapshot | None:
        """The project's stat cache, if it has one (without *data*: all but its data, which stays unread)."""
        row = self.db.one(
            f"SELECT id, {'data_enc' if data else 'NULL AS data_enc'}, watch_token, content_bytes FROM snapshots"
            " WHERE project_id=? AND purpose='cache' ORDER BY created_at DESC, id DESC LIMIT 1",
            (project_id,),
        )
        if row is None:
            return None
        return CachedSnapshot(
            row["id"],
            self._open_bytes(row["data_enc"], f"snapshots:{row['id']}") if data else None,
            row["watch_token"],
            row["content_bytes"],
        )

    def cache_content_bytes(self, project_id: ProjectId) -> int | None:
        """What the project's stat cache's copies hold, without reading it (None: not known)."""
        row = self.db.one(
            "SELECT content_bytes FROM snapshots WHERE project_id=? AND purpose='cache'"
            " ORDER BY created_at DESC, id DESC LIMIT 1",
            (project_id,),
        )
        return None if row is None else row["content_bytes"]

    def put_content(self, chunks: Iterable[bytes]) -> StoredContent:
        return self.blobs.put_chunks(chunks)

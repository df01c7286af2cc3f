"""The store's SQLite schema, as numbered migrations.

Nothing a user wrote or an agent read is kept in a plain column: paths,
messages, titles, call inputs and link targets are sealed (``*_enc``
columns) and paths are found by keyed id (``path_id``). Plain columns hold
ids, kinds, modes, sizes, states and times.
"""

from __future__ import annotations

MIGRATIONS: list[list[str]] = [
    # 1: the core model
    [
        """CREATE TABLE meta(
            key TEXT PRIMARY KEY,
            value BLOB NOT NULL)""",
        """CREATE TABLE projects(
            id TEXT PRIMARY KEY,
            root_id BLOB NOT NULL UNIQUE,
            root_enc BLOB NOT NULL,
            created_at INTEGER NOT NULL)""",
        """CREATE TABLE sessions(
            id TEXT PRIMARY KEY,
            project_id TEXT NOT NULL REFERENCES projects(id),
            actor_enc BLOB,
            title_enc BLOB,
            incognito INTEGER NOT NULL DEFAULT 0,
            head TEXT,
            created_at INTEGER NOT NULL,
            active_at INTEGER NOT NULL)""",
        "CREATE INDEX sessions_by_project ON sessions(project_id, active_at)",
        """CREATE TABLE turns(
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            number INTEGER NOT NULL,
            parent TEXT,
            message_enc BLOB,
            status TEXT NOT NULL,
            undone TEXT NOT NULL DEFAULT 'no',
            holder_pid INTEGER,
            holder_start INTEGER,
            started_at INTEGER NOT NULL,
            ended_at INTEGER,
            UNIQUE(session_id, number))""",
        """CREATE TABLE calls(
            id TEXT PRIMARY KEY,
            turn_id TEXT NOT NULL REFERENCES turns(id),
            session_id TEXT NOT NULL REFERENCES sessions(id),
            tool TEXT NOT NULL,
            input_enc BLOB,
            status TEXT NOT NULL,
            error_enc BLOB,
            started_at INTEGER NOT NULL,
            ended_at INTEGER)""",
        "CREATE INDEX calls_by_turn ON calls(turn_id)",
        """CREATE TABLE changes(
            id INTEGER PRIMARY KEY,
            call_id TEXT NOT NULL REFERENCES calls(id),
            seq INTEGER NOT NULL,
            project_id TEXT NOT NULL,
            path_id BLOB NOT NULL,
            path_enc BLOB NOT NULL,
            before_kind TEXT NOT NULL,
            before_blob BLOB,
            before_size INTEGER,
            before_mode INTEGER,
            before_target_enc BLOB,
            after_kind TEXT,
            after_blob BLOB,
            after_size INTEGER,
            after_mode INTEGER,
            after_target_enc BLOB,
            partial INTEGER NOT NULL DEFAULT 0,
            evicted INTEGER NOT NULL DEFAULT 0,
            reverted INTEGER NOT NULL DEFAULT 0,
            UNIQUE(call_id, seq))""",
        "CREATE INDEX changes_by_path ON changes(project_id, path_id)",
        """CREATE TABLE ops(
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            project_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            status TEXT NOT NULL,
            spec_enc BLOB NOT NULL,
            created_at INTEGER NOT NULL,
            applied_at INTEGER,
            finished_at INTEGER)""",
        "CREATE INDEX ops_by_session ON ops(session_id, status)",
        """CREATE TABLE op_rows(
            op_id TEXT NOT NULL REFERENCES ops(id),
            seq INTEGER NOT NULL,
            action TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending',
            body_enc BLOB NOT NULL,
            result_enc BLOB,
            expect_blob BLOB,
            target_blob BLOB,
            PRIMARY KEY(op_id, seq))""",
        """CREATE TABLE blobs(
            id BLOB NOT NULL UNIQUE,
            kind INTEGER NOT NULL,
            size INTEGER NOT NULL,
            stored INTEGER NOT NULL,
            data BLOB NOT NULL,
            created_at INTEGER NOT NULL)""",
    ],
    # 2: shell commands and background jobs, tree snapshots, git refs, files outside the project
    [
        "ALTER TABLE calls ADD COLUMN kind TEXT NOT NULL DEFAULT 'tool'",
        "ALTER TABLE calls ADD COLUMN pid INTEGER",
        "ALTER TABLE calls ADD COLUMN pid_start INTEGER",
        "ALTER TABLE calls ADD COLUMN watcher_pid INTEGER",
        "ALTER TABLE calls ADD COLUMN watcher_start INTEGER",
        "ALTER TABLE calls ADD COLUMN exit_code INTEGER",
        "ALTER TABLE calls ADD COLUMN snapshot_id TEXT",
        "ALTER TABLE calls ADD COLUMN late INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE calls ADD COLUMN unasked INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX calls_running ON calls(status, kind)",
        "ALTER TABLE changes ADD COLUMN outside INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE changes ADD COLUMN not_covered_enc BLOB",
        "ALTER TABLE turns ADD COLUMN refs_before_enc BLOB",
        """CREATE TABLE ref_changes(
            id INTEGER PRIMARY KEY,
            turn_id TEXT NOT NULL REFERENCES turns(id),
            seq INTEGER NOT NULL,
            body_enc BLOB NOT NULL,
            reverted INTEGER NOT NULL DEFAULT 0,
            UNIQUE(turn_id, seq))""",
        """CREATE TABLE snapshots(
            id TEXT PRIMARY KEY,
            project_id TEXT NOT NULL REFERENCES projects(id),
            purpose TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            entries INTEGER NOT NULL,
            data_enc BLOB NOT NULL)""",
        "CREATE INDEX snapshots_by_project ON snapshots(project_id, purpose, created_at)",
    ],
    # 3: history tree, rollback, resend, redo, busy marks, notices, the storage cap
    [
        "ALTER TABLE turns ADD COLUMN resent INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE ops ADD COLUMN reverses TEXT",
        "ALTER TABLE ops ADD COLUMN taken_back_by TEXT",
        """CREATE TABLE busy_marks(
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            reason_enc BLOB NOT NULL,
            pid INTEGER,
            pid_start INTEGER,
            created_at INTEGER NOT NULL)""",
        """CREATE TABLE notices(
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            body_enc BLOB NOT NULL,
            delivered INTEGER NOT NULL DEFAULT 0,
            created_at INTEGER NOT NULL)""",
        "CREATE INDEX notices_pending ON notices(session_id, delivered)",
        """CREATE TABLE must_read(
            session_id TEXT NOT NULL REFERENCES sessions(id),
            path_id BLOB NOT NULL,
            PRIMARY KEY(session_id, path_id))""",
        "CREATE INDEX changes_by_blob_before ON changes(before_blob)",
        "CREATE INDEX changes_by_blob_after ON changes(after_blob)",
    ],
    # 4: sessions and calls known by a harness's own ids (keyed hashes, like paths)
    [
        "ALTER TABLE sessions ADD COLUMN external_id BLOB",
        "CREATE UNIQUE INDEX sessions_by_external_id ON sessions(external_id)",
        "ALTER TABLE calls ADD COLUMN external_id BLOB",
        "CREATE INDEX calls_by_external_id ON calls(external_id)",
    ],
    # 5: a command's snapshot names its stat cache instead of a copy; the store cap drops operations' copies
    [
        "ALTER TABLE calls ADD COLUMN baseline_id TEXT",
        # an operation whose copies the store cap dropped: it can no longer be taken back (or, planned, applied)
        "ALTER TABLE ops ADD COLUMN evicted INTEGER NOT NULL DEFAULT 0",
    ],
    # 6: the watcher's token a stat cache was taken at (not secret: a process id, a random word, a number)
    [
        "ALTER TABLE snapshots ADD COLUMN watch_token TEXT",
    ],
    # 7: how much content a stat cache's copies hold, so the snapshot cap is checked without reading it
    [
        "ALTER TABLE snapshots ADD COLUMN content_bytes INTEGER",
    ],
    # 8: a stat cache saved as the entries that changed since a full one (its base, kept while it is needed)
    [
        "ALTER TABLE snapshots ADD COLUMN base_id TEXT",
    ],
    # 9: a blob whose sealed bytes are in a pack file of the store's folder (its name, where they start)
    [
        "ALTER TABLE blobs ADD COLUMN pack TEXT",
        "ALTER TABLE blobs ADD COLUMN pack_at INTEGER",
        "CREATE INDEX blobs_by_pack ON blobs(pack) WHERE pack IS NOT NULL",
    ],
    # 10: a process storing blobs that no record names yet (a scan, before its cache is kept): gc spares every
    # blob stored or met again since it began, while the process runs
    [
        """CREATE TABLE blob_holds(
            id TEXT PRIMARY KEY,
            project_id TEXT NOT NULL,
            pid INTEGER NOT NULL,
            pid_start INTEGER,
            since INTEGER NOT NULL)""",
    ],
]

SCHEMA_VERSION = len(MIGRATIONS)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

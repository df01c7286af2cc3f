"""The store's upkeep: its size caps, reclaiming copies nothing needs, checking every copy, deleting a
session; and the settings in config.toml."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from turnback.model import Project, SessionId
from turnback.ops.busy import refuse_if_busy

if TYPE_CHECKING:
    from turnback.config import Config
    from turnback.ops import maintenance

    from .facade import Engine


class Storage:
    """The storage facet of an :class:`~turnback.engine.Engine`; it holds the settings as read."""

    def __init__(self, engine: Engine, config: Config | None):
        self._engine = engine
        self._store = engine.store
        self._config = config
        self._project_configs: dict[str, Config] = {}

    @property
    def config(self) -> Config:
        """The store-wide settings (read on first use: a hook that needs none never parses config.toml)."""
        if self._config is None:
            from turnback.config import load_config

            self._config = load_config(self._store.home)
        return self._config

    def config_for(self, project: Project) -> Config:
        """The settings for *project*: the store's, with the project's own table of config.toml over them."""
        from turnback.config import load_config

        if project.root not in self._project_configs:
            self._project_configs[project.root] = load_config(self._store.home, project.root)
        return self._project_configs[project.root]

    def config_value(self, key: str, *, project_root: str | None = None) -> object:
        from turnback.config import config_value

        root = os.path.realpath(project_root) if project_root else None
        return config_value(self._store.home, key, root)

    def set_config(self, key: str, value: str, *, project_root: str | None = None) -> object:
        """Set a key in the store's config.toml, store-wide or for one project (never inside the project)."""
        from turnback.config import load_config, set_config_value

        root = None
        if project_root is not None:
            root = self._engine._sessions.init_project(project_root)[0].root
        written = set_config_value(self._store.home, key, value, root)
        self._config = load_config(self._store.home)
        self._project_configs.clear()
        return written

    def enforce_caps(self, project: Project | None = None) -> maintenance.Reclaimed:
        """Drop the oldest copies over ``store.max_mib`` (and the stat caches' over ``snapshot.max_mib``)."""
        from turnback.ops import maintenance

        config = self.config_for(project) if project else self.config
        return maintenance.enforce_caps(
            self._store,
            max_bytes=self.config.store_max_mib << 20,
            snapshot_max_bytes=config.snapshot_max_mib << 20,
            snapshot_mib=config.snapshot_max_mib,
        )

    def kept_bytes(self) -> int:
        """The file text kept for reverting (what ``store.max_mib`` bounds)."""
        from turnback.ops import maintenance

        return maintenance.kept_bytes(self._store)

    def gc(self, *, vacuum: bool | None = None) -> maintenance.Reclaimed:
        """Reclaim the copies nothing needs any more, and the disk space (VACUUM when worth it)."""
        from turnback.ops import maintenance

        return maintenance.gc(self._store, vacuum=vacuum)

    def verify(self) -> maintenance.Damage:
        """Check every copy decrypts and matches its id, and SQLite's integrity; change nothing."""
        from turnback.ops import maintenance

        return maintenance.verify(self._store)

    def delete_session(self, session_id: SessionId) -> None:
        """Delete a session with its turns, calls, operations and copies (its trash folders stay)."""
        from turnback.ops import maintenance

        refuse_if_busy(self._store, session_id)
        maintenance.delete_session(self._store, session_id)


__all__ = ["Storage"]

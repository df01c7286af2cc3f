"""turnback: a safe way back from an AI agent's file changes.

The public surface. Front ends (CLI, hooks, MCP) import only from here::

    import turnback

    with turnback.open() as engine:               # TURNBACK_HOME / TURNBACK_KEY, or the defaults
        session = engine.new_session("/path/to/project", title="fix the parser")
        engine.begin_turn(session.id, "rename the flag")
        engine.edit(session.id, "src/cli.py", "--verbose", "--debug")
        engine.end_turn(session.id)
        plan = engine.plan_undo(session.id)       # rows: restore / trash / skip / ...
        engine.apply(plan)                        # compare-and-swap, trash first, resumable
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: importing typing costs every hook process about 10 ms
if TYPE_CHECKING:
    from typing import Any

    from turnback.engine import CallHandle, Engine, KeptStore
    from turnback.errors import (
        BlobCorruptError,
        BusyError,
        KeyUnavailableError,
        NothingToDoError,
        RefusedError,
        SchemaTooNewError,
        StoreError,
        TurnbackError,
        UncoveredError,
        UnsafePathError,
        UsageError,
    )
    from turnback.home import (
        default_home,
        env_host_id,
        env_host_lease_s,
        env_key_secret,
        env_no_color,
        env_session,
        env_store_url,
        keyring_allowed,
    )
    from turnback.language import pick_language
    from turnback.model import (
        Call,
        Change,
        FileState,
        OpResult,
        Plan,
        PlanRow,
        Project,
        Session,
        Turn,
        TurnSummary,
        short_id,
    )
    from turnback.paths import is_database_url, shown_location

__version__ = "0.1.0"

# Each name is loaded on first use: a hook for an event it ignores, which an agent waits for, pays for none.
_HOMES = {
    "turnback.engine": ("CallHandle", "Engine", "KeptStore"),
    "turnback.errors": (
        "BlobCorruptError",
        "BusyError",
        "KeyUnavailableError",
        "NothingToDoError",
        "RefusedError",
        "SchemaTooNewError",
        "StoreError",
        "TurnbackError",
        "UncoveredError",
        "UnsafePathError",
        "UsageError",
    ),
    "turnback.home": (
        "default_home",
        "env_host_id",
        "env_host_lease_s",
        "env_key_secret",
        "env_no_color",
        "env_session",
        "env_store_url",
        "keyring_allowed",
    ),
    "turnback.paths": ("is_database_url", "shown_location"),
    "turnback.language": ("pick_language",),
    "turnback.model": (
        "Call",
        "Change",
        "FileState",
        "OpResult",
        "Plan",
        "PlanRow",
        "Project",
        "Session",
        "Turn",
        "TurnSummary",
        "short_id",
    ),
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'turnback' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def open(home: str | None = None, *, confined: bool = False, store_url: str | None = None) -> Engine:
    """Open the store in *home*, else ``TURNBACK_HOME``, else the user's data folder; in the PostgreSQL database
    *store_url*, else ``TURNBACK_STORE``, when one is named (else ``store.url`` in the folder's config.toml).

    The key comes from ``TURNBACK_KEY`` when it is set, else the store's key
    file or the OS keyring (``TURNBACK_NO_KEYRING=1`` leaves the keyring out).
    *confined*: file tools refuse paths outside the project whatever the mode.
    """
    from turnback.engine import Engine
    from turnback.home import (
        default_home,
        env_host_id,
        env_host_lease_s,
        env_key_secret,
        env_store_url,
        keyring_allowed,
    )

    return Engine.open(
        home or default_home(),
        key_secret=env_key_secret(),
        try_keyring=keyring_allowed(),
        confined=confined,
        store_url=store_url or env_store_url(),
        host_id=env_host_id(),
        host_lease_s=env_host_lease_s(),
    )


__all__ = [
    "BlobCorruptError",
    "BusyError",
    "Call",
    "CallHandle",
    "Change",
    "Engine",
    "FileState",
    "KeptStore",
    "KeyUnavailableError",
    "NothingToDoError",
    "OpResult",
    "Plan",
    "PlanRow",
    "Project",
    "RefusedError",
    "SchemaTooNewError",
    "Session",
    "StoreError",
    "Turn",
    "TurnSummary",
    "TurnbackError",
    "UncoveredError",
    "UnsafePathError",
    "UsageError",
    "__version__",
    "default_home",
    "env_host_id",
    "env_host_lease_s",
    "env_key_secret",
    "env_no_color",
    "env_session",
    "env_store_url",
    "is_database_url",
    "keyring_allowed",
    "open",
    "pick_language",
    "short_id",
    "shown_location",
]

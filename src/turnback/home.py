"""Where the store lives and which environment settings apply.

Each environment variable turnback reads is read here, in exactly one
function, so the rest of the library takes explicit values.
"""

from __future__ import annotations

import os
import sys

ENV_HOME = "TURNBACK_HOME"
ENV_KEY = "TURNBACK_KEY"
ENV_SESSION = "TURNBACK_SESSION"
ENV_NO_KEYRING = "TURNBACK_NO_KEYRING"
ENV_LANG = "TURNBACK_LANG"
ENV_STORE = "TURNBACK_STORE"
ENV_HOST_ID = "TURNBACK_HOST_ID"
ENV_HOST_LEASE = "TURNBACK_HOST_LEASE_S"
ENV_WEB_TOKEN = "TURNBACK_WEB_TOKEN"
LOCALE_VARIABLES = ("LC_ALL", "LC_MESSAGES", "LANG")  # the order the C library reads them in
SETTINGS_PREFIX = "TURNBACK_"  # every setting of turnback's own, here and in hooks/relay.py and fsio/steps.py


def default_home() -> str:
    """``TURNBACK_HOME``, else the user's data folder (``$XDG_DATA_HOME/turnback``, ``~/.local/share/turnback``)."""
    configured = os.environ.get(ENV_HOME)
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    if sys.platform.startswith("linux"):
        # The XDG rule itself, as platformdirs applies it: importing platformdirs costs a hook ~15 ms.
        data_home = os.environ.get("XDG_DATA_HOME", "").strip()
        if not os.path.isabs(data_home):
            data_home = os.path.join(os.path.expanduser("~"), ".local", "share")
        return os.path.join(data_home, "turnback")
    import platformdirs

    return platformdirs.user_data_dir("turnback", appauthor=False)


def env_key_secret() -> str | None:
    """The secret in ``TURNBACK_KEY``, when set (the only key used then)."""
    return os.environ.get(ENV_KEY) or None


def env_store_url() -> str | None:
    """``TURNBACK_STORE`` when it names a PostgreSQL database (``postgresql://…``): the store is there. Anything
    else leaves the store in the folder's SQLite file."""
    from turnback.paths import is_database_url  # here: a hook process imports this module, and needs no paths

    value = os.environ.get(ENV_STORE, "").strip()
    return value if is_database_url(value) else None


def env_host_id() -> str | None:
    """``TURNBACK_HOST_ID``: this host's id in a shared store, in place of the machine's (containers, tests)."""
    return os.environ.get(ENV_HOST_ID) or None


def env_host_lease_s() -> float | None:
    """``TURNBACK_HOST_LEASE_S``: how long, in seconds, this host's lease in a shared store lasts once renewed
    (tests play a host that dies; default ``store.hosts.HOST_LEASE_S``). A value that is no positive number is
    left out."""
    try:
        value = float(os.environ.get(ENV_HOST_LEASE, ""))
    except ValueError:
        return None
    return value if value > 0 else None


def env_session() -> str | None:
    return os.environ.get(ENV_SESSION) or None


def env_no_color() -> bool:
    """Whether ``NO_COLOR`` asks for no colour (https://no-color.org)."""
    return bool(os.environ.get("NO_COLOR"))


def agent_environment() -> dict[str, str]:
    """The environment of a process turnback starts for an agent: this process's, minus every ``TURNBACK_*``.

    Those name the store's folder, its key, the keyring, the session and the
    hook relay; an agent's command must learn none of them (turnback's own
    helpers get them, and strip them again when they start the agent's
    command).
    """
    return {name: value for name, value in os.environ.items() if not name.startswith(SETTINGS_PREFIX)}


def keyring_allowed() -> bool:
    """Whether the OS keyring may be tried (``TURNBACK_NO_KEYRING=1`` turns it off)."""
    return os.environ.get(ENV_NO_KEYRING, "") in ("", "0")


def env_language() -> str | None:
    """``TURNBACK_LANG``, when set and not empty."""
    return os.environ.get(ENV_LANG) or None


def env_web_token() -> str | None:
    """``TURNBACK_WEB_TOKEN``: the token ``turnback serve`` asks for, instead of a new random one each start."""
    return os.environ.get(ENV_WEB_TOKEN) or None


def locale_settings() -> tuple[str | None, ...]:
    """``LC_ALL``, ``LC_MESSAGES`` and ``LANG`` as set (None where unset or empty)."""
    return tuple(os.environ.get(name) or None for name in LOCALE_VARIABLES)


__all__ = [
    "agent_environment",
    "default_home",
    "env_host_id",
    "env_host_lease_s",
    "env_key_secret",
    "env_language",
    "env_no_color",
    "env_session",
    "env_store_url",
    "env_web_token",
    "keyring_allowed",
    "locale_settings",
]

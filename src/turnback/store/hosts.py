"""This host: the stable id a shared store knows it by, and the name it shows.

The id is the machine's (``/etc/machine-id``, which systemd keeps stable for
the machine's life), or what the caller gives in its place (``TURNBACK_HOST_ID``,
read in ``home.py``: containers and tests that play several hosts). A store
keeps only a keyed hash of it.
"""

from __future__ import annotations

import socket
from typing import NamedTuple

MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")


class LocalHost(NamedTuple):
    id: str
    name: str  # for display: "this session's files are on NAME"


def _machine_id() -> str | None:
    for path in MACHINE_ID_FILES:
        try:
            with open(path, encoding="ascii", errors="replace") as handle:
                value = handle.read().strip()
        except OSError:
            continue
        if value:
            return value
    return None


def local_host(override: str | None = None) -> LocalHost:
    """This host's id (*override*, else the machine id, else its host name) and its name."""
    name = socket.gethostname()
    return LocalHost(override or _machine_id() or name, name)


__all__ = ["LocalHost", "local_host"]

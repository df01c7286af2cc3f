"""This host: the stable id a shared store knows it by, and the name it shows.

The id is the machine's (``/etc/machine-id``, which systemd keeps stable for
the machine's life), or what the caller gives in its place (``TURNBACK_HOST_ID``,
read in ``home.py``: containers and tests that play several hosts). A store
keeps only a keyed hash of it.

A host also keeps a lease in a shared store: a time (the server's clock, so
hosts whose clocks differ agree on it) until which it is taken to run. Each
opening of the store renews it once a ``renew_s`` has passed, and a process
that holds the store open renews it every ``renew_s`` while it does (the hook
relay, the MCP server, ``turnback serve``, ``exec``, the watcher). A host that
died, or lost the server, stops renewing it: once it ran out, other hosts
no longer take its running turns, busy marks and commands to run. Its length
is a trade: a host that died blocks other hosts' views that long, and a host
that merely had no turnback process open that long (an agent thinking for
minutes with no hook relay) has its running turn taken as interrupted
elsewhere (its next event begins a new one). Five minutes, renewed each
minute, outlasts the relay's ten idle minutes with room to spare.
"""

from __future__ import annotations

import socket
from typing import NamedTuple

MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")
HOST_LEASE_S = 300.0  # how long a host is taken to run after it last renewed its lease
LEASE_RENEW_S = 60.0  # how often it renews it (at most: a third of the lease, for the short ones of tests)


class LocalHost(NamedTuple):
    id: str
    name: str  # for display: "this session's files are on NAME"
    lease_s: float = HOST_LEASE_S

    @property
    def renew_s(self) -> float:
        """How often this host renews its lease: often enough that two renewals can fail before it runs out."""
        return min(LEASE_RENEW_S, self.lease_s / 3)


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


def local_host(override: str | None = None, lease_s: float | None = None) -> LocalHost:
    """This host's id (*override*, else the machine id, else its host name), its name, and its lease (*lease_s*,
    else ``HOST_LEASE_S``)."""
    name = socket.gethostname()
    return LocalHost(override or _machine_id() or name, name, lease_s or HOST_LEASE_S)


__all__ = ["HOST_LEASE_S", "LEASE_RENEW_S", "LocalHost", "local_host"]

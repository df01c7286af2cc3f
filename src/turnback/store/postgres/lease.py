"""This host's lease in a shared store, renewed while a process of this host holds the store open.

A process that opens the store renews the lease then (``PgOpening``); one that
keeps it open (the hook relay, the MCP server, ``turnback serve``, ``exec``,
the watcher) renews it from a thread here every ``LocalHost.renew_s``, on a
connection of its own, until its last store of that database is closed. The
thread is a daemon: a process that ends, however it ends, renews no more,
and its lease runs out (``store/hosts.py`` says why that is the point).
"""

from __future__ import annotations

import contextlib
import threading

import psycopg

from turnback.store.hosts import LocalHost
from turnback.store.postgres.schema import SERVER_NOW_NS

CONNECT_TIMEOUT_S = 10

RENEW_LEASE = f"UPDATE hosts SET lease_until = {SERVER_NOW_NS} + ? WHERE id = ?"  # in the queries' own SQL


def lease_ns(host: LocalHost) -> int:
    return int(host.lease_s * 1e9)


class _Renewer:
    def __init__(self, url: str, host: LocalHost, host_key: bytes):
        self.url, self.host, self.host_key = url, host, host_key
        self.holders = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="turnback host lease", daemon=True)

    def _run(self) -> None:
        while not self.stopped.wait(self.host.renew_s):
            # A renewal that fails (the server unreachable) is tried again at the next turn; while none
            # succeeds the lease runs out, as other hosts should then see it.
            with (
                contextlib.suppress(psycopg.Error),
                psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn,
            ):
                conn.execute(RENEW_LEASE.replace("?", "%s"), (lease_ns(self.host), self.host_key))


_RENEWERS: dict[tuple[str, bytes], _Renewer] = {}
_RENEWERS_LOCK = threading.Lock()


def hold_lease(url: str, host: LocalHost, host_key: bytes) -> None:
    """Renew *host*'s lease in the store at *url* from now on, until :func:`release_lease` as often."""
    with _RENEWERS_LOCK:
        renewer = _RENEWERS.get((url, host_key))
        if renewer is None:
            renewer = _RENEWERS[url, host_key] = _Renewer(url, host, host_key)
            renewer.thread.start()
        renewer.holders += 1


def release_lease(url: str, host_key: bytes) -> None:
    """One holder fewer; with none left, this process renews the lease no more."""
    with _RENEWERS_LOCK:
        renewer = _RENEWERS.get((url, host_key))
        if renewer is None:
            return
        renewer.holders -= 1
        if renewer.holders <= 0:
            renewer.stopped.set()
            del _RENEWERS[url, host_key]


__all__ = ["RENEW_LEASE", "hold_lease", "lease_ns", "release_lease"]

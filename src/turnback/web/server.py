"""``turnback serve``: the web page and its API on uvicorn, until SIGINT or SIGTERM.

The socket is bound before the start line is printed, so whoever reads the
line (a person, a test, a script) can connect at once; with ``--port 0`` the
line names the port the system chose. uvicorn's access log is off: the first
address holds the token, and no log ever does.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import webbrowser
from collections.abc import Callable, Generator

import uvicorn

from turnback import Engine

from . import security
from .app import build_app

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Server(uvicorn.Server):
    """uvicorn's server, ending on SIGINT or SIGTERM like it does, but without raising the signal again
    afterwards (which would end the process with it): ``turnback serve`` then exits 0. *stopping* runs as it
    starts to stop, before it waits for the open connections (an event stream never ends by itself)."""

    def __init__(self, config: uvicorn.Config, stopping: Callable[[], None]):
        super().__init__(config)
        self._stopping = stopping

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._stopping()
        await super().shutdown(sockets=sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # serve() took SIGINT and SIGTERM before the start line: one sent right after it counts too


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to *host*:*port* (0: a free port) and listening."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def serve(
    open_engine: Callable[[], Engine],
    *,
    home: str,
    host: str,
    port: int,
    token: str,
    default_lang: str,
    project: str | None,
    started: Callable[[str, int], None],
    open_browser: bool = False,
) -> None:
    """Serve until SIGINT or SIGTERM; *started* gets the address (with the token) and the port once it listens."""
    sock = listening_socket(host, port)
    port = sock.getsockname()[1]
    site = build_app(
        open_engine, home=home, token=token, host=host, port=port, default_lang=default_lang, project=project
    )
    config = uvicorn.Config(
        site.app,
        access_log=False,
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=2,
        server_header=False,
    )
    server = _Server(config, site.stopping)
    shown_host = "127.0.0.1" if security.is_wildcard(host) else security.url_host(host)
    url = f"http://{shown_host}:{port}/?token={token}"
    previous = {sig: signal.signal(sig, server.handle_exit) for sig in HANDLED_SIGNALS}
    try:
        started(url, port)
        if open_browser:
            webbrowser.open(url)
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
        site.close()


__all__ = ["listening_socket", "serve"]

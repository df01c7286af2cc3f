"""A real ``turnback serve`` for tests: started as a subprocess on a free port, read from its start line, and
an HTTP client that sets every header itself (``Host``, ``Origin``), as a hostile page could."""

from __future__ import annotations

import http.client
import json
import re
import select
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, cli_env

START_LINE = re.compile(r"^turnback web: (http://127\.0\.0\.1:(\d+)/\?token=(\S+))$")


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        data = json.loads(self.body)
        assert isinstance(data, dict)
        return data

    @property
    def code(self) -> str | None:
        """The refusal's code, if the body is an error object."""
        error = self.json().get("error")
        return error.get("code") if isinstance(error, dict) else None


@dataclass
class Served:
    url: str
    port: int
    token: str
    process: subprocess.Popen[bytes]
    stderr: bytes = field(default=b"")

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        token: str | None = "",
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> Reply:
        """*method* *path* with ``Authorization: Bearer`` (the server's token by default; None: none), the
        JSON of *body* (or *raw* bytes), and *headers* over the defaults (``Host`` 127.0.0.1:PORT)."""
        sent = {"Host": f"127.0.0.1:{self.port}"}
        token = self.token if token == "" else token
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        data = raw if raw is not None else json.dumps(body).encode() if body is not None else None
        if data is not None:
            sent["Content-Type"] = "application/json"
        sent.update(headers or {})
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in sent.items():
                connection.putheader(name, value)
            connection.putheader("Content-Length", str(len(data or b"")))
            connection.endheaders(data)
            response = connection.getresponse()
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
        finally:
            connection.close()

    def get(self, path: str, **options: Any) -> Reply:
        return self.request("GET", path, **options)

    def post(self, path: str, body: object = None, **options: Any) -> Reply:
        return self.request("POST", path, body, **options)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send *sig*; the exit status (stderr kept in :attr:`stderr`)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        _, err = self.process.communicate(timeout=15)
        self.stderr += err
        return self.process.returncode


def serve(home: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Served:
    """``turnback serve --port 0 ARGS`` as a subprocess, once it printed its start line."""
    process = subprocess.Popen(
        [sys.executable, "-m", "turnback", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(home, env),
        cwd=cwd or ROOT,
    )
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 30)
    line = process.stdout.readline().decode().strip() if ready else ""
    match = START_LINE.match(line)
    if match is None:
        process.kill()
        _, err = process.communicate(timeout=10)
        raise AssertionError(f"turnback serve printed {line!r}; stderr: {err.decode(errors='replace')}")
    return Served(match.group(1), int(match.group(2)), match.group(3), process)


__all__ = ["START_LINE", "Reply", "Served", "serve"]

"""Who may talk to ``turnback serve``, and what every response tells the browser.

One ASGI middleware, in front of every route (static files, the API, the
event stream), checks in this order:

1. ``Host``: only the names the server answers to (the loopback names
   ``127.0.0.1``, ``localhost`` and ``[::1]``, with or without its port, or
   the ``--host`` it was given). A page on another site that rebinds its own
   DNS name to 127.0.0.1 sends its own name, and gets 403.
2. The token, on every ``/api/`` request: ``Authorization: Bearer TOKEN``, or
   the cookie that opening ``/?token=TOKEN`` set (HttpOnly, so no script
   reads it; SameSite=Strict, so no other site's request carries it). Else 401.
3. A request that changes something (any method but GET, HEAD, OPTIONS) whose
   ``Origin`` is not the server's own, or that the browser marks as sent by
   another site (``Sec-Fetch-Site: cross-site``), gets 403.

Every response forbids framing (``X-Frame-Options: DENY``, ``frame-ancestors``),
allows scripts, styles and connections only from the server itself (no
inline script), sends no ``Referer`` (the first address holds the token) and
is never cached.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
ASGIMessage = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[ASGIMessage]]
Send = Callable[[ASGIMessage], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)


def is_loopback(host: str) -> bool:
    """Whether *host* (a name or an address, ``[::1]`` with brackets or not) is this machine's loopback."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """``0.0.0.0`` or ``::``: every address of the machine."""
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_unspecified
    except ValueError:
        return False


def url_host(host: str) -> str:
    """*host* as an address names it: an IPv6 address in brackets."""
    bare = host.strip().strip("[]")
    return f"[{bare}]" if ":" in bare else bare


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The ``Host`` values the server answers to, listening on *host*:*port*."""
    names = set(LOOPBACK_NAMES)
    if not is_loopback(host):
        names.add(url_host(host).lower())
    return frozenset({*names, *(f"{name}:{port}" for name in names)})


def cookie_name(port: int) -> str:
    """The token's cookie, named by the port: cookies ignore ports, and two servers must not share one."""
    return f"turnback_token_{port}"


class Guard:
    """The middleware of the module docstring. *refusal* words a refusal: (status, code, scope) -> body."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        hosts: Iterable[str],
        port: int,
        any_host: bool,
        refusal: Callable[[int, str, Scope], bytes],
    ):
        self.app = app
        self.token = token.encode()
        self.hosts = frozenset(host.lower() for host in hosts)
        self.port = port
        self.any_host = any_host  # listening on every address (--allow-remote): the token is the only check
        self.cookie = cookie_name(port)
        self.refusal = refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        host = headers.get("host", "")
        status, code = 0, ""
        if not self._host_allowed(host):
            status, code = 403, "serve_host_refused"
        elif scope["path"] == "/" and "token" in parse_qs(scope.get("query_string", b"").decode("latin-1")):
            await self._sign_in(scope, send)
            return
        elif scope["path"].startswith("/api/") and not self._authenticated(headers):
            status, code = 401, "serve_token_missing"
        elif scope["method"] not in SAFE_METHODS and not self._same_origin(headers, host):
            status, code = 403, "serve_origin_refused"
        if status:
            await _respond(send, status, self.refusal(status, code, scope), b"application/json")
            return

        async def send_with_headers(message: ASGIMessage) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _host_allowed(self, host: str) -> bool:
        host = host.lower()
        if host in self.hosts:
            return True
        if not self.any_host:
            return False
        name, _, port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
        if port and port != str(self.port):
            return False
        try:
            ipaddress.ip_address((name or host).strip("[]"))
        except ValueError:
            return False
        return True  # an address of this machine: a rebinding page would send its own name

    def _authenticated(self, headers: dict[str, str]) -> bool:
        given = ""
        authorization = headers.get("authorization", "")
        if authorization[:7].lower() == "bearer ":
            given = authorization[7:].strip()
        else:
            given = _cookies(headers.get("cookie", "")).get(self.cookie, "")
        return bool(given) and hmac.compare_digest(given.encode(), self.token)

    def _same_origin(self, headers: dict[str, str], host: str) -> bool:
        if headers.get("sec-fetch-site", "") == "cross-site":
            return False
        origin = headers.get("origin")
        if origin is None:
            return True  # not a browser's cross-site request (browsers send Origin on every POST): the token decides
        return origin.lower() in {f"http://{host.lower()}"}

    async def _sign_in(self, scope: Scope, send: Send) -> None:
        """``/?token=TOKEN``: the cookie, and a redirect to ``/`` so the token leaves the address bar."""
        given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [""])[0]
        if not hmac.compare_digest(given.encode(), self.token):
            await _respond(send, 401, self.refusal(401, "serve_token_wrong", scope), b"application/json")
            return
        cookie = f"{self.cookie}={given}; HttpOnly; SameSite=Strict; Path=/"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [(b"location", b"/"), (b"set-cookie", cookie.encode()), *SECURITY_HEADERS],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}


def _cookies(header: str) -> dict[str, str]:
    cookies: dict[str, str] = {}
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep:
            cookies.setdefault(name, value)
    return cookies


async def _respond(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def json_body(payload: dict[str, Any]) -> bytes:
    return json.dumps({"schema": 1, **payload}, ensure_ascii=False).encode()


__all__ = [
    "CONTENT_SECURITY_POLICY",
    "LOOPBACK_NAMES",
    "Guard",
    "allowed_hosts",
    "cookie_name",
    "is_loopback",
    "is_wildcard",
    "json_body",
    "url_host",
]

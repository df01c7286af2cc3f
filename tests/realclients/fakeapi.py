"""A scripted stand-in for the Anthropic Messages API, on 127.0.0.1, for driving the real Claude Code offline.

Each POST /v1/messages that belongs to the agent's main loop gets the next
reply of the script: text, tool_use blocks (streamed as ``input_json_delta``
like the real API), or an HTTP error. Side requests Claude Code makes on its
own (a title, a quota probe: any request that offers no tools) get a short text
reply and do not use up the script. Every request is logged with its path,
so a test can see exactly what Claude Code asked for.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.realclients.loopback import LoopbackServer


@dataclass(frozen=True)
class Text:
    """An assistant reply of one text block; the turn ends (stop_reason ``end_turn``)."""

    text: str


@dataclass(frozen=True)
class Tool:
    """One ``tool_use`` block; a reply of these has stop_reason ``tool_use``."""

    name: str
    input: dict[str, Any]
    id: str = ""


@dataclass(frozen=True)
class Tools:
    """An assistant reply asking for one or more tool calls (Claude Code runs them, then asks again)."""

    calls: tuple[Tool, ...]
    text: str = ""


@dataclass(frozen=True)
class ApiError:
    """An HTTP error instead of a reply: 529 overloaded, 500 api_error, 400 invalid_request_error."""

    status: int
    kind: str = "api_error"
    message: str = "Internal server error"


@dataclass(frozen=True)
class Hang:
    """Start the stream, then send nothing until the client goes away (for interrupts and kills)."""


@dataclass(frozen=True)
class Held:
    """*reply*, sent only once the test sets *release* (so the test can act while Claude Code waits for it)."""

    reply: Text | Tools | ApiError | Hang
    release: threading.Event


Reply = Text | Tools | ApiError | Hang | Held


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    main: bool  # a request of the agent's loop (it offered tools), answered from the script


@dataclass
class FakeAPI(LoopbackServer):
    """Start with :meth:`start`; ``url`` is what ANTHROPIC_BASE_URL gets. ``script`` is consumed in order."""

    script: list[Reply] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    model: str = "claude-sonnet-4-5"

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.served = threading.Condition(self._lock)
        self.main_served = 0
        self.main_arrived = 0
        self.hanging = threading.Event()

    # -- life ------------------------------------------------------------------------------

    def start(self) -> FakeAPI:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                api._log(self, None)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                api._log(self, None)
                api._not_found(self)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                path = self.path.split("?", 1)[0]
                if path == "/v1/messages" and isinstance(body, dict):
                    api._messages(self, body)
                elif path == "/v1/messages/count_tokens":
                    api._log(self, body)
                    api._json(self, 200, {"input_tokens": 100})
                else:
                    api._log(self, body)
                    api._not_found(self)

        self._serve(Handler, "fakeapi")
        return self

    @property
    def url(self) -> str:
        return self.origin

    def paths(self) -> list[str]:
        with self._lock:
            return [f"{r.method} {r.path}" for r in self.requests]

    def wait_main(self, count: int, timeout: float = 30.0) -> bool:
        """Wait until *count* requests of the agent's loop were answered."""
        with self.served:
            return self.served.wait_for(lambda: self.main_served >= count, timeout)

    def wait_arrived(self, count: int, timeout: float = 30.0) -> bool:
        """Wait until *count* requests of the agent's loop came in (answered or held)."""
        with self.served:
            return self.served.wait_for(lambda: self.main_arrived >= count, timeout)

    # -- answering -------------------------------------------------------------------------

    def _log(self, handler: BaseHTTPRequestHandler, body: Any, *, main: bool = False) -> None:
        with self._lock:
            self.requests.append(
                Request(handler.command, handler.path, {k.lower(): v for k, v in handler.headers.items()}, body, main)
            )

    @staticmethod
    def _json(handler: BaseHTTPRequestHandler, status: int, data: Any) -> None:
        raw = json.dumps(data).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)

    def _not_found(self, handler: BaseHTTPRequestHandler) -> None:
        self._json(handler, 404, {"type": "error", "error": {"type": "not_found_error", "message": "not here"}})

    def _messages(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        main = bool(body.get("tools"))
        self._log(handler, body, main=main)
        reply: Reply
        if main:
            with self.served:
                reply = self.script.pop(0) if self.script else Text("(the script has no more replies)")
                self.main_arrived += 1
                self.served.notify_all()
        else:
            reply = Text("Fake title")
        if isinstance(reply, Held):
            reply.release.wait(60)
            reply = reply.reply
        if isinstance(reply, ApiError):
            self._json(
                handler, reply.status, {"type": "error", "error": {"type": reply.kind, "message": reply.message}}
            )
        elif body.get("stream"):
            self._stream(handler, reply, body)
        else:
            self._json(handler, 200, self._whole(reply, body))
        if main:
            with self.served:
                self.main_served += 1
                self.served.notify_all()

    def _blocks(self, reply: Reply) -> tuple[list[dict[str, Any]], str]:
        if isinstance(reply, Text):
            return [{"type": "text", "text": reply.text}], "end_turn"
        if isinstance(reply, Tools):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
            for call in reply.calls:
                use_id = call.id or f"toolu_fake{next(self._ids):04d}"
                blocks.append({"type": "tool_use", "id": use_id, "name": call.name, "input": call.input})
            return blocks, "tool_use"
        return [], "end_turn"

    def _message(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"msg_fake{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": str(body.get("model") or self.model),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }

    def _whole(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        blocks, stop = self._blocks(reply)
        return {**self._message(body), "content": blocks, "stop_reason": stop}

    def _stream(self, handler: BaseHTTPRequestHandler, reply: Reply, body: dict[str, Any]) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True

        def send(event: str, data: dict[str, Any]) -> None:
            handler.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
            handler.wfile.flush()

        try:
            send("message_start", {"type": "message_start", "message": self._message(body)})
            if isinstance(reply, Hang):
                send("ping", {"type": "ping"})
                self.hanging.set()
                while True:  # until the client hangs up (an interrupt) or the server stops
                    if self._server is None:
                        return
                    threading.Event().wait(0.2)
                    send("ping", {"type": "ping"})
            blocks, stop = self._blocks(reply)
            for index, block in enumerate(blocks):
                if block["type"] == "text":
                    send(
                        "content_block_start",
                        {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                    )
                    delta = {"type": "text_delta", "text": block["text"]}
                else:
                    start = {**block, "input": {}}
                    send("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})
                    delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                send("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
                send("content_block_stop", {"type": "content_block_stop", "index": index})
            send(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            )
            send("message_stop", {"type": "message_stop"})
        except (BrokenPipeError, ConnectionResetError):
            pass

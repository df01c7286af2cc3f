"""A scripted stand-in for the OpenAI Responses API, on 127.0.0.1, for driving the real Codex CLI offline.

Codex reaches it through a custom ``[model_providers.X]`` with ``base_url``
and ``wire_api = "responses"``. Each ``POST /v1/responses`` gets the next
reply of the script, streamed as server-sent events the way the real API
does (``response.created``, per item ``response.output_item.added`` /
``response.output_item.done``, ``response.completed``). Every request is
logged, so a test can see exactly what Codex asked for.
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
class Say:
    """An assistant message; the turn ends."""

    text: str


@dataclass(frozen=True)
class Shell:
    """An ``exec_command`` function call (Codex's shell tool; its hooks name it ``Bash``)."""

    cmd: str


@dataclass(frozen=True)
class Patch:
    """An ``apply_patch`` custom tool call: *patch* is the raw patch text."""

    patch: str


@dataclass(frozen=True)
class Hang:
    """Start the stream, then send nothing until the client goes away (for interrupts)."""


Reply = Say | Shell | Patch | Hang


@dataclass
class FakeResponses(LoopbackServer):
    script: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.hanging = threading.Event()

    def start(self) -> FakeResponses:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                with api._lock:
                    api.requests.append({"method": "GET", "path": self.path})
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                with api._lock:
                    api.requests.append({"method": "POST", "path": self.path, "body": body})
                    reply = api.script.pop(0) if api.script else Say("(the script has no more replies)")
                api._stream(self, reply)

        self._serve(Handler, "fakeresponses")
        return self

    @property
    def url(self) -> str:
        return self.origin + "/v1"

    def paths(self) -> list[str]:
        with self._lock:
            return [f"{r['method']} {r['path']}" for r in self.requests]

    def _item(self, reply: Reply) -> dict[str, Any]:
        n = next(self._ids)
        if isinstance(reply, Shell):
            arguments = json.dumps({"cmd": reply.cmd})
            return {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": "exec_command",
                "arguments": arguments,
                "status": "completed",
            }
        if isinstance(reply, Patch):
            return {
                "type": "custom_tool_call",
                "id": f"ctc_{n}",
                "call_id": f"call_{n}",
                "name": "apply_patch",
                "input": reply.patch,
                "status": "completed",
            }
        text = reply.text if isinstance(reply, Say) else ""
        return {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{n}",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }

    def _stream(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True

        def send(data: dict[str, Any]) -> None:
            handler.wfile.write(f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode())
            handler.wfile.flush()

        response_id = f"resp_{next(self._ids)}"
        try:
            send({"type": "response.created", "response": {"id": response_id}})
            if isinstance(reply, Hang):
                self.hanging.set()
                while self._server is not None:  # until the client hangs up (an interrupt) or the server stops
                    threading.Event().wait(0.2)
                    handler.wfile.write(b": keep-alive\n\n")
                    handler.wfile.flush()
                return
            item = self._item(reply)
            send({"type": "response.output_item.added", "item": item})
            send({"type": "response.output_item.done", "item": item})
            usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
            send({"type": "response.completed", "response": {"id": response_id, "usage": usage}})
        except (BrokenPipeError, ConnectionResetError):
            pass

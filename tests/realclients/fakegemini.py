"""A scripted stand-in for the Gemini API's ``streamGenerateContent``, on 127.0.0.1, for the real Gemini CLI.

Gemini CLI reaches it through ``GOOGLE_GEMINI_BASE_URL`` (with
``GEMINI_API_KEY`` and ``security.auth.selectedType = "gemini-api-key"``).
Each ``POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`` gets the next
reply of the script as one server-sent event (a candidate whose parts are a
text or a ``functionCall``); any other POST (Gemini CLI's own side requests,
such as routing with ``generateContent``) gets a short JSON text and uses up
nothing. Every request is logged.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.realclients.loopback import LoopbackServer


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Call:
    """A ``functionCall`` part: Gemini CLI runs the tool *name* with *args*, then asks again."""

    name: str
    args: dict[str, Any]


Reply = Text | Call


@dataclass
class FakeGemini(LoopbackServer):
    script: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def start(self) -> FakeGemini:
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
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with api._lock:
                    api.requests.append({"method": "POST", "path": self.path})
                if ":streamGenerateContent" not in self.path:
                    api._side(self)
                    return
                with api._lock:
                    reply = api.script.pop(0) if api.script else Text("(the script has no more replies)")
                api._stream(self, reply)

        self._serve(Handler, "fakegemini")
        return self

    @property
    def url(self) -> str:
        return self.origin

    @staticmethod
    def _candidate(parts: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        }

    def _side(self, handler: BaseHTTPRequestHandler) -> None:
        raw = json.dumps(self._candidate([{"text": "{}"}])).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)

    def _stream(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        part = (
            {"text": reply.text}
            if isinstance(reply, Text)
            else {"functionCall": {"name": reply.name, "args": reply.args}}
        )
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        try:
            handler.wfile.write(f"data: {json.dumps(self._candidate([part]))}\r\n\r\n".encode())
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

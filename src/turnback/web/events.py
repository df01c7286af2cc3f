"""``GET /api/v1/events``: Server-Sent Events, one whenever a session's records change.

One poller serves every listener: every :data:`POLL_S` it asks the store for
its change counter (``Engine.data_version``, one cheap read, in an engine of
its own so that the server's own applies count as changes too); when it moved,
it reads each session's newest turn, call and operation and a marker of its
records (``Engine.activity``), and each session whose marker changed is an
event ``{"session", "turn", "call", "operation"}``: the page re-reads what it
shows of that session. A comment line every :data:`PING_S` lets the page
notice a lost connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from turnback import Engine, TurnbackError, boundary

from .worker import EngineThread

POLL_S = 0.3
PING_S = 10.0
RETRY_MS = 1000  # how soon a browser's EventSource connects again after losing the stream


class Events:
    """The poller and its listeners (one queue each)."""

    def __init__(self, engine: EngineThread, *, home: str):
        self.engine = engine
        self.home = home
        self.listeners: set[asyncio.Queue[dict[str, Any]]] = set()
        self.closing = asyncio.Event()
        self._poller: asyncio.Task[None] | None = None
        # Set once the poller has read what every session holds: a stream says "connected" only then, so a
        # change made right after a client connects is an event, not part of what the poller started from.
        self._started_from = asyncio.Event()

    def close(self) -> None:
        """End every stream (the server is stopping): a browser's EventSource would hold it open for good."""
        self.closing.set()
        if self._poller is not None:
            self._poller.cancel()

    async def _poll(self) -> None:
        version: int | None = None
        markers: dict[str, str] = {}
        first = True
        while not self.closing.is_set() and self.listeners:  # with no one listening it ends; a stream starts it
            try:
                now = await self.engine.call(Engine.data_version)
                if now != version:
                    version = now
                    seen = await self.engine.call(Engine.activity)
                    for item in seen:
                        if not first and markers.get(item.session_id) != item.marker:
                            self._send(
                                {
                                    "session": item.session_id,
                                    "turn": item.turn_id,
                                    "call": item.call_id,
                                    "operation": item.op_id,
                                }
                            )
                    markers, first = {item.session_id: item.marker for item in seen}, False
                    self._started_from.set()
            except TurnbackError:
                pass  # the store cannot be read just now (locked, being repaired): the next poll tries again
            except Exception:
                boundary.log_unexpected(self.home, "turnback serve events")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.closing.wait(), POLL_S)

    def _send(self, event: dict[str, Any]) -> None:
        for queue in self.listeners:
            queue.put_nowait(event)

    async def stream(self, request: Request) -> Response:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.listeners.add(queue)
        if self._poller is None or self._poller.done():
            self._started_from = asyncio.Event()
            self._poller = asyncio.create_task(self._poll())
        started_from = self._started_from

        async def lines() -> AsyncIterator[str]:
            try:
                with contextlib.suppress(TimeoutError):  # a store that cannot be read now: connected all the same
                    await asyncio.wait_for(started_from.wait(), PING_S)
                yield f"retry: {RETRY_MS}\n: connected\n\n"
                while not self.closing.is_set():
                    closing = asyncio.ensure_future(self.closing.wait())
                    getting = asyncio.ensure_future(queue.get())
                    done, _ = await asyncio.wait({closing, getting}, timeout=PING_S, return_when="FIRST_COMPLETED")
                    closing.cancel()
                    if getting in done:
                        yield f"data: {json.dumps({'schema': 1, **getting.result()})}\n\n"
                    else:
                        getting.cancel()
                        if not self.closing.is_set():
                            yield ": ping\n\n"
            finally:
                self.listeners.discard(queue)

        del request
        return StreamingResponse(lines(), media_type="text/event-stream", headers={"x-accel-buffering": "no"})


__all__ = ["PING_S", "POLL_S", "Events"]

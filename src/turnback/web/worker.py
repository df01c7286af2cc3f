"""The engine, in a thread of its own: an SQLite connection belongs to the thread that opened it, so every
call to it runs there, one at a time, as the CLI's commands would one after the other; and a route's answer
(its status and JSON object), a refusal turned into the CLI's error object with the status of its kind."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, TypeVar

import turnback
from turnback import Engine, boundary
from turnback.catalog import language
from turnback.engine import KeptStore

T = TypeVar("T")

# Errors that name something the request's path or body points at and the store does not have for this session.
NOT_FOUND = frozenset(
    {
        "id_prefix_unknown",
        "id_not_hex",
        "no_such_turn",
        "no_such_turn_number",
        "turn_of_another_session",
        "turn_of_another_session_refused",
        "serve_call_of_another_session",
        "serve_plan_of_another_session",
        "serve_not_found",
    }
)


class Answer(NamedTuple):
    """A route's answer: its HTTP status and its JSON object (``"schema": 1`` is added)."""

    status: int
    body: Mapping[str, Any]


def status_of(error: turnback.TurnbackError) -> int:
    """The HTTP status of a refusal: 404 not found or not this session's, 423 busy, 400 bad input, 409 conflict."""
    if error.code in NOT_FOUND:
        return 404
    if isinstance(error, turnback.BusyError):
        return 423
    if isinstance(error, turnback.UsageError):
        return 400
    if isinstance(error, turnback.StoreError):
        return 503
    return 409  # refused: the state of the session or its files says no (stale head, changed since the plan)


def refusal(error: turnback.TurnbackError) -> Answer:
    return Answer(status_of(error), boundary.refusal_data(error, error.exit_code))


class EngineThread:
    """The store, opened on first use in a thread of its own and kept open there (``engine.KeptStore``: opened
    again when a new opening would give another store, its database deleted or made again in its place, so no
    request is answered from, or recorded into, a database no one reads); every call to it runs there, one at a
    time, with an engine of its own."""

    def __init__(self, open_engine: Callable[[], Engine]):
        self._kept = KeptStore(open_engine)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="turnback-engine")

    async def call(self, work: Callable[[Engine], T], lang: str = "en") -> T:
        """*work* run with the engine, its messages worded in *lang*."""
        return await self._in_thread(lang, lambda: self._with_engine(work))

    async def run(self, lang: str, work: Callable[[Engine], Answer]) -> Answer:
        """*work*'s answer; a refusal, opening the store's among them, becomes its error object, worded in *lang*."""
        return await self._in_thread(lang, lambda: _refusing(lambda: self._with_engine(work)))

    async def _in_thread(self, lang: str, job: Callable[[], T]) -> T:
        context = contextvars.copy_context()
        context.run(language.set, lang)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, context.run, job)

    def _with_engine(self, work: Callable[[Engine], T]) -> T:
        with self._kept.lent() as engine:
            return work(engine)

    def close(self) -> None:
        self._executor.submit(self._kept.close).result()
        self._executor.shutdown()


def _refusing(answer: Callable[[], Answer]) -> Answer:
    try:
        return answer()
    except turnback.TurnbackError as error:
        return refusal(error)


__all__ = ["NOT_FOUND", "Answer", "EngineThread", "refusal", "status_of"]

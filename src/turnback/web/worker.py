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
    """The engine, opened on first use in a thread of its own; every call to it runs there, one at a time."""

    def __init__(self, open_engine: Callable[[], Engine]):
        self._open = open_engine
        self._engine: Engine | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="turnback-engine")

    async def call(self, work: Callable[[Engine], T], lang: str = "en") -> T:
        """*work* run with the engine, its messages worded in *lang*."""
        context = contextvars.copy_context()
        context.run(language.set, lang)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, context.run, self._with_engine, work)

    async def run(self, lang: str, work: Callable[[Engine], Answer]) -> Answer:
        """*work*'s answer; a refusal becomes its error object, worded in *lang*."""
        return await self.call(lambda engine: _refusing(work, engine), lang)

    def _with_engine(self, work: Callable[[Engine], T]) -> T:
        if self._engine is None:
            self._engine = self._open()
        return work(self._engine)

    def close(self) -> None:
        def close_engine() -> None:
            if self._engine is not None:
                self._engine.close()

        self._executor.submit(close_engine).result()
        self._executor.shutdown()


def _refusing(work: Callable[[Engine], Answer], engine: Engine) -> Answer:
    try:
        return work(engine)
    except turnback.TurnbackError as error:
        return refusal(error)


__all__ = ["NOT_FOUND", "Answer", "EngineThread", "refusal", "status_of"]

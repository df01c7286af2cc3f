"""The HTTP API and the page's files: a Starlette app over one :class:`~turnback.Engine`.

Each route parses its request, calls the engine, and answers with the JSON
object the CLI prints with ``--json`` for the same verb (``render/data.py``),
with ``"schema": 1``. Nothing here decides what may be taken back: the
engine's plans, busy checks and compare-and-swap do. A refusal is the CLI's
error object (``code``, ``params``, ``message``), worded in the request's
language, with the HTTP status of its kind (:func:`status_of`).

The engine lives in one thread of its own (an SQLite connection belongs to
the thread that opened it), so requests reach it one at a time, as the CLI's
commands would one after the other.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

import turnback
from turnback import Engine, boundary
from turnback.catalog import LANGUAGES, Message, choose_language, entries, language, word
from turnback.render import data

from . import security

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
MAX_BODY_BYTES = 64 << 10  # a request body is a few fields; anything larger is not one of ours

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

# The catalog codes the page words its own labels with; every other text it shows comes worded in a body.
PAGE_CODE_PREFIXES = ("label_", "web_", "mark_", "op_", "kind_", "action_")

LANGUAGE_NAMES = {"en": "English", "zh-CN": "简体中文", "ja": "日本語"}


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

    async def run(self, lang: str, work: Callable[[Engine], Answer]) -> Answer:
        """*work* run with the engine, its messages worded in *lang*; a refusal becomes its error object."""
        context = contextvars.copy_context()
        context.run(language.set, lang)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, context.run, self._call, work)

    def _call(self, work: Callable[[Engine], Answer]) -> Answer:
        try:
            if self._engine is None:
                self._engine = self._open()
            return work(self._engine)
        except turnback.TurnbackError as error:
            return refusal(error)

    def close(self) -> None:
        def close_engine() -> None:
            if self._engine is not None:
                self._engine.close()

        self._executor.submit(close_engine).result()
        self._executor.shutdown()


def accepted_language(header: str) -> str | None:
    """The first of turnback's languages an ``Accept-Language`` header asks for, by its weights."""
    wanted: list[tuple[float, int, str]] = []
    for index, part in enumerate(header.split(",")):
        tag, _, params = part.strip().partition(";")
        weight = 1.0
        if params.strip().startswith("q="):
            try:
                weight = float(params.strip()[2:])
            except ValueError:
                continue
        if tag and weight > 0:
            wanted.append((-weight, index, tag.strip()))
    for _, _, tag in sorted(wanted):
        chosen = choose_language(tag) or choose_language(tag.split("-")[0])
        if chosen is not None:
            return chosen
    return None


class Api:
    """The routes, over an :class:`EngineThread`; *default_lang*: the language without ``?lang=`` or a header."""

    def __init__(self, engine: EngineThread, *, home: str, default_lang: str, project: str | None):
        self.engine = engine
        self.home = home
        self.default_lang = default_lang
        self.project = project

    # -- the request's language and body ---------------------------------------------------

    def language_of(self, request: Request) -> tuple[str, str | None]:
        """``?lang=``, else ``Accept-Language``, else the server's default (TURNBACK_LANG, config, locale);
        and a ``?lang=`` that names none of the languages, if given."""
        lang = accepted_language(request.headers.get("accept-language", "")) or self.default_lang
        given = request.query_params.get("lang")
        if given is None:
            return lang, None
        chosen = choose_language(given)
        return (chosen, None) if chosen is not None else (lang, given)

    def refused(self, request: Request, status: int, error: turnback.TurnbackError) -> Response:
        """A refusal the server makes itself, as an error object worded in the request's language."""
        lang, _ = self.language_of(request)
        context = contextvars.copy_context()
        context.run(language.set, lang)
        return _json_response(Answer(status, context.run(boundary.refusal_data, error, error.exit_code)))

    def words(self, status: int, code: str, scope: security.Scope) -> bytes:
        """A refusal the guard makes (Host, token, Origin) as the body of its response."""
        return bytes(self.refused(Request(scope), status, turnback.RefusedError(Message(code))).body)

    async def answer(self, request: Request, work: Callable[[Engine], Answer]) -> Response:
        lang, unknown = self.language_of(request)
        if unknown is not None:
            known = Message("comma_list", items=LANGUAGES)
            error = turnback.UsageError(Message("unknown_language", value=unknown, source="lang", known=known))
            return self.refused(request, 400, error)
        try:
            answered = await self.engine.run(lang, work)
        except Exception:
            logged = boundary.log_unexpected(self.home, "turnback serve")
            message = "unexpected error" + (f" (logged in {logged})" if logged else "")
            answered = Answer(500, boundary.error_data("unexpected", message, 70))
        return _json_response(answered)

    async def not_routed(self, request: Request, exc: Exception) -> Response:
        """Starlette's own refusals (no such route, a method it does not take) as error objects."""
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        code = "serve_method_not_allowed" if status == 405 else "serve_not_found"
        return self.refused(request, status, turnback.UsageError(Message(code)))

    # -- reading ---------------------------------------------------------------------------

    async def sessions(self, request: Request) -> Response:
        project = request.query_params.get("project") or self.project

        def work(engine: Engine) -> Answer:
            sessions = engine.sessions(project)
            defaults = {
                engine.default_session([s for s in sessions if s.project_id == project_id]).id
                for project_id in {session.project_id for session in sessions}
            }
            listed = [(s, engine.project_of(s), len(engine.log(s.id))) for s in sessions]
            return Answer(200, data.sessions_data(listed, defaults))

        return await self.answer(request, work)

    async def history(self, request: Request) -> Response:
        ref = request.path_params["session"]

        def work(engine: Engine) -> Answer:
            session_id = engine.session(ref).id
            engine.mark_interrupted(session_id)
            turns = engine.log(session_id)
            session = engine.session(session_id)
            active = {turn.id for turn in engine.active_line(session_id)}
            resent = {turn.id for turn in turns if turn.resent}
            notes = engine.overlap_notes
            return Answer(200, data.history_data(session, turns, active=active, resent=resent, notes=notes))

        return await self.answer(request, work)

    async def status(self, request: Request) -> Response:
        ref = request.path_params["session"]

        def work(engine: Engine) -> Answer:
            session_id = engine.session(ref).id
            engine.catch_up(session_id)
            return Answer(200, data.status_data(engine.status(session_id)))

        return await self.answer(request, work)

    async def call(self, request: Request) -> Response:
        ref, call_ref = request.path_params["session"], request.path_params["call"]

        def work(engine: Engine) -> Answer:
            session = engine.session(ref)
            call = session_call(engine, session, call_ref)
            hidden = engine.call_hidden(call)
            raw = engine.call_input(call)
            view = data.call_view_data(
                call,
                engine.turn_of(call),
                engine.load,
                raw_input=raw,
                missing_input=engine.missing_input_reason(call) if raw is None else None,
                hidden=hidden.paths,
                hide_error=hidden.text,
                notes=engine.overlap_notes(call),
            )
            return Answer(200, {"call": view})

        return await self.answer(request, work)

    async def messages(self, request: Request) -> Response:
        """The page's labels in the request's language, the languages to switch to, and the one chosen."""

        def work(engine: Engine) -> Answer:
            del engine
            lang = language.get()
            words = {code: word(Message(code), lang) for code in entries("en") if code.startswith(PAGE_CODE_PREFIXES)}
            languages = [{"code": code, "name": LANGUAGE_NAMES[code]} for code in LANGUAGES]
            return Answer(200, {"lang": lang, "languages": languages, "messages": words})

        return await self.answer(request, work)


def _json_response(answered: Answer) -> Response:
    body = json.dumps({"schema": 1, **answered.body}, ensure_ascii=False)
    return Response(body, status_code=answered.status, media_type="application/json")


def session_call(engine: Engine, session: turnback.Session, call_ref: str) -> turnback.Call:
    """The call *call_ref* names, as it stands, if it is *session*'s (another session's is not found here)."""
    call = engine.call_as_it_stands(call_ref)
    if call.session_id != session.id:
        raise turnback.UsageError(
            Message(
                "serve_call_of_another_session", call=turnback.short_id(call.id), session=turnback.short_id(session.id)
            )
        )
    return call


async def index(request: Request) -> Response:
    del request
    return FileResponse(os.path.join(STATIC, "index.html"), media_type="text/html; charset=utf-8")


def routes(api: Api) -> list[BaseRoute]:
    v1 = "/api/v1"
    return [
        Route("/", index, methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
        Route(f"{v1}/messages", api.messages, methods=["GET"]),
        Route(f"{v1}/sessions", api.sessions, methods=["GET"]),
        Route(f"{v1}/sessions/{{session}}/history", api.history, methods=["GET"]),
        Route(f"{v1}/sessions/{{session}}/status", api.status, methods=["GET"]),
        Route(f"{v1}/sessions/{{session}}/calls/{{call}}", api.call, methods=["GET"]),
    ]


def build_app(
    engine: EngineThread,
    *,
    home: str,
    token: str,
    host: str,
    port: int,
    default_lang: str,
    project: str | None = None,
) -> security.ASGIApp:
    """The app behind its :class:`~turnback.web.security.Guard`, listening on *host*:*port*."""
    api = Api(engine, home=home, default_lang=default_lang, project=project)
    app = Starlette(routes=routes(api), exception_handlers={HTTPException: api.not_routed})
    return security.Guard(
        app,
        token=token,
        hosts=security.allowed_hosts(host, port),
        port=port,
        any_host=security.is_wildcard(host),
        refusal=api.words,
    )


__all__ = ["Answer", "Api", "EngineThread", "accepted_language", "build_app", "status_of"]

"""The HTTP API and the page's files: a Starlette app over the engine (``worker.EngineThread``).

Each route parses its request, calls the engine, and answers with the JSON
object the CLI prints with ``--json`` for the same verb (``render/data.py``),
with ``"schema": 1``. Nothing here decides what may be taken back: the
engine's plans, busy checks and compare-and-swap do. A refusal is the CLI's
error object (``code``, ``params``, ``message``), worded in the request's
language, with the HTTP status of its kind (:func:`status_of`).

Requests reach their engine one at a time, in a thread of its own, as the
CLI's commands would one after the other; the event stream polls another.
"""

from __future__ import annotations

import contextvars
import json
import os
import socket
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

import turnback
from turnback import Engine, boundary
from turnback.catalog import LANGUAGES, Message, choose_language, entries, language, word
from turnback.render import data, text

from . import openapi, security
from .bodies import MAX_BODY_BYTES, REDO, RESEND, REVERT, ROLLBACK, UNDO, Body
from .events import Events
from .page_codes import PAGE_CODES
from .worker import Answer, EngineThread

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")

EXIT_UNEXPECTED = 70  # what the CLI exits with for a bug: the error object says so too
LANGUAGE_NAMES = {"en": "English", "zh-CN": "简体中文", "ja": "日本語"}


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
        self.host = socket.gethostname()  # a confirmation names the machine whose files it writes
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
            said = Message("unexpected_error_logged", log=logged) if logged else Message("unexpected_error")
            answered = Answer(500, boundary.error_data("unexpected", word(said, lang), EXIT_UNEXPECTED))
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
            if project is not None and "\0" in project:  # a query can hold what no command line can
                raise turnback.UsageError(Message("path_has_nul", path=repr(project)))
            sessions = engine.sessions(project)
            listed = [(s, engine.project_of(s), len(engine.log(s.id))) for s in sessions]
            return Answer(200, data.sessions_data(listed, engine.default_sessions(sessions)))

        return await self.answer(request, work)

    async def of_session(self, request: Request, work: Callable[[Engine, turnback.Session], Answer]) -> Response:
        """A GET of one session's: *work* with the session the address names."""
        ref = request.path_params["session"]
        return await self.answer(request, lambda engine: work(engine, engine.session(ref)))

    async def history(self, request: Request) -> Response:
        def work(engine: Engine, session: turnback.Session) -> Answer:
            engine.mark_interrupted(session.id)
            turns = engine.log(session.id)
            session = engine.session(session.id)  # its head as marking interrupted turns left it
            active = {turn.id for turn in engine.active_line(session.id)}
            resent = {turn.id for turn in turns if turn.resent}
            notes = engine.overlap_notes
            undo_next = engine.undo_next(session.id)
            history = data.history_data(
                session, turns, active=active, resent=resent, undo_next=undo_next, notes=notes, load=engine.load
            )
            return Answer(200, history)

        return await self.of_session(request, work)

    async def status(self, request: Request) -> Response:
        def work(engine: Engine, session: turnback.Session) -> Answer:
            engine.catch_up(session.id)
            return Answer(200, data.status_data(engine.status(session.id)))

        return await self.of_session(request, work)

    async def files(self, request: Request) -> Response:
        return await self.of_session(
            request, lambda engine, session: Answer(200, data.files_data(engine.files(session.id)))
        )

    async def call(self, request: Request) -> Response:
        call_ref = request.path_params["call"]

        def work(engine: Engine, session: turnback.Session) -> Answer:
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

        return await self.of_session(request, work)

    # -- taking back: plan, then apply the plan shown ----------------------------------------

    async def post(
        self, request: Request, body: Body, work: Callable[[Engine, turnback.Session, dict[str, Any]], Answer]
    ) -> Response:
        raw = bytearray()
        async for chunk in request.stream():  # read no further than a body can be: its parse refuses it
            raw += chunk
            if len(raw) > MAX_BODY_BYTES:
                break
        ref = request.path_params["session"]

        def parsed(engine: Engine) -> Answer:
            fields = body.parse(bytes(raw))
            return work(engine, engine.session(ref), fields)

        return await self.answer(request, parsed)

    def preview(self, engine: Engine, plan: turnback.Plan, extra: Mapping[str, Any] | None = None) -> Answer:
        shown = [row.path for row in plan.rows if row.conflict or row.acts]
        hidden = engine.hidden_paths(plan.session_id, shown)
        return Answer(200, {**data.plan_view_data(plan, engine.load, hidden=hidden, host=self.host), **(extra or {})})

    async def revert(self, request: Request) -> Response:
        call_ref = request.path_params["call"]

        def work(engine: Engine, session: turnback.Session, fields: dict[str, Any]) -> Answer:
            call = session_call(engine, session, call_ref)
            anyway = bool(fields.get("anyway"))
            if not fields.get("apply"):
                return self.preview(engine, engine.plan_revert(call.id, anyway=anyway))
            plan = shown_plan(engine, session, fields, "revert")
            if plan.call_id != call.id:
                raise turnback.UsageError(
                    Message(
                        "serve_plan_of_another_call", op=turnback.short_id(plan.id), call=turnback.short_id(call.id)
                    )
                )
            return applied(engine, engine.plan_again(plan, anyway=True) if anyway and not plan.force else plan)

        return await self.post(request, REVERT, work)

    async def undo(self, request: Request) -> Response:
        def work(engine: Engine, session: turnback.Session, fields: dict[str, Any]) -> Answer:
            force = bool(fields.get("force"))
            if not fields.get("apply"):
                turn, from_turn = _ref(fields.get("turn")), _ref(fields.get("from"))
                return self.preview(engine, engine.plan_undo(session.id, turn=turn, from_turn=from_turn, force=force))
            plan = shown_plan(engine, session, fields, "undo")
            return applied(engine, engine.plan_again(plan, anyway=True) if force and not plan.force else plan)

        return await self.post(request, UNDO, work)

    async def redo(self, request: Request) -> Response:
        def work(engine: Engine, session: turnback.Session, fields: dict[str, Any]) -> Answer:
            if not fields.get("apply"):
                return self.preview(engine, engine.plan_redo(session.id))
            return applied(engine, shown_plan(engine, session, fields, "redo"))

        return await self.post(request, REDO, work)

    async def rollback(self, request: Request) -> Response:
        def work(engine: Engine, session: turnback.Session, fields: dict[str, Any]) -> Answer:
            node, expect_head = str(fields["node"]), _ref(fields.get("expect_head"))
            if not fields.get("apply"):
                plan = engine.plan_rollback(session.id, node, expect_head=expect_head)
            else:
                plan = shown_plan(engine, session, fields, "rollback")
                seen = None if expect_head in (None, "0", "start") else engine.turn(session.id, expect_head).id
                if expect_head is not None and seen != plan.head_from:
                    # The head the page saw must be the one its preview saw (applying checks it is still the head).
                    raise turnback.RefusedError(Message("serve_expect_head_not_plans", given=expect_head))
            numbers = {turn.id: turn.number for turn in engine.log(session.id)}
            extra = {
                "turns": list(plan.turn_ids),
                "turn_numbers": [numbers[turn_id] for turn_id in plan.turn_ids if turn_id in numbers],
                "files": data.going_back_data(plan, engine.load),
            }
            return applied(engine, plan, extra) if fields.get("apply") else self.preview(engine, plan, extra)

        return await self.post(request, ROLLBACK, work)

    async def resend(self, request: Request) -> Response:
        def work(engine: Engine, session: turnback.Session, fields: dict[str, Any]) -> Answer:
            choice = fields.get("choice")
            if choice is None:
                plan = engine.plan_resend(session.id, str(fields["message"]), mode="revert")
                files = data.resend_files_data(engine.resend_files(plan))
                return self.preview(engine, plan, {"files": files, "resent": False})
            plan = shown_plan(engine, session, fields, "resend")
            files = data.resend_files_data(engine.resend_files(plan))
            if choice == "cancel":
                return Answer(200, {"files": files, **data.plan_data(plan, applied=False), "resent": False})
            if not fields.get("apply"):
                raise turnback.UsageError(Message("serve_apply_required", choice=choice))
            if choice != plan.resend_mode:
                plan = engine.plan_again(plan, mode=choice)
            result = applied(engine, plan, {"files": files})
            resent = result.status == 200 and not any(
                note.get("code") == "nothing_resent" for note in result.body["notes"]
            )
            return Answer(result.status, {**result.body, "resent": resent})

        return await self.post(request, RESEND, work)

    async def messages(self, request: Request) -> Response:
        """The page's labels in the request's language, the languages to switch to, and the one chosen."""

        def work(engine: Engine) -> Answer:
            del engine
            lang = language.get()
            table = entries(lang)
            # Templates with their {placeholders}: the page fills them in (one form: the page counts nothing).
            words = {code: (table.get(code) or entries("en")[code]).form(lang, None) for code in PAGE_CODES}
            languages = [{"code": code, "name": LANGUAGE_NAMES[code]} for code in LANGUAGES]
            return Answer(200, {"lang": lang, "languages": languages, "messages": words})

        return await self.answer(request, work)


def _ref(value: object) -> str | None:
    return None if value is None else str(value)


def shown_plan(engine: Engine, session: turnback.Session, fields: Mapping[str, Any], kind: str) -> turnback.Plan:
    """The plan the request confirms: its ``plan`` id, required, of *session* and of this route's *kind*."""
    ref = fields.get("plan")
    if ref is None:
        raise turnback.UsageError(Message("serve_plan_required"))
    plan = engine.plan(ref)
    if plan.session_id != session.id:
        raise turnback.UsageError(
            Message(
                "serve_plan_of_another_session", op=turnback.short_id(plan.id), session=turnback.short_id(session.id)
            )
        )
    if plan.kind != kind:
        raise turnback.UsageError(
            Message("serve_plan_other_operation", op=turnback.short_id(plan.id), kind=plan.kind, route=kind)
        )
    return plan


def applied(engine: Engine, plan: turnback.Plan, extra: Mapping[str, Any] | None = None) -> Answer:
    """*plan* applied: the result (200); 409 with the result inside when nothing was done because what the
    files hold changed since the plan (each row's compare-and-swap said so)."""
    if plan.kind in TAKEN_BACK_AS_SHOWN and plan.status != "applying" and not plan.acting_rows and plan.force_only_rows:
        error = turnback.RefusedError(text.force_only_message(plan))  # as the CLI: not applied at all
        return Answer(409, {**data.plan_data(plan, applied=False), **(extra or {}), **boundary.refusal_data(error, 1)})
    result = engine.apply(plan)
    body = {**data.result_data(result), **(extra or {})}
    changed = [row for row in result.plan.rows if row.note is not None and row.note.code in CHANGED_SINCE_PLAN]
    if changed and not result.changed:
        error = turnback.RefusedError(changed[0].note or Message("plan_again"))
        return Answer(409, {**body, **boundary.refusal_data(error, error.exit_code)})
    return Answer(200, body)


CHANGED_SINCE_PLAN = frozenset({"changed_since_preview", "refs_moved_together"})
# What the CLI applies only when a row acts (revert, undo, redo: _common.take_back); a rollback or resend
# applies as planned (a resend drops what it cannot take back; a rollback moves the head).
TAKEN_BACK_AS_SHOWN = frozenset({"revert", "undo", "redo"})


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


async def openapi_document(request: Request) -> Response:
    del request
    return JSONResponse(openapi.document())


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
        Route(f"{v1}/sessions/{{session}}/files", api.files, methods=["GET"]),
        Route(f"{v1}/sessions/{{session}}/calls/{{call}}", api.call, methods=["GET"]),
        Route(f"{v1}/sessions/{{session}}/calls/{{call}}/revert", api.revert, methods=["POST"]),
        Route(f"{v1}/sessions/{{session}}/undo", api.undo, methods=["POST"]),
        Route(f"{v1}/sessions/{{session}}/redo", api.redo, methods=["POST"]),
        Route(f"{v1}/sessions/{{session}}/rollback", api.rollback, methods=["POST"]),
        Route(f"{v1}/sessions/{{session}}/resend", api.resend, methods=["POST"]),
    ]


class Site(NamedTuple):
    """The app, and what the server calls as it stops: *stopping* ends the event streams (before it waits for
    open connections), *close* closes the engines (after)."""

    app: security.ASGIApp
    stopping: Callable[[], None]
    close: Callable[[], None]


def build_app(
    open_engine: Callable[[], Engine],
    *,
    home: str,
    token: str,
    host: str,
    port: int,
    default_lang: str,
    project: str | None = None,
) -> Site:
    """The app behind its :class:`~turnback.web.security.Guard`, listening on *host*:*port*; requests reach an
    engine of their own, the event poller another (so the requests' own changes are changes it sees)."""
    engine, polled = EngineThread(open_engine), EngineThread(open_engine)
    api = Api(engine, home=home, default_lang=default_lang, project=project)
    events = Events(polled, home=home)
    app = Starlette(
        routes=[
            *routes(api),
            Route("/api/v1/events", events.stream, methods=["GET"]),
            Route("/api/v1/openapi.json", openapi_document, methods=["GET"]),
        ],
        exception_handlers={HTTPException: api.not_routed},
    )
    guarded = security.Guard(
        app,
        token=token,
        hosts=security.allowed_hosts(host, port),
        port=port,
        any_host=security.is_wildcard(host),
        refusal=api.words,
    )

    def close() -> None:
        engine.close()
        polled.close()

    return Site(guarded, events.close, close)


__all__ = ["Api", "Site", "accepted_language", "build_app"]

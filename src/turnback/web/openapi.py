"""``GET /api/v1/openapi.json``: the OpenAPI 3.1 document of the API, made from the routes' own descriptions
(:data:`OPERATIONS`) and the bodies they parse (``bodies``), so it says what the server does."""

from __future__ import annotations

from typing import Any, NamedTuple

import turnback
from turnback.catalog import LANGUAGES

from .bodies import REDO, RESEND, REVERT, ROLLBACK, UNDO, Body, Field

JSON_TYPES = {"integer": {"type": "integer", "minimum": 0}}

# Every refusal's status and when it happens.
REFUSALS = {
    "400": "bad input: a body, field or ?lang= the route does not take, or an id that is not one",
    "401": "no token: neither Authorization: Bearer TOKEN nor the cookie /?token=TOKEN sets",
    "403": "a Host that is not the server's address (DNS rebinding), or a change sent by another site (CSRF)",
    "404": "no such session, turn, call or plan, or it is another session's",
    "409": "refused: a stale head, a file changed since the plan, nothing to do, a plan already applied",
    "423": "busy: a turn, a command, a job or another operation runs (the message names it)",
    "503": "the store cannot be opened or read",
}
READ_REFUSALS = ("400", "401", "403", "404", "503")
TAKE_BACK_REFUSALS = tuple(REFUSALS)


class Operation(NamedTuple):
    method: str
    path: str
    summary: str
    body: Body | None = None
    refusals: tuple[str, ...] = READ_REFUSALS
    query: tuple[tuple[str, str], ...] = ()  # (name, what it means), strings
    media_type: str = "application/json"
    success: dict[str, Any] | None = None  # the 200 body's schema, where it is not a CLI object


SESSION = "/api/v1/sessions/{session}"
OPERATIONS = (
    Operation(
        "get",
        "/api/v1/messages",
        "The page's labels (catalog templates, {placeholders} kept) in the request's language, and the languages",
        refusals=("400", "401", "403"),
    ),
    Operation(
        "get",
        "/api/v1/sessions",
        "= turnback sessions --json: every session, most recently active first, the default of each project marked",
        query=(("project", "only the sessions of the project in this folder"),),
    ),
    Operation("get", f"{SESSION}/history", "= turnback log --json: the history tree, with each call's block"),
    Operation("get", f"{SESSION}/status", "= turnback status --json: the head, what runs or keeps the session busy"),
    Operation("get", f"{SESSION}/files", "= turnback files --json: each file the session touched, and its state"),
    Operation(
        "get",
        f"{SESSION}/calls/{{call}}",
        "= turnback show --json: the call, its raw input and its diff (nothing of a file .gitignore ignores)",
    ),
    Operation(
        "post",
        f"{SESSION}/calls/{{call}}/revert",
        "Revert one call: its plan (apply false), or that plan applied (apply true, plan)",
        REVERT,
        TAKE_BACK_REFUSALS,
    ),
    Operation("post", f"{SESSION}/undo", "Undo turns: plan, then apply the plan shown", UNDO, TAKE_BACK_REFUSALS),
    Operation("post", f"{SESSION}/redo", "Take back the newest undo, revert or rollback", REDO, TAKE_BACK_REFUSALS),
    Operation(
        "post", f"{SESSION}/rollback", "Roll back to turn node, with the head seen", ROLLBACK, TAKE_BACK_REFUSALS
    ),
    Operation(
        "post",
        f"{SESSION}/resend",
        "Edit and resend message N: the per-file list, then apply a choice",
        RESEND,
        TAKE_BACK_REFUSALS,
    ),
    Operation(
        "get",
        "/api/v1/events",
        "Server-Sent Events: data {session, turn, call, operation} whenever a session's records change",
        refusals=("401", "403"),
        media_type="text/event-stream",
    ),
    Operation(
        "get",
        "/api/v1/openapi.json",
        "This document",
        refusals=("401", "403"),
        success={"type": "object", "required": ["openapi", "paths"]},
    ),
)

ERROR = {
    "type": "object",
    "required": ["schema", "error"],
    "properties": {
        "schema": {"const": 1},
        "error": {
            "type": "object",
            "required": ["type", "message", "exit"],
            "properties": {
                "type": {"type": "string"},
                "code": {"type": "string", "description": "stable snake_case, the same in every language"},
                "params": {"type": "object"},
                "message": {"type": "string", "description": "worded in the request's language"},
                "exit": {"type": "integer", "description": "the exit status the CLI ends with for it"},
            },
        },
    },
}
OBJECT = {
    "type": "object",
    "required": ["schema"],
    "properties": {"schema": {"const": 1}},
    "description": 'the object the CLI prints with --json for the same verb, with "schema": 1',
}


def _field_schema(field: Field) -> dict[str, Any]:
    kinds = [JSON_TYPES.get(kind, {"type": kind}) for kind in field.types]
    schema: dict[str, Any] = kinds[0] if len(kinds) == 1 else {"anyOf": kinds}
    if field.choices:
        schema = {"enum": list(field.choices)}
    return {**schema, "description": field.doc}


def _body_schema(body: Body) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {name: _field_schema(field) for name, field in body.fields.items()},
        "required": [name for name, field in body.fields.items() if field.required],
    }


def _parameters(operation: Operation) -> list[dict[str, Any]]:
    found = []
    for name in ("session", "call"):
        if f"{{{name}}}" in operation.path:
            found.append(
                {
                    "name": name,
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string", "minLength": 1},
                    "description": f"the {name}'s id, or a unique prefix of it",
                }
            )
    for name, doc in operation.query:
        found.append({"name": name, "in": "query", "required": False, "schema": {"type": "string"}, "description": doc})
    if operation.media_type == "application/json":
        found.append(
            {
                "name": "lang",
                "in": "query",
                "required": False,
                "schema": {"type": "string", "enum": list(LANGUAGES)},
                "description": "the language of messages (default: Accept-Language, else the server's)",
            }
        )
    return found


def document() -> dict[str, Any]:
    """The OpenAPI document."""
    paths: dict[str, dict[str, Any]] = {}
    for operation in OPERATIONS:
        json_body = operation.media_type == "application/json"
        success = {"schema": operation.success or (OBJECT if json_body else {"type": "string"})}
        spec: dict[str, Any] = {
            "summary": operation.summary,
            "operationId": operation.method
            + operation.path.replace("/api/v1", "").replace("/", "_").replace("{", "").replace("}", ""),
            "parameters": _parameters(operation),
            "responses": {
                "200": {"description": "done", "content": {operation.media_type: success}},
                **{
                    status: {"description": REFUSALS[status], "content": {"application/json": {"schema": ERROR}}}
                    for status in operation.refusals
                },
            },
        }
        if operation.body is not None:
            spec["requestBody"] = {
                "required": False,
                "content": {"application/json": {"schema": _body_schema(operation.body)}},
            }
        paths.setdefault(operation.path, {})[operation.method] = spec
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "turnback serve",
            "version": turnback.__version__,
            "description": "The HTTP API of turnback serve: the CLI's verbs over the same engine. Nothing is "
            "applied without apply: true and the id of the plan that was shown.",
        },
        "servers": [{"url": "/"}],
        "components": {"securitySchemes": {"token": {"type": "http", "scheme": "bearer"}}},
        "security": [{"token": []}],
        "paths": paths,
    }


__all__ = ["OPERATIONS", "document"]

"""The request bodies of the API's POST routes: each field's JSON types, whether it must be given, the values
it may take, and what it means; :meth:`Body.parse` checks a body by them, ``openapi`` describes them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

import turnback
from turnback.catalog import Message

MAX_BODY_BYTES = 64 << 10  # a request body is a few fields; anything larger is not one of ours


class Field(NamedTuple):
    types: tuple[str, ...]  # JSON types: "boolean", "integer" (0 or more), "string", "null"
    doc: str
    required: bool = False
    choices: tuple[str | None, ...] = ()  # the values it may take, where it is one of a few


class Body(NamedTuple):
    """A POST body: its fields by name (a JSON object, no other field)."""

    fields: Mapping[str, Field]

    def parse(self, raw: bytes) -> dict[str, Any]:
        """The fields of *raw* (a JSON object; empty: no field), each of its type; else a refusal naming it."""
        if len(raw) > MAX_BODY_BYTES:
            raise turnback.UsageError(Message("serve_body_too_large", limit=MAX_BODY_BYTES))
        try:
            given = json.loads(raw) if raw.strip() else {}
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise turnback.UsageError(Message("serve_body_not_json")) from None
        if not isinstance(given, dict):
            raise turnback.UsageError(Message("serve_body_not_object"))
        for name in given:
            if name not in self.fields:
                raise turnback.UsageError(Message("serve_field_unknown", field=name, known=", ".join(self.fields)))
        for name, field in self.fields.items():
            if name not in given:
                if field.required:
                    raise turnback.UsageError(Message("serve_field_required", field=name))
                continue
            value = given[name]
            if json_type(value) not in field.types or (field.choices and value not in field.choices):
                allowed = [json.dumps(choice) for choice in field.choices] if field.choices else list(field.types)
                raise turnback.UsageError(Message("serve_field_type", field=name, expected=" | ".join(allowed)))
        return given


def json_type(value: object) -> str:
    """A value's JSON type as the fields name them; a negative integer is none of them (no turn has one)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer" if value >= 0 else "negative integer"
    return {str: "string", float: "number", list: "array", dict: "object"}.get(type(value), "other")


TURN = ("integer", "string")  # a turn: its number, or its id (or a unique prefix)
APPLY = {
    "apply": Field(("boolean",), "false (the default): plan and show; true: apply the plan named by plan"),
    "plan": Field(("string",), "the id of the plan that was shown (required to apply)"),
}
REVERT = Body(
    {
        **APPLY,
        "anyway": Field(
            ("boolean",),
            "restore (or delete) over what changed since the call: with apply, the plan that showed the conflict; "
            "refused (409) if the file changed again since that plan",
        ),
    }
)
UNDO = Body(
    {
        **APPLY,
        "turn": Field(TURN, "undo this turn alone (its number or id); default: the newest not undone"),
        "from": Field(TURN, "undo this turn and every later one, newest first"),
        "force": Field(("boolean",), "also overwrite files changed after the turn, and break the stack rule"),
    }
)
REDO = Body(APPLY)
ROLLBACK = Body(
    {
        **APPLY,
        "node": Field(TURN, "the turn to go back to (its number or id; 0: the session's start)", required=True),
        "expect_head": Field(
            (*TURN, "null"), "the head the page saw (number or id; 0: the start): refused (409) if it moved"
        ),
    }
)
RESEND = Body(
    {
        "message": Field(TURN, "the turn whose message is edited and resent (its number or id)", required=True),
        "choice": Field(
            ("string", "null"),
            "null: the per-file list; revert (Revert and Send), keep (Keep Files and Send), anyway (Send Anyway) "
            "apply the plan named by plan; cancel changes nothing",
            choices=(None, "revert", "keep", "anyway", "cancel"),
        ),
        "apply": Field(("boolean",), "true with revert, keep or anyway: apply that choice"),
        "plan": Field(("string",), "the id of the plan the per-file list showed (required with a choice)"),
    }
)

__all__ = ["MAX_BODY_BYTES", "REDO", "RESEND", "REVERT", "ROLLBACK", "UNDO", "Body", "Field", "json_type"]

"""``turnback show CALL [--input]``: a call's diff, or its raw arguments."""

from __future__ import annotations

import argparse
import json

from turnback.catalog import word
from turnback.cli import _common
from turnback.render import data


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("show", parents=[common], help="show what a call changed (its diff)")
    parser.add_argument("call", help="the call id, or a unique prefix of it")
    parser.add_argument("--input", action="store_true", help="show the call's raw arguments instead")


def _pretty(raw: str) -> list[str]:
    """JSON arguments indented, a line per field; anything else as one line (its newlines escaped)."""
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False).split("\n")
    except ValueError:
        return [raw]


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    call = ctx.engine.call_as_it_stands(args.call)
    if args.input:
        raw = ctx.engine.call_input(call)
        ctx.out.lines(_pretty(raw) if raw is not None else ["(" + word(ctx.engine.missing_input_reason(call)) + ")"])
        ctx.out.json({"call": {**data.call_data(call), "input": raw}})
        return 0
    return _common.show_call(ctx, call)

"""``turnback``: the command line. Builds the parser from one module per verb and runs it
inside the one error boundary that maps errors to exit codes.

Exit codes: 0 done, 1 refused or nothing done, 2 usage, 3 busy, 70 unexpected
error (logged to ``turnback.log`` in the store), 130 interrupted.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import BinaryIO, NoReturn

import turnback
from turnback import boundary
from turnback.catalog import Message, language, say, word
from turnback.cli import _common
from turnback.cli.commands import (
    busy,
    call,
    config,
    covers,
    delete,
    demo,
    diff,
    edit,
    exec,
    files,
    gc,
    hook,
    init,
    install,
    jobs,
    log,
    mcp,
    mkdir,
    mv,
    notices,
    ops,
    read,
    redo,
    resend,
    revert,
    rm,
    rollback,
    runner,
    serve,
    session,
    sessions,
    show,
    status,
    store,
    tui,
    turn,
    undo,
    verify,
    watch,
    write,
)
from turnback.render.terminal import escape_line

COMMANDS: dict[str, ModuleType] = {
    "init": init,
    "session": session,
    "sessions": sessions,
    "turn": turn,
    "write": write,
    "edit": edit,
    "rm": rm,
    "mv": mv,
    "mkdir": mkdir,
    "call": call,
    "log": log,
    "show": show,
    "undo": undo,
    "revert": revert,
    "exec": exec,
    "jobs": jobs,
    "diff": diff,
    "covers": covers,
    "redo": redo,
    "rollback": rollback,
    "resend": resend,
    "ops": ops,
    "status": status,
    "files": files,
    "busy": busy,
    "notices": notices,
    "read": read,
    "config": config,
    "delete": delete,
    "gc": gc,
    "verify": verify,
    "store": store,
    "hook": hook,
    "install": install,
    "uninstall": install,
    "mcp": mcp,
    "serve": serve,
    "tui": tui,
    "watch": watch,
    "demo": demo,
    "_job": runner,
    "_watch": runner,
    "_adopt": runner,
    "_first_snapshot": runner,
    "_watch-tree": watch,
}

EXIT_UNEXPECTED = 70

# Where ``--session`` given before the verb waits until the verb is known (it is the verb's option).
_SESSION_BEFORE_VERB = "session_before_verb"


def _is_internal(verb: str) -> bool:
    """A verb turnback runs itself (``_job``, ``_watch``): never offered to the user."""
    return verb.startswith("_")


class _Parser(argparse.ArgumentParser):
    """argparse, with the argument its error quotes escaped (it may be a name an agent chose),
    internal verbs kept out of sight, and help in plain text."""

    # The last usage error's text, for --json's error object (argparse prints it and exits 2).
    last_error: str | None = None

    def error(self, message: str) -> NoReturn:
        _Parser.last_error = escape_line(message)
        super().error(_Parser.last_error)

    def _check_value(self, action: argparse.Action, value: object) -> None:
        """An unknown verb: the closest one the user may mean, else the list, never an internal verb."""
        if not isinstance(action, argparse._SubParsersAction) or value in action.choices:
            super()._check_value(action, value)
            return
        verbs = [verb for verb in action.choices if not _is_internal(verb)]
        closest = difflib.get_close_matches(str(value), verbs, n=1)
        hint = (
            say("did_you_mean", verb=closest[0])
            if closest
            else say("choose_from", verbs=Message("comma_list", items=tuple(verbs)))
        )
        raise argparse.ArgumentError(action, f"invalid choice: {value!r} ({hint})")

    def format_help(self) -> str:
        # The descriptions are the modules' docstrings, where ``--flag`` is reST for code.
        return super().format_help().replace("``", "")


def build_parser() -> argparse.ArgumentParser:
    common = _common.common_options()
    parser = _Parser(
        prog="turnback",
        description="A safe way back from an AI agent's file changes: see what each call and turn changed, "
        "revert a call, undo a turn, without losing work done since.",
        parents=[common],
    )
    parser.add_argument(
        "--session",
        dest=_SESSION_BEFORE_VERB,
        metavar="S",
        default=argparse.SUPPRESS,
        help="the session of the verbs that take one (as --session after the verb)",
    )
    parser.add_argument("--version", action="version", version=f"turnback {turnback.__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="COMMAND")
    for module in dict.fromkeys(COMMANDS.values()):
        module.add_parser(sub, common)
    return parser


def _verb_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the verb, and sub-verb, that *args* chose."""
    while True:
        groups = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
        chosen = getattr(args, groups[0].dest, None) if groups else None
        if chosen is None:
            return parser
        parser = groups[0].choices[chosen]


def _end_of_options(words: Sequence[str]) -> int:
    """Where the options end: at ``--`` (what follows is a command's own words), else the end."""
    return words.index("--") if "--" in words else len(words)


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """*argv* parsed, with ``--session`` given before the verb handed to the verb (one given after wins)."""
    args = parser.parse_args(argv)
    before = vars(args).pop(_SESSION_BEFORE_VERB, None)
    if before is not None and args.verb:
        verb_parser = _verb_parser(parser, args)
        if "--session" not in verb_parser._option_string_actions:
            parser.error(say("session_does_not_apply", verb=verb_parser.prog))
        if args.session is None:
            args.session = before
    return args


# Arguments that name files, or a command's words: they may hold any bytes a file name holds.
_BYTE_ARGUMENTS = frozenset(
    {"path", "paths", "src", "dst", "dir", "project", "root", "store", "cwd", "output", "command"}
)


def _check_text_arguments(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """Refuse a text argument (``--old``, a message, an id) holding bytes that are not UTF-8.

    The shell hands such bytes over as surrogate escapes, which no text can be
    stored or written with; a file name may hold them, so paths are let through.
    """
    for dest, value in vars(args).items():
        if dest in _BYTE_ARGUMENTS:
            continue
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, str):
                continue
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                flag = "--" + dest.replace("_", "-")
                name = flag if any(word == flag or word.startswith(flag + "=") for word in argv) else dest
                raise turnback.UsageError(Message("text_not_utf8", name=name)) from None


def _report(out: _common.Output, error: turnback.TurnbackError) -> int:
    message = error.message
    if isinstance(error, turnback.UncoveredError):
        message = Message("uncovered_hint", refusal=message)
    out.note(f"turnback: {word(message)}")
    out.json(boundary.refusal_data(error, error.exit_code))
    return error.exit_code


def main(argv: Sequence[str] | None = None, *, stdin: BinaryIO | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parse_words(parser, words)
    if not args.verb:
        parser.print_help()
        return 2
    out = _common.Output(json_mode=getattr(args, "json", False))
    ctx = _common.Context(args, out, argv=words, stdin=stdin)
    return run_verb(ctx, COMMANDS[args.verb].run)


def parse_words(parser: argparse.ArgumentParser, words: Sequence[str]) -> argparse.Namespace:
    """The words after ``turnback`` parsed as the command line takes them (argparse exits 2 on a usage error,
    then with ``--json`` also prints the error as JSON on stdout)."""
    try:
        return _parse(parser, _common.join_text_values(words))
    except SystemExit as done:
        if done.code == 2 and _Parser.last_error is not None and "--json" in words[: _end_of_options(words)]:
            # --json promises one JSON object on stdout, a usage error too (argparse's text stays on stderr)
            _common.Output(json_mode=True).json(boundary.refusal_data(turnback.UsageError(_Parser.last_error), 2))
        raise


def run_verb(ctx: _common.Context, run: Callable[[_common.Context, argparse.Namespace], int]) -> int:
    """*run* (a verb's, or a step of one that the hook relay serves: :mod:`turnback.cli.fast`) on *ctx*, inside
    the error boundary that maps errors to exit codes and messages; then the engine closed and the output
    flushed. The exit code."""
    args, out = ctx.args, ctx.out
    try:
        language.set(turnback.pick_language(getattr(args, "lang", None), ctx.home))
        _check_text_arguments(args, ctx.argv)
        code = int(run(ctx, args))
    except turnback.TurnbackError as error:
        code = _report(out, error)
    except KeyboardInterrupt:
        out.note("turnback: " + say("interrupted_goes_on_next_undo"))
        code = _common.EXIT_INTERRUPTED
    except BrokenPipeError:
        code = 0  # the reader (a pager, head) closed the pipe: nothing went wrong here
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps the interpreter's final flush quiet
    except Exception:
        home = None
        try:
            home = ctx.home
        except Exception:
            pass
        logged = boundary.log_unexpected(home, "turnback")
        if not logged:
            traceback.print_exc()
        out.note("turnback: " + (say("unexpected_error_logged", log=logged) if logged else say("unexpected_error")))
        out.json(boundary.error_data("unexpected", "unexpected error", EXIT_UNEXPECTED))
        code = EXIT_UNEXPECTED
    finally:
        ctx.close()
    out.flush()
    return code


__all__ = ["COMMANDS", "build_parser", "main", "parse_words", "run_verb"]

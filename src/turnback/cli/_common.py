"""What every command module shares: the context, output, options, confirmation, take-back flow."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import IO, TYPE_CHECKING, Any, BinaryIO, Literal, TypeAlias

import turnback
from turnback import Engine, Plan, Session
from turnback.catalog import Message, say
from turnback.render import data, text
from turnback.render.terminal import Dim, escape_line, shell_line

if TYPE_CHECKING:
    from turnback.engine import KeptStore

DIM, RESET = "\033[2m", "\033[0m"

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class Output:
    """Human lines on stdout, or (with ``--json``) one JSON object; errors and prompts on stderr.

    No control character of a line reaches the terminal raw (a name an agent chose
    could rewrite what the user reads): the render functions quote each name, and
    what is left (a message, file content in a diff) is escaped here. What must go
    out byte for byte (a patch into a pipe, a file's content) does not come here.
    """

    def __init__(self, *, json_mode: bool, stdout: IO[str] | None = None, stderr: IO[str] | None = None):
        self.json_mode = json_mode
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr

    @cached_property
    def color(self) -> bool:
        """Colour only on a terminal, and never when ``NO_COLOR`` is set."""
        return not self.json_mode and self.stdout.isatty() and not turnback.env_no_color()

    def line(self, text_line: str = "") -> None:
        if self.json_mode:
            return
        shown = escape_line(text_line)
        if isinstance(text_line, Dim) and self.color:
            shown = f"{DIM}{shown}{RESET}"
        print(shown, file=self.stdout)

    def lines(self, text_lines: list[str]) -> None:
        for text_line in text_lines:
            self.line(text_line)

    def styled(self, text_lines: list[str]) -> None:
        """Lines already made safe for a terminal that carry their own colour codes."""
        if not self.json_mode:
            for text_line in text_lines:
                print(text_line, file=self.stdout)

    def note(self, text_line: str) -> None:
        """A line for the user that must not mix into data on stdout (always stderr)."""
        print(escape_line(text_line), file=self.stderr)

    def json(self, payload: dict[str, Any]) -> None:
        if self.json_mode:
            print(json.dumps({"schema": 1, **payload}, ensure_ascii=False), file=self.stdout)

    def flush(self) -> None:
        self.stdout.flush()
        self.stderr.flush()


class Context:
    """One command's world: its arguments, output, working folder and (opened on first use) the engine."""

    def __init__(
        self,
        args: argparse.Namespace,
        out: Output,
        *,
        argv: Sequence[str] = (),
        stdin: BinaryIO | None = None,
        kept: KeptStore | None = None,
    ):
        """*kept*: the store the engine is over, kept open by a long-lived process (the hook relay) across the
        commands it runs; else this command opens it, and closes it when done."""
        self.args = args
        self.kept = kept
        self.argv = list(argv)  # the words after ``turnback``, as typed
        self.out = out
        self.cwd = os.getcwd()
        self.stdin = stdin or sys.stdin.buffer
        # Who ran the command, and the session its environment names: the hook relay serving it for a client
        # process (turnback.cli.fast) puts the client's in place of its own.
        self.parent_pid = os.getppid()
        self.env_session = turnback.env_session()

    @property
    def home(self) -> str:
        """The store folder: ``--store DIR``, else ``TURNBACK_HOME`` or the data folder."""
        store = getattr(self.args, "store", None)
        return os.path.abspath(store) if store and not turnback.is_database_url(store) else turnback.default_home()

    @property
    def store_url(self) -> str | None:
        """The database that holds the store: ``--store postgresql://…``, else ``TURNBACK_STORE`` (else the
        folder's config.toml says, or the folder's own SQLite file holds it)."""
        store = getattr(self.args, "store", None)
        return store if store and turnback.is_database_url(store) else turnback.env_store_url()

    @cached_property
    def engine(self) -> Engine:
        if self.kept is not None:
            return self.kept.engine()
        return turnback.open(self.home, store_url=self.store_url)

    def close(self) -> None:
        if "engine" in self.__dict__:
            if self.kept is not None:
                self.kept.give_back(self.engine)
            else:
                self.engine.close()

    def session(self, *, with_turns: bool = False) -> Session:
        """``--session``, else ``TURNBACK_SESSION``, else the latest session of the project holding the cwd.

        *with_turns* (the verbs that look and take back): the latest session with turns; when newer
        sessions were passed over, a note on stderr names the one picked.
        """
        ref = getattr(self.args, "session", None) or self.env_session
        pick = self.engine.pick_session(ref, self.cwd, with_turns=with_turns)
        if pick.passed_over:
            picked = turnback.short_id(pick.session.id)
            if pick.session.title:
                picked = say("session_with_title", session=picked, title=pick.session.title)
            self.out.note("turnback: " + say("picked_latest_with_turns", session=picked, count=len(pick.passed_over)))
        return pick.session


def common_options() -> argparse.ArgumentParser:
    """Options every verb takes, before or after its name."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--store",
        metavar="DIR|URL",
        default=argparse.SUPPRESS,
        help="the store folder (default: TURNBACK_HOME or the data dir), or a postgresql:// database"
        " (default: TURNBACK_STORE, or store.url in the folder's config.toml)",
    )
    parent.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON object on stdout"
    )
    parent.add_argument(
        "--lang",
        metavar="LANG",
        default=argparse.SUPPRESS,
        help="the language of messages: en, zh-CN or ja (default: TURNBACK_LANG, else lang in config.toml, "
        "else the locale)",
    )
    return parent


def add_session_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--session",
        metavar="S",
        help="session id or unique prefix (default: TURNBACK_SESSION, else the latest session of this project)",
    )


# Options whose value is free text, which may itself start with "-" (``edit --old "--verbose"``).
TEXT_VALUE_OPTIONS = frozenset({"--old", "--new", "--message", "--title"})


def join_text_values(argv: Sequence[str]) -> list[str]:
    """*argv* with ``--old -TEXT`` written as ``--old=-TEXT``, so argparse takes the text as the value.

    argparse reads a value that starts with "-" as another option and stops
    with "expected one argument"; for free text that is never meant. Nothing
    after ``--`` (a command's own arguments) is touched.
    """
    joined: list[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--":
            return [*joined, *argv[index:]]
        if token in TEXT_VALUE_OPTIONS and index + 1 < len(argv) and argv[index + 1].startswith("-"):
            joined.append(f"{token}={argv[index + 1]}")
            index += 2
            continue
        joined.append(token)
        index += 1
    return joined


def add_uncovered_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--uncovered",
        action="store_true",
        help="go ahead when turnback cannot keep a copy of what is overwritten or removed "
        "(over store.max_mib, unreadable); the change then cannot be undone",
    )


def add_confirm_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--yes", "-y", action="store_true", help="apply without asking")
    group.add_argument("--dry-run", action="store_true", help="only show what would be done")


# A ^C at the prompt exits as an interrupted command does.
EXIT_INTERRUPTED = 130

# What came of asking: "no terminal" when nothing could be asked (stdin or the prompt's stream is not a terminal).
Answer: TypeAlias = Literal["yes", "no", "no answer", "interrupted", "no terminal"]


def ask(out: Output, prompt: str, *, yes: bool) -> Answer:
    """``--yes``, or what was typed at the prompt on a terminal: ``y`` is yes, anything else no."""
    if yes:
        return "yes"
    stream = out.stdout if not out.json_mode and out.stdout.isatty() else out.stderr
    if not sys.stdin.isatty() or not stream.isatty():
        return "no terminal"
    out.stdout.flush()  # the preview above the prompt, when the prompt goes to stderr
    try:
        with _seen_after_interrupt(sys.stdin.fileno()):  # from before the prompt shows: a ^C may come at once
            print(prompt, file=stream, end=" ", flush=True)
            answer = sys.stdin.readline()
    except KeyboardInterrupt:
        print(file=stream, flush=True)  # the terminal shows ^C and leaves the line open
        return "interrupted"
    if not answer:
        print(file=stream, flush=True)  # ^D ends the input with no newline
        return "no answer"
    return "yes" if answer.strip().lower() in ("y", "yes") else "no"


@contextlib.contextmanager
def _seen_after_interrupt(terminal: int) -> Iterator[None]:
    """While the prompt waits on *terminal*: a ^C there keeps what this process prints after it (``NOFLSH``).

    Else the terminal sends SIGINT and then throws away the output not yet shown, and a CLI that answers the
    signal quickly enough loses the line saying nothing changed. What was typed before the ^C is still thrown
    away, as a terminal does; the terminal's settings are put back after.
    """
    import termios

    try:
        settings = termios.tcgetattr(terminal)
        kept = [*settings[:3], settings[3] | termios.NOFLSH, *settings[4:]]
        termios.tcsetattr(terminal, termios.TCSANOW, kept)
    except termios.error:
        yield  # not a terminal it can set: as it is
        return
    try:
        yield
    except KeyboardInterrupt:
        termios.tcflush(terminal, termios.TCIFLUSH)
        raise
    finally:
        termios.tcsetattr(terminal, termios.TCSANOW, settings)


def decline(ctx: Context, answer: Answer, *, deleting: bool = False) -> int:
    """Say why nothing was done after *answer* (not yes); the exit code.

    Where nothing could be asked, the line gives the command again with ``--yes``; *deleting*: the question
    was whether to delete a session.
    """
    nothing = Message("nothing_deleted" if deleting else "nothing_changed")
    if answer == "no terminal":
        command = shell_line(["turnback", *ctx.argv, "--yes"])
        to_apply = Message("to_delete_it" if deleting else "to_apply_it")
        ctx.out.note(say("declined_no_terminal", nothing=nothing, to_apply=to_apply, command=command))
        return 1
    why = {"no": "declined_no", "no answer": "declined_no_answer", "interrupted": "declined_interrupted"}[answer]
    ctx.out.note(say(why, nothing=nothing))
    return EXIT_INTERRUPTED if answer == "interrupted" else 1


def wants_color(out: Output) -> bool:
    """Colour only on a terminal, and never when ``NO_COLOR`` is set."""
    return out.color


def show_call(ctx: Context, call: turnback.Call) -> int:
    """What a file-tool verb prints: the call's diff (``render.diff_lines`` lines) or its JSON."""
    engine = ctx.engine
    number = engine.turn_of(call).number
    if not ctx.out.json_mode:
        hidden = engine.call_hidden(call)
        limit = engine.config.diff_lines
        notes = engine.overlap_notes(call)
        lines = text.call_lines(
            call, number, engine.load, limit, hidden=hidden.paths, hide_error=hidden.text, notes=notes
        )
        ctx.out.lines(lines)
    ctx.out.json({"call": data.call_data(call)})
    return 0


def take_back(ctx: Context, plan: Plan, *, yes: bool, dry_run: bool) -> int:
    """Show *plan*, then apply it when confirmed: the shared flow of undo and revert."""
    out, engine = ctx.out, ctx.engine
    if plan.status == "applying":
        out.line(say("operation_goes_on", kind=text.op_noun(plan.kind), op=turnback.short_id(plan.id)))
    shown = [row.path for row in plan.rows if row.conflict or row.acts]
    hidden = engine.hidden_paths(plan.session_id, shown)
    out.lines(text.plan_lines(plan, engine.load, diff_limit=engine.config.diff_lines, hidden=hidden))
    if dry_run:
        out.json(data.plan_data(plan, applied=False))
        return 0
    if plan.status != "applying" and not plan.acting_rows and plan.force_only_rows:
        out.line(text.force_only_line(plan))
        out.json(data.plan_data(plan, applied=False))
        return 1
    answer = ask(out, text.confirm_prompt(plan), yes=yes)
    if answer != "yes":
        out.json(data.plan_data(plan, applied=False))
        return decline(ctx, answer)
    result = engine.apply(plan)
    out.lines(text.result_lines(result))
    out.json(data.result_data(result))
    return 0 if result.changed else 1


__all__ = [
    "EXIT_INTERRUPTED",
    "Answer",
    "Context",
    "Output",
    "Subparsers",
    "add_confirm_options",
    "add_session_option",
    "add_uncovered_option",
    "ask",
    "common_options",
    "decline",
    "join_text_values",
    "show_call",
    "take_back",
    "wants_color",
]

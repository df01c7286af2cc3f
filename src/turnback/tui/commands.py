"""What the TUI's command line takes: ``/rollback 2 confirm``, ``/undo from 3 --force``, ``/lang ja``.

Parsing only: what each command does is the engine's (see :mod:`turnback.tui.app`).
"""

from __future__ import annotations

import shlex
from typing import NamedTuple

from turnback.catalog import LANGUAGES, Message

# Each command, the arguments it takes (as a usage error shows them) and what /help says it does.
HELP: dict[str, tuple[str, Message]] = {
    "history": ("/history", Message("tui_help_history")),
    "sessions": ("/sessions", Message("tui_help_sessions")),
    "rollback": ("/rollback N [--diff] [confirm]", Message("tui_help_rollback")),
    "undo": ("/undo [N | from N] [--force] [confirm]", Message("tui_help_undo")),
    "revert": ("/revert CALL [--anyway] [confirm]", Message("tui_help_revert")),
    "redo": ("/redo [confirm]", Message("tui_help_redo")),
    "diff": ("/diff [N]", Message("tui_help_diff")),
    "files": ("/files", Message("tui_help_files")),
    "status": ("/status", Message("tui_help_status")),
    "lang": ("/lang " + "|".join(LANGUAGES), Message("tui_help_lang")),
    "help": ("/help", Message("tui_help_help")),
    "quit": ("/quit", Message("tui_help_quit")),
}
USAGES = {name: usage for name, (usage, _) in HELP.items()}

# What Tab completes a command line to: each command, and the forms of the ones that take words.
COMPLETIONS = [
    *(f"/{name}" for name in USAGES),
    "/undo from ",
    "/undo --force",
    "/revert --anyway",
    "/redo confirm",
    *(f"/lang {lang}" for lang in LANGUAGES),
]


class Command(NamedTuple):
    """One command line: the command's name, its plain words, its flags, and whether it says ``confirm``."""

    name: str
    words: tuple[str, ...] = ()
    flags: frozenset[str] = frozenset()
    confirm: bool = False


class CommandError(ValueError):
    """A command line that is not a command (``unknown``) or not one's form (``usage``), with the command."""

    def __init__(self, kind: str, command: str):
        super().__init__(command)
        self.kind = kind
        self.command = command


# The flags each command takes; anything else that starts with -- is a usage error.
_FLAGS = {"rollback": {"--diff"}, "undo": {"--force"}, "revert": {"--anyway"}}
# How many plain words each command takes (at least, at most).
_ARITY = {"rollback": (1, 1), "undo": (0, 2), "revert": (1, 1), "diff": (0, 1), "lang": (1, 1)}


def parse(line: str) -> Command:
    """The command *line* names; a leading ``/`` is optional. Raises :class:`CommandError`."""
    try:
        words = shlex.split(line.strip())
    except ValueError:
        words = line.split()
    if not words:
        raise CommandError("unknown", line)
    name = words[0].removeprefix("/")
    if name not in USAGES:
        raise CommandError("unknown", "/" + name)
    rest = words[1:]
    confirm = "confirm" in rest
    flags = frozenset(word for word in rest if word.startswith("--"))
    plain = tuple(word for word in rest if word != "confirm" and not word.startswith("--"))
    least, most = _ARITY.get(name, (0, 0))
    if not flags <= _FLAGS.get(name, set()) or not least <= len(plain) <= most:
        raise CommandError("usage", USAGES[name])
    if confirm and name not in ("rollback", "undo", "revert", "redo"):
        raise CommandError("usage", USAGES[name])
    if name == "undo" and plain and (plain[0] == "from") != (len(plain) == 2):
        raise CommandError("usage", USAGES[name])
    if name == "lang" and plain[0] not in LANGUAGES:
        raise CommandError("usage", USAGES[name])
    return Command(name, plain, flags, confirm)


def confirms(command: Command, preview: Command) -> bool:
    """Whether *command* is the ``… confirm`` of *preview* (``--diff`` only changes what a preview shows)."""
    shown = {"--diff"}
    return command.confirm and (command.name, command.words, command.flags - shown) == (
        preview.name,
        preview.words,
        preview.flags - shown,
    )


__all__ = ["COMPLETIONS", "HELP", "USAGES", "Command", "CommandError", "confirms", "parse"]

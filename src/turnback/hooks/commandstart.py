"""When a Claude Code Bash command really started: a mark its own shell leaves, ahead of the command.

Claude Code runs each Bash command as one ``bash -c`` (or zsh) string, and
puts in it, ahead of the command, the lines SessionStart hooks wrote to
``$CLAUDE_ENV_FILE``. At SessionStart the hook writes one line there, made of
shell builtins only (no process is started): truncate the file named by the
shell's pid in a folder of the store. That file's ctime is when the command's
own shell started, after any permission prompt was answered, on the very
clock its changes' ctimes are taken from. The line prints nothing, sets no
variable, and its failure (a sandbox that cannot write the store) is
silenced and changes no exit status; the command text, the prompt and the
permission rules never see it.

The mark names no call: a call's start is the earliest mark made after its
PreToolUse. Two commands that ran together share the earlier start, so the
later one's window is at worst too long, never too short.
"""

from __future__ import annotations

import contextlib
import os

FOLDER = "command-starts"
# A start is given on as float seconds, whose rounding (a quarter of a microsecond now) must never put it after
# the mark's own ctime: a change the command made in the mark's clock tick has that very ctime.
ROUNDING_S = 1e-6


def folder(home: str, session_id: str) -> str:
    """Where the shells of the session's commands leave their marks."""
    return os.path.join(home, FOLDER, session_id)


def shell_line(marks: str) -> str:
    """The line for ``$CLAUDE_ENV_FILE`` that leaves the mark (POSIX sh, bash and zsh alike).

    ``true``, not ``:``: a redirection that fails on a special builtin such as ``:`` ends a POSIX shell
    (dash) at once, the command unrun; ``\\`` so that no alias of the user's stands in for it.
    """
    quoted = "'" + marks.replace("'", "'\"'\"'") + "'"
    return f'{{ \\true >| {quoted}/"$$"; }} 2>/dev/null || :\n'


def arm(env_file: str, marks: str) -> None:
    """Make *marks* and add the line to *env_file* (Claude Code's file for this hook), unless it is there."""
    os.makedirs(marks, mode=0o700, exist_ok=True)
    line = shell_line(marks)
    fd = os.open(env_file, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "r+", encoding="utf-8", errors="surrogateescape") as handle:
        text = handle.read()
        if line in text:
            return
        handle.write(("" if not text or text.endswith("\n") else "\n") + line)


def started_at(marks: str, after: float, before: float) -> float | None:
    """When the earliest mark made in [*after*, *before*] was made (seconds since the epoch), or None."""
    found = None
    with contextlib.suppress(OSError), os.scandir(marks) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                made = entry.stat(follow_symlinks=False).st_ctime_ns / 1e9
                if after <= made <= before and (found is None or made < found):
                    found = made
    return None if found is None else found - ROUNDING_S


def clear(marks: str, *, remove: bool = False) -> None:
    """Delete the marks (no command of the session runs); the folder too when *remove*."""
    with contextlib.suppress(OSError), os.scandir(marks) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
    if remove:
        with contextlib.suppress(OSError):
            os.rmdir(marks)

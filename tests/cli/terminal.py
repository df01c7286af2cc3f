"""Running the CLI on a real pseudo-terminal, as a user at a keyboard does (issue 14)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

PROMPT_END = b"y = yes, n = no"
DRAIN_S = 0.2  # nothing more read for this long after the child ended: all it wrote has been read


def _own_terminal() -> None:
    """In the child: a new session whose controlling terminal is its stdin, so ^C there is a SIGINT to it; and
    no signal blocked or ignored, as a shell starts a command (a test run before, in the same worker, may leave
    this process's own so: its children would inherit them, and a ^C would do nothing)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_on_a_terminal(
    args: list[str],
    cwd: Path,
    env: dict[str, str],
    keys: bytes,
    *,
    stdout: IO[bytes] | None = None,
    prompt_end: bytes = PROMPT_END,
    noflsh: bool = True,
    at_prompt: Callable[[int], object] | None = None,
    after: Callable[[int, int], object] | None = None,
) -> tuple[int, str]:
    """``turnback ARGS`` with stdin, stdout and stderr on one terminal; *keys* are typed at the prompt.

    Returns the exit code and what the terminal showed (its echo of the keys
    included, so ``^C`` shows as a terminal shows it), with CRLF as LF. With
    *stdout* (a file), stdout goes there instead, as in ``turnback undo | less``.
    *prompt_end*: how the prompt ends in the language asked for (English's by default). *noflsh*: the terminal
    keeps its output at ^C (else it is a terminal as one starts: the CLI's own prompt must keep it). *at_prompt*:
    called with the terminal's other side once the prompt is shown, before the keys are typed; *after*, with
    both sides (the other, the terminal's own) once the CLI has ended and all it wrote is read.
    """
    main, child = pty.openpty()
    if noflsh:
        # ^C makes the terminal send SIGINT and then throw away the output not yet read (unless NOFLSH): a CLI
        # quick enough to answer the signal before that loses the line it printed. The CLI's prompt sets it too
        # (test_new_user.py tests that on a terminal without it); elsewhere the tests do not depend on that.
        attrs = termios.tcgetattr(child)
        attrs[3] |= termios.NOFLSH
        termios.tcsetattr(child, termios.TCSANOW, attrs)
    proc = subprocess.Popen(
        [sys.executable, "-m", "turnback", *args],
        stdin=child,
        stdout=stdout or child,
        stderr=child,
        cwd=cwd,
        env=env,
        preexec_fn=_own_terminal,
    )
    # The terminal's other side stays open here until the child has ended and all it wrote is read: once the
    # last descriptor of that side closes, reading this side fails (EIO) and what was still on its way from the
    # child (the line after ^C) could be lost.
    output = b""
    typed = False
    quiet_since = time.monotonic()
    try:
        while True:
            ready, _, _ = select.select([main], [], [], 0.05)
            now = time.monotonic()
            if ready:
                output += os.read(main, 4096)
                quiet_since = now
                if not typed and prompt_end in output:
                    if at_prompt is not None:
                        at_prompt(main)
                    os.write(main, keys)
                    typed = True
                continue
            ended = proc.poll() is not None
            if (ended and now - quiet_since > DRAIN_S) or now - quiet_since > 30:
                break
        if after is not None:
            proc.wait(timeout=30)
            after(main, child)
    finally:
        os.close(child)
        os.close(main)
    return proc.wait(timeout=30), output.decode().replace("\r\n", "\n")


__all__ = ["PROMPT_END", "run_on_a_terminal"]

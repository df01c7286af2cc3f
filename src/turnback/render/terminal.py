"""What may reach a terminal: names quoted as git quotes them, control characters escaped.

A file name, a turn's message or a command line comes from the agent. Printed
raw, a carriage return or an escape sequence in it rewrites what the user
reads (``hidden.txt\\r\\033[2Krestore harmless.txt`` shows as a harmless
row of a preview), and a newline adds a row of its own. So every such text
goes through :func:`quote` before it is put in a line: one that holds a C0 or
C1 control character, DEL, or a byte that is not UTF-8 (a lone surrogate, as
``os.fsdecode`` gives it) is shown in double quotes with C escapes, the way
git shows such a path; any other text, non-ASCII letters included, is left as
it is. :func:`escape_line` escapes what is left in a whole line (file
content in a diff, an error message) without adding quotes.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Sequence

# git's C escapes; everything else that needs one is written as octal bytes.
ESCAPES = {
    0x07: "\\a",
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0B: "\\v",
    0x0C: "\\f",
    0x0D: "\\r",
    0x22: '\\"',
    0x5C: "\\\\",
}

# C0 controls, DEL, C1 controls, and surrogates (undecodable bytes, or a lone half of a pair).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_UNSAFE_BUT_TAB = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff]")
_QUOTED = re.compile('[\x00-\x1f\x7f-\x9f\ud800-\udfff"\\\\]')
_SHELL_QUOTED = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff'\\\\]")


def octal(byte: int) -> str:
    """One byte as git writes it in a quoted name: its C escape, else ``\\ooo``."""
    return ESCAPES.get(byte, f"\\{byte:03o}")


def _escaped(char: str) -> str:
    if "\udc80" <= char <= "\udcff":  # an undecodable byte, as os.fsdecode carries it
        return octal(ord(char) - 0xDC00)
    return "".join(octal(byte) for byte in char.encode("utf-8", "surrogatepass"))


def quote(text: str) -> str:
    """*text* as is, or in double quotes with C escapes when it holds a control character or a byte not UTF-8.

    A text that begins with ``"`` is quoted too, so a quoted form on screen is
    never a name that merely looks like one.
    """
    if not _UNSAFE.search(text) and not text.startswith('"'):
        return text
    return '"' + _QUOTED.sub(lambda found: _escaped(found.group()), text) + '"'


def shell_word(word: str) -> str:
    """*word* as a POSIX shell takes it; one with a control character or a byte not UTF-8 as bash's ``$'...'``."""
    if not _UNSAFE.search(word):
        return shlex.quote(word)
    return (
        "$'" + _SHELL_QUOTED.sub(lambda found: "\\'" if found.group() == "'" else _escaped(found.group()), word) + "'"
    )


def shell_line(words: Sequence[str]) -> str:
    """A command's words as one line a user can read and paste into a shell."""
    return " ".join(shell_word(word) for word in words)


def escape_line(text: str) -> str:
    """*text* with every control character but tab (and every byte not UTF-8) escaped, no quotes added.

    A carriage return that ends the line stays: it hides nothing there, and a
    diff of a file with CRLF line ends stays as readable as git shows it.
    """
    if not _UNSAFE_BUT_TAB.search(text):
        return text
    body, end = (text[:-1], "\r") if text.endswith("\r") else (text, "")
    return _UNSAFE_BUT_TAB.sub(lambda found: _escaped(found.group()), body) + end


__all__ = [
    "ESCAPES",
    "Dim",
    "display_width",
    "escape_line",
    "octal",
    "pad",
    "quote",
    "shell_line",
    "shell_word",
]


class Dim(str):
    """A line a terminal shows dim (``… 4 more lines``, the shell-change line): what is said about the output,
    not the output itself. It is a plain string everywhere else (a pipe, a test, JSON)."""

    __slots__ = ()


def display_width(text: str) -> int:
    """Columns *text* takes on a terminal: wide and full-width characters (CJK) take two, combining marks none."""
    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def pad(text: str, width: int) -> str:
    """*text* followed by spaces up to *width* columns (``str.ljust`` counts characters, not columns)."""
    return text + " " * max(0, width - display_width(text))

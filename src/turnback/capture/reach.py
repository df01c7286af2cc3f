"""What a command line can touch, as far as turnback can see: the paths, or why it cannot tell.

``covers`` vouches for a command only when its effects are limited to paths
turnback can name before it runs. So a command is read word by word: a
program whose effects are limited to the paths it is given (``rm``, ``mv``,
``sed -i``, ``dd of=``, ``find -delete`` …) names them; a program that only
writes its output (``echo``, ``cat``, ``grep`` …) names none, and its output
redirections are paths; ``sh -c``/``bash -c`` scripts are read the same way,
command by command. Anything else (an interpreter running code, ``eval``,
``xargs``, ``find -exec``, a shell expansion, a program turnback does not
know) is a reason: turnback cannot tell which files it changes.

Paths are spelled as the outside paths a command names are (the real path of
the folder, plus the name), and a link's own target is a path it can touch
too (``echo x > link`` writes where the link points).
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from collections.abc import Sequence
from typing import NamedTuple

from turnback.catalog import Message

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh"})
# Programs whose only effect is on the paths they are given (each word that is no option is one).
WRITERS = frozenset({"rm", "rmdir", "unlink", "mv", "cp", "ln", "touch", "mkdir", "chmod", "truncate", "tee", "uniq"})
REMOVERS = frozenset({"rm", "rmdir", "unlink", "mv", "ln", "chmod"})  # what they do to a device is no write to it
# Programs (and shell builtins) that change no file: only their output, whose redirections are paths.
OUTPUT_ONLY = frozenset(
    {
        "echo", "printf", "cat", "ls", "head", "tail", "wc", "grep", "egrep", "fgrep", "diff", "cmp", "stat",
        "du", "df", "test", "[", "[[", "true", "false", ":", "sleep", "pwd", "basename", "dirname", "realpath",
        "readlink", "set", "export", "unset", "umask", "which", "type", "date", "whoami", "id", "uname", "nproc",
    }
)  # fmt: skip
INTERPRETERS = frozenset(
    {"eval", "source", ".", "xargs", "python", "python3", "perl", "ruby", "node", "php", "lua", "awk", "gawk"}
)
WRAPPERS = frozenset({"env", "nohup", "time", "command", "exec", "nice", "timeout"})
PROGRAM_FOLDERS = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"})
# Keywords that only start or end a script's command.
KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!"})
OPAQUE_KEYWORDS = frozenset({"for", "case", "select", "function", "coproc"})
HARMLESS_DEVICES = frozenset(
    {"/dev/null", "/dev/zero", "/dev/full", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/random",
     "/dev/urandom"}
)  # fmt: skip
SYSTEM_FOLDERS = ("/dev", "/proc", "/sys")
HEREDOC = re.compile(r"(?<!<)<<(-?)\s*(['\"]?)([A-Za-z0-9_]+)\2")

EXPANSION = Message("reach_shell_expansion")


class Reach(NamedTuple):
    paths: tuple[str, ...]  # absolute, each as the outside paths a command names are spelled
    reasons: tuple[Message, ...]  # what turnback cannot see through


def spelled(full: str) -> str:
    """*full* (absolute, normalized) as its folder's real path plus its name: the entry, not a link's target."""
    parent, name = os.path.split(full)
    return os.path.join(os.path.realpath(parent), name) if name else full


class _Reader:
    def __init__(self, cwd: str):
        self.cwd = cwd
        self.paths: dict[str, None] = {}
        self.reasons: dict[Message, None] = {}

    def path(self, word: str, *, program: str = "") -> None:
        """A path the command can touch (a pattern: the folder it matches in)."""
        if not word:
            return
        if re.search(r"\{[^}]*(,|\.\.)", word):
            self.reasons.setdefault(Message("reach_brace_expansion", word=word))
            return
        fixed = re.split(r"[*?\[]", word, maxsplit=1)
        if len(fixed) > 1:  # a pattern: everything it can match is in the folder its fixed part names
            word = os.path.dirname(fixed[0]) or "."
        full = os.path.normpath(os.path.join(self.cwd, os.path.expanduser(word)))
        if full in HARMLESS_DEVICES and program not in REMOVERS:
            return
        self.paths.setdefault(spelled(full))
        real = os.path.realpath(full)
        if real != full:
            self.paths.setdefault(real)  # through a link: where it points

    def command(self, words: Sequence[str]) -> None:
        """One simple command (no separators, no redirections)."""
        words = list(words)
        while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
            words.pop(0)  # NAME=VALUE before the program
        if not words:
            return
        word = words[0]
        program = os.path.basename(word)
        if "/" in word and os.path.dirname(word) not in PROGRAM_FOLDERS:
            self.reasons.setdefault(Message("reach_unknown_program", program=word))
            return
        args = words[1:]
        if program in WRAPPERS:
            self.command(_unwrapped(program, args))
        elif program in SHELLS:
            self.shell(program, args)
        elif program in OUTPUT_ONLY:
            pass
        elif program in INTERPRETERS:
            self.reasons.setdefault(Message("reach_runs_code", program=program))
        elif program == "cd":
            self.reasons.setdefault(Message("reach_cd"))
        elif program == "shred":
            self.reasons.setdefault(Message("reach_shred"))
        elif program == "sed":
            self.sed(args)
        elif program == "dd":
            for arg in args:
                if arg.startswith("of="):
                    self.path(arg[3:], program=program)
        elif program == "find":
            self.find(args)
        elif program == "git":
            self.git(args)
        elif program in WRITERS:
            self.operands(args, program)
        else:
            self.reasons.setdefault(Message("reach_cannot_tell", what=program))

    def operands(self, args: Sequence[str], program: str) -> None:
        options = True
        for arg in args:
            if options and arg == "--":
                options = False
            elif options and arg.startswith("-") and arg != "-":
                if "=" in arg:  # --target-directory=DIR
                    self.path(arg.split("=", 1)[1], program=program)
            else:
                self.path(arg, program=program)

    def shell(self, program: str, args: Sequence[str]) -> None:
        script: str | None = None
        wants_script = False
        rest = list(args)
        while rest:
            arg = rest.pop(0)
            if arg in ("-o", "+o"):
                rest[:1] = []
            elif arg.startswith(("-", "+")) and not arg.startswith("--"):
                wants_script = wants_script or "c" in arg
            elif arg.startswith("--"):
                continue
            else:
                if wants_script:
                    script = arg
                break
        if script is None:
            self.reasons.setdefault(Message("reach_shell_without_c", program=program))
            return
        self.script(script)

    def script(self, script: str) -> None:
        """A shell script, command by command; what it cannot see through is a reason."""
        script = self._without_heredocs(script)
        if _expands(script):
            self.reasons.setdefault(EXPANSION)
            return
        lexer = shlex.shlex(script, posix=True, punctuation_chars="();<>|&\n")
        lexer.whitespace = " \t\r"
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:
            self.reasons.setdefault(Message("reach_unclosed_quote"))
            return
        words: list[str] = []
        redirect: str | None = None
        for token in tokens:
            if redirect is not None:
                if redirect == "write" and not token.isdigit() and token != "-":
                    self.path(token)
                redirect = None
                continue
            if token and all(c in "();<>|&\n" for c in token):
                if "<" in token or ">" in token:
                    redirect = "read" if ">" not in token or token == "<<<" else "write"
                    if token == ">&" or token == "<&":
                        redirect = "write"  # >&FILE; >&2 is a number, and left out
                if any(c in token for c in "();|\n") or token in ("&", "&&"):
                    self.command(words)
                    words = []
                continue
            if not words and (token in KEYWORDS or token in ("{", "}")):
                continue
            if not words and token in OPAQUE_KEYWORDS:
                self.reasons.setdefault(Message("reach_script_token", token=token))
                return
            words.append(token)
        self.command(words)

    def _without_heredocs(self, script: str) -> str:
        """*script* without here-documents' bodies (their text is no command); an expanding body is a reason."""
        lines: list[str] = []
        pending: list[tuple[str, bool, bool]] = []  # (delimiter, strip tabs, expands)
        for line in script.split("\n"):
            if pending:
                delimiter, strip, expands = pending[0]
                if (line.lstrip("\t") if strip else line) == delimiter:
                    pending.pop(0)
                elif expands and _expands(line.replace("'", "")):
                    self.reasons.setdefault(EXPANSION)
                continue
            for match in HEREDOC.finditer(line):
                pending.append((match.group(3), match.group(1) == "-", not match.group(2)))
            lines.append(HEREDOC.sub(" ", line))
        return "\n".join(lines)

    def sed(self, args: Sequence[str]) -> None:
        in_place = False
        scripts: list[str] = []
        files: list[str] = []
        rest = list(args)
        while rest:
            arg = rest.pop(0)
            if arg == "--":
                files += rest
                break
            if arg.startswith("--"):
                name, _, value = arg.partition("=")
                if name == "--in-place":
                    in_place = True
                    if "/" in value:
                        self.reasons.setdefault(Message("reach_sed_backup_elsewhere"))
                elif name == "--expression":
                    scripts.append(value if value else (rest.pop(0) if rest else ""))
                elif name == "--file":
                    self.reasons.setdefault(Message("reach_sed_script_file"))
                continue
            if arg.startswith("-") and arg != "-":
                cluster = arg[1:]
                while cluster:
                    flag, cluster = cluster[0], cluster[1:]
                    if flag == "i":
                        in_place = True
                        if "/" in cluster:
                            self.reasons.setdefault(Message("reach_sed_backup_elsewhere"))
                        cluster = ""
                    elif flag == "e":
                        scripts.append(cluster if cluster else (rest.pop(0) if rest else ""))
                        cluster = ""
                    elif flag == "f":
                        self.reasons.setdefault(Message("reach_sed_script_file"))
                        cluster = ""
                    elif flag == "l":
                        if not cluster and rest:
                            rest.pop(0)
                        cluster = ""
                continue
            if not scripts:
                scripts.append(arg)
            else:
                files.append(arg)
        if any(_sed_writes_or_runs(script) for script in scripts):
            self.reasons.setdefault(Message("reach_sed_writes"))
        if in_place:
            for name in files:
                self.path(name, program="sed")

    def find(self, args: Sequence[str]) -> None:
        rest = list(args)
        while rest and (rest[0] in ("-H", "-L", "-P", "-D") or rest[0].startswith("-O")):
            flag = rest.pop(0)
            if flag == "-L":
                self.reasons.setdefault(Message("reach_find_follows", flag="-L"))
            elif flag == "-D" and rest:
                rest.pop(0)
        starts: list[str] = []
        while rest and not rest[0].startswith(("-", "(", "!", ")")):
            starts.append(rest.pop(0))
        deletes = False
        for position, arg in enumerate(rest):
            if arg in ("-exec", "-execdir", "-ok", "-okdir"):
                self.reasons.setdefault(Message("reach_find_runs", flag=arg))
            elif arg == "-follow":
                self.reasons.setdefault(Message("reach_find_follows", flag="-follow"))
            elif arg == "-delete":
                deletes = True
            elif arg in ("-fprint", "-fprint0", "-fprintf", "-fls") and position + 1 < len(rest):
                self.path(rest[position + 1])
        if deletes:
            for start in starts or ["."]:
                self.path(start, program="rm")

    def git(self, args: Sequence[str]) -> None:
        """Only ``git clean`` (from the folder it runs in): any other git command may run hooks or change .git."""
        if not args or args[0] != "clean":
            self.reasons.setdefault(Message("reach_cannot_tell", what=" ".join(["git", *args[:1]])))
            return
        words = [w for arg in args[1:] for w in (arg.split() if " " in arg else [arg])]
        flags = [w for w in words if w.startswith("-") and not w.startswith("--")]
        if any("x" in f or "X" in f for f in flags) or "--ignored" in words:
            self.reasons.setdefault(Message("reach_git_clean_x"))
        pathspecs = [w for w in words if not w.startswith("-")]
        for spec in pathspecs or ["."]:
            self.path(spec, program="rm")


def _unwrapped(wrapper: str, args: Sequence[str]) -> list[str]:
    """The command a wrapper (``env A=1 CMD``, ``timeout 5 CMD``, ``nice -n 5 CMD`` …) runs."""
    rest = list(args)
    takes_value = {"env": ("-u", "-C", "-S"), "nice": ("-n",), "timeout": ("-s", "-k"), "exec": ("-a",)}
    while rest and rest[0].startswith("-") and rest[0] != "-":
        flag = rest.pop(0)
        if flag == "--":
            break
        if flag in takes_value.get(wrapper, ()) and rest:
            rest.pop(0)
    if wrapper == "env":
        while rest and "=" in rest[0]:
            rest.pop(0)
    if wrapper == "timeout" and rest:
        rest.pop(0)  # the duration
    return rest


def _expands(script: str) -> bool:
    """Whether *script* has a ``$`` or a backquote outside single quotes (an expansion the shell makes)."""
    quoted = escaped = False
    for char in script:
        if escaped:
            escaped = False
        elif quoted:
            quoted = char != "'"
        elif char == "\\":
            escaped = True
        elif char == "'":
            quoted = True
        elif char in "$`":
            return True
    return False


def _skip_delimited(script: str, at: int, delimiter: str) -> int:
    """The index just past the next unescaped *delimiter* from *at* (ValueError when there is none)."""
    while at < len(script):
        if script[at] == "\\":
            at += 2
            continue
        if script[at] == delimiter:
            return at + 1
        at += 1
    raise ValueError("unterminated")


def _sed_writes_or_runs(script: str) -> bool:
    """Whether a sed script has a ``w``/``W``/``e`` command or an ``s///`` with the ``w`` or ``e`` flag.

    A script it cannot read through counts as one that does.
    """
    at = 0
    try:
        while at < len(script):
            char = script[at]
            if char in " \t\n;{}!,$~+" or char.isdigit():
                at += 1
            elif char in "/\\":  # an address: /regex/ or \cregexc
                if char == "\\":
                    at += 1
                at = _skip_delimited(script, at + 1, script[at])
                while at < len(script) and script[at] in "IM":
                    at += 1
            elif char in "sy":
                delimiter = script[at + 1]
                at = _skip_delimited(script, _skip_delimited(script, at + 2, delimiter), delimiter)
                flags = re.match(r"[^;\n}]*", script[at:])
                if char == "s" and flags and re.search(r"[we]", flags.group(0)):
                    return True
                at += len(flags.group(0)) if flags else 0
            elif char in "wWe":
                return True
            elif char in "aic":  # text to the end of the line
                end = script.find("\n", at)
                at = len(script) if end < 0 else end
            elif char in "rRbtTvqQlL:":  # a file name, label or number to the end of the command
                stop = re.search(r"[;\n]", script[at:])
                at = len(script) if stop is None else at + stop.start()
            elif char.isalpha() or char == "=":
                at += 1
            else:
                return True
    except (ValueError, IndexError):
        return True
    return False


def command_reach(argv: Sequence[str], cwd: str) -> Reach:
    """The paths *argv* (run in *cwd*) can touch, and what in it turnback cannot see through."""
    reader = _Reader(cwd)
    reader.command(argv)
    return Reach(tuple(reader.paths), tuple(reader.reasons))


def untouchable(path: str, store_home: str) -> Message | None:
    """Why no snapshot can hold what a command does to *path*, if none can: ``/``, a device, the store, home."""
    user_home = os.path.realpath(os.path.expanduser("~"))
    if path == "/":
        return Message("reach_whole_file_system")
    if any(path == folder or path.startswith(folder + "/") for folder in SYSTEM_FOLDERS):
        return Message("reach_system_file", path=path)
    if path == store_home or path.startswith(store_home + "/"):
        return Message("reach_is_store", path=path)
    if store_home.startswith(path.rstrip("/") + "/"):
        return Message("reach_holds_store", path=path)
    if path == user_home:
        return Message("reach_home_folder", path=path)
    try:
        mode = os.stat(path).st_mode  # stat opens nothing, so a FIFO does not block it
    except OSError:
        return None
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):  # a device, wherever it is
        return Message("reach_device", path=path)
    return None


__all__ = ["Reach", "command_reach", "spelled", "untouchable"]

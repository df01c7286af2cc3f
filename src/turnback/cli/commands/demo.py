"""``turnback demo``: play a short agent session in a temp project and show what a user sees.

Every step runs the real CLI (in this process, against a temp store) and
prints its command line and its output. At the end the project must be
byte-identical to how it started; the demo says so, or fails.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import shlex
import shutil
import tempfile
from collections.abc import Sequence

from turnback.catalog import Message, say, word
from turnback.cli import _common

START_FILES = {
    "README.md": b"# tiny\n\nA tiny project.\n",
    "src/app.py": b'def greet(name):\n    return "Hello, " + name\n\n\nprint(greet("world"))\n',
    "src/util.py": b"def add(a, b):\n    return a + b\n",
    "notes.txt": b"remember the milk\n",
}


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("demo", parents=[common], help="play a short agent session in a temp project")
    parser.add_argument("--keep", action="store_true", help="keep the temp project and store, and print where")


def tree_manifest(root: str) -> dict[str, tuple[str, int]]:
    """Every file under *root* with the hash of its bytes and its mode."""
    manifest = {}
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        rel_folder = os.path.relpath(folder, root)
        if rel_folder != ".":
            manifest[rel_folder + "/"] = ("dir", 0)
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                digest = hashlib.sha256(handle.read()).hexdigest()
            manifest[os.path.relpath(path, root)] = (digest, os.lstat(path).st_mode & 0o7777)
    return manifest


class DemoFailed(Exception):
    """A step of the demo did not do what it shows."""

    def __init__(self, message: Message):
        super().__init__(str(message))
        self.message = message


class _Player:
    def __init__(self, ctx: _common.Context, project: str, store: str):
        self.ctx = ctx
        self.project = project
        self.store = store
        self.session = ""

    def say(self, code: str) -> None:
        """A comment line before a step: the narration with *code*."""
        self.ctx.out.line("")
        self.ctx.out.line("# " + say(code))

    def run(
        self, args: Sequence[str], *, stdin: bytes = b"", show: str | None = None, expect: int = 0
    ) -> tuple[int, str]:
        from turnback.cli.main import main  # the CLI itself, run in this process

        words = ["$S" if self.session and arg == self.session else shlex.quote(arg) for arg in args]
        shown = show or "turnback " + " ".join(words)
        self.ctx.out.line(f"$ {shown}")
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(["--store", self.store, *args], stdin=io.BytesIO(stdin))
        for text in (stdout.getvalue(), stderr.getvalue()):
            for line in text.splitlines():
                self.ctx.out.line(line)
        if code != expect:
            raise DemoFailed(Message("demo_step_exited", command=shown, code=code, expect=expect))
        return code, stdout.getvalue()

    def user_writes(self, path: str, content: bytes) -> None:
        self.ctx.out.line(say("demo_you_edit", path=path))
        with open(os.path.join(self.project, path), "wb") as handle:
            handle.write(content)


def _call_id(output: str) -> str:
    return output.split()[1]


def play(player: _Player) -> None:
    p = player
    p.say("demo_says_project")
    p.run(["init"])
    _, session_out = p.run(["session", "new", "--title", "demo"])
    p.session = session_out.strip()
    p.ctx.out.line(say("demo_session_variable"))
    s = ["--session", p.session]

    p.say("demo_says_turn_1")
    p.run(["turn", "begin", *s, "--message", "greet politely and add a changelog"])
    p.run(["edit", *s, "src/app.py", "--old", '"Hello, "', "--new", '"Good day, "'])
    changes = b"# Changes\n\n- greet politely\n"
    shown = "printf ... | turnback write --session $S docs/CHANGES.md"
    p.run(["write", *s, "docs/CHANGES.md"], stdin=changes, show=shown)
    p.run(["turn", "end", *s])

    p.say("demo_says_turn_2")
    p.run(["turn", "begin", *s, "--message", "tidy up"])
    p.run(["rm", *s, "notes.txt"])
    p.run(["mv", *s, "src/util.py", "src/helpers.py"])
    p.run(["edit", *s, "src/helpers.py", "--old", "a + b", "--new", "sum((a, b))"])
    p.run(["turn", "end", *s])

    p.say("demo_says_turn_3")
    p.run(["turn", "begin", *s, "--message", "print twice"])
    _, edit3 = p.run(["edit", *s, "src/app.py", "--old", 'print(greet("world"))', "--new", 'print(greet("you"))'])
    p.run(["turn", "end", *s])

    p.say("demo_says_log")
    p.run(["log", *s])

    p.say("demo_says_refuses")
    mine = b'def greet(name):\n    return "Good day, " + name\n\n\nprint(greet("you"))\nprint("mine")\n'
    p.user_writes("src/app.py", mine)
    p.run(["revert", _call_id(edit3), "--yes"], expect=1)

    p.say("demo_says_anyway")
    p.run(["revert", _call_id(edit3), "--anyway", "--yes"])

    p.say("demo_says_undo")
    p.run(["undo", *s, "--from", "1", "--dry-run"])
    p.run(["undo", *s, "--from", "1", "--yes"])
    p.run(["log", *s])


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    workdir = tempfile.mkdtemp(prefix="turnback-demo-")
    project = os.path.join(workdir, "project")
    store = os.path.join(workdir, "store")
    for path, content in START_FILES.items():
        full = os.path.join(project, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as handle:
            handle.write(content)
    os.makedirs(store, mode=0o700)
    start = tree_manifest(project)
    saved_env = {name: os.environ.get(name) for name in ("TURNBACK_NO_KEYRING", "TURNBACK_SESSION")}
    os.environ["TURNBACK_NO_KEYRING"] = "1"  # a demo store must not leave a key in the user's keyring
    os.environ.pop("TURNBACK_SESSION", None)
    cwd = os.getcwd()
    failure: Message | None = None
    try:
        os.chdir(project)
        ctx.out.line(say("demo_project_in", project=project))
        try:
            play(_Player(ctx, project, store))
        except DemoFailed as exc:
            failure = exc.message
        same = tree_manifest(project) == start
    finally:
        os.chdir(cwd)
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    ctx.out.line("")
    if failure:
        ctx.out.line(say("demo_stopped", failure=failure))
    elif same:
        ctx.out.line(say("demo_identical"))
    else:
        ctx.out.line(say("demo_differs"))
    if args.keep:
        ctx.out.line(say("demo_kept", folder=workdir))
    failed = {"failed": word(failure), "code": failure.code} if failure else {"failed": None, "code": None}
    ctx.out.json({"identical": same, **failed, "kept": workdir if args.keep else None})
    return 0 if same and not failure else 1

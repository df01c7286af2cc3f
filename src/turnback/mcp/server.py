"""``turnback mcp --root DIR``: file tools with checkpoints, for any MCP client, over stdio.

The tools are named and shaped like the reference filesystem server's
(``read_text_file``, ``write_file``, ``edit_file`` with ``edits`` and
``dryRun``, ``create_directory``, ``move_file``, ``list_directory``,
``directory_tree``, ``search_files``, ``get_file_info``,
``list_allowed_directories``), plus ``delete_file`` and ``run_command``.
Every write goes through turnback, so the user can take it back with
``turnback undo`` / ``turnback revert``. There is no undo tool: only the user
takes changes back.

Turns: a new turn starts after an idle gap of ``mcp.turn_gap_s`` seconds
(default 30), or when the user runs ``turnback turn begin``; a turn counts
as running only while a tool call executes, so an idle or crashed server
never blocks the user's undo. Paths outside the root, and turnback's own
store, are refused.
"""

from __future__ import annotations

import datetime
import fnmatch
import json
import os
import stat
import subprocess
import tempfile
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import Field, ValidationError
from typing_extensions import TypedDict

import turnback
from turnback import Engine, Session, TurnbackError
from turnback.render.diff import diff_bytes, file_headers
from turnback.render.summary import command_line

DEFAULT_TURN_GAP_S = 30.0
TOOLS = (
    "read_text_file",
    "write_file",
    "edit_file",
    "create_directory",
    "list_directory",
    "directory_tree",
    "move_file",
    "search_files",
    "get_file_info",
    "list_allowed_directories",
    "delete_file",
    "run_command",
)


Path = Annotated[str, Field(description="a path inside the allowed folder (relative to it, or absolute)")]


class EditOperation(TypedDict):
    oldText: str
    newText: str


def _unified(path: str, old: bytes, new: bytes) -> str:
    diff = diff_bytes(old, new)
    if diff.binary:
        return diff.binary_line
    return "\n".join([*file_headers(path, old_exists=True, new_exists=True), *diff.lines])


class Tools:
    """The tool implementations: each parses, calls the engine, and words the result for the model."""

    def __init__(self, engine: Engine, session: Session, root: str, gap_s: float):
        self.engine = engine
        self.session = session
        self.root = root
        self.gap_s = gap_s
        home = os.path.realpath(engine.home)
        inside = home.startswith(root.rstrip("/") + "/")
        self._store_rel = home[len(root.rstrip("/")) + 1 :] if inside else None  # never listed, walked or searched

    def _hidden(self, rel: str) -> bool:
        return os.path.basename(rel) == ".git" or rel == self._store_rel

    def _call(self, work: Any) -> Any:
        """Run *work* inside a tool turn; turnback's refusals become tool errors the model reads."""
        try:
            with self.engine.tool_turn(self.session.id, gap_s=self.gap_s):
                return work()
        except TurnbackError as exc:
            raise ToolError(str(exc)) from exc
        except OSError as exc:
            raise ToolError(f"{exc.filename or ''}: {exc.strerror or exc}".strip(": ")) from exc

    def _read(self, path: str) -> bytes:
        try:
            return self.engine.read(self.session.id, path, cwd=self.root)
        except TurnbackError as exc:
            raise ToolError(str(exc)) from exc
        except FileNotFoundError as exc:
            raise ToolError(f"{path} does not exist") from exc

    def read_text_file(self, path: str, head: int | None = None, tail: int | None = None) -> str:
        if head is not None and tail is not None:
            raise ToolError("give head or tail, not both")
        text = self._read(path).decode("utf-8", "replace")
        lines = text.splitlines(keepends=True)
        if head is not None:
            return "".join(lines[:head])
        if tail is not None:
            return "".join(lines[-tail:]) if tail else ""
        return text

    def write_file(self, path: str, content: str) -> str:
        call = self._call(
            lambda: self.engine.write(
                self.session.id,
                path,
                content.encode("utf-8"),
                cwd=self.root,
                tool="write_file",
                raw_input={"path": path, "content": content},
            )
        )
        return f"Successfully wrote to {path} (call {turnback.short_id(call.id)})"

    def edit_file(self, path: str, edits: list[EditOperation], dryRun: bool = False) -> str:
        original = self._read(path)
        text = original.decode("utf-8", "surrogateescape")
        for number, edit in enumerate(edits, 1):
            old, new = edit["oldText"], edit["newText"]
            count = text.count(old) if old else 0
            if count == 0:
                raise ToolError(f"edit {number}: the old text is not in {path}; nothing was changed")
            if count > 1:
                raise ToolError(f"edit {number}: the old text occurs {count} times in {path}; give more of it")
            text = text.replace(old, new, 1)
        edited = text.encode("utf-8", "surrogateescape")
        rel = self._where(path)[1]
        diff = _unified(str(rel) if rel else path, original, edited)
        if dryRun:
            return diff
        self._call(
            lambda: self.engine.write(
                self.session.id,
                path,
                edited,
                cwd=self.root,
                tool="edit_file",
                raw_input={"path": path, "edits": edits},
            )
        )
        return diff

    def create_directory(self, path: str) -> str:
        self._call(lambda: self.engine.mkdir(self.session.id, path, cwd=self.root))
        return f"Successfully created directory {path}"

    def _where(self, path: str) -> tuple[Any, Any]:
        try:
            return self.engine.browse(self.session.id, path, cwd=self.root)
        except TurnbackError as exc:
            raise ToolError(str(exc)) from exc

    def list_directory(self, path: str) -> str:
        tree, rel = self._where(path)
        try:
            entries = tree.list_folder(rel)
        except (OSError, TurnbackError) as exc:
            raise ToolError(f"cannot list {path}: {exc}") from exc
        return "\n".join(
            f"{'[DIR]' if entry.is_dir else '[FILE]'} {name}"
            for name, entry in entries
            if not self._hidden(f"{rel}/{name}" if rel else name)
        )

    def _tree(self, tree: Any, rel: Any, exclude: list[str]) -> list[dict[str, Any]]:
        nodes = []
        for name, entry in tree.list_folder(rel):
            child = f"{rel}/{name}" if rel else name
            if self._hidden(child) or any(fnmatch.fnmatch(child, p) or fnmatch.fnmatch(name, p) for p in exclude):
                continue
            if entry.is_dir:
                nodes.append({"name": name, "type": "directory", "children": self._tree(tree, child, exclude)})
            else:
                nodes.append({"name": name, "type": "file"})
        return nodes

    def directory_tree(self, path: str, excludePatterns: list[str] | None = None) -> str:
        tree, rel = self._where(path)
        try:
            return json.dumps(self._tree(tree, rel, excludePatterns or []), indent=2)
        except (OSError, TurnbackError) as exc:
            raise ToolError(f"cannot walk {path}: {exc}") from exc

    def move_file(self, source: str, destination: str) -> str:
        self._call(lambda: self.engine.move(self.session.id, source, destination, cwd=self.root))
        return f"Successfully moved {source} to {destination}"

    def search_files(self, path: str, pattern: str, excludePatterns: list[str] | None = None) -> str:
        tree, rel = self._where(path)
        exclude = excludePatterns or []
        found: list[str] = []

        def walk(folder: Any) -> None:
            for name, entry in tree.list_folder(folder):
                child = f"{folder}/{name}" if folder else name
                if self._hidden(child) or any(fnmatch.fnmatch(child, p) for p in exclude):
                    continue
                if fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(child, pattern) or pattern.lower() in name.lower():
                    found.append(os.path.join(self.root, child))
                if entry.is_dir:
                    walk(child)

        try:
            walk(rel)
        except (OSError, TurnbackError) as exc:
            raise ToolError(f"cannot search {path}: {exc}") from exc
        return "\n".join(found) if found else "No matches found"

    def get_file_info(self, path: str) -> str:
        tree, rel = self._where(path)
        if rel is None:
            st = os.stat(self.root)
        else:
            entry = tree.lstat(rel)
            if entry is None:
                raise ToolError(f"{path} does not exist")
            st = os.lstat(os.path.join(self.root, rel))
        times = {
            "created": st.st_ctime,
            "modified": st.st_mtime,
            "accessed": st.st_atime,
        }
        lines = [f"size: {st.st_size}"]
        lines += [f"{key}: {datetime.datetime.fromtimestamp(value).isoformat()}" for key, value in times.items()]
        lines += [
            f"isDirectory: {str(stat.S_ISDIR(st.st_mode)).lower()}",
            f"isFile: {str(stat.S_ISREG(st.st_mode)).lower()}",
            f"permissions: {stat.S_IMODE(st.st_mode):o}",
        ]
        return "\n".join(lines)

    def list_allowed_directories(self) -> str:
        return f"Allowed directories:\n{self.root}"

    def delete_file(self, path: str) -> str:
        self._call(lambda: self.engine.delete(self.session.id, path, cwd=self.root))
        return f"Successfully deleted {path}"

    def run_command(self, command: str, timeout: float | None = None, cwd: str | None = None) -> str:
        workdir = self.root
        if cwd:
            _, rel = self._where(cwd)
            workdir = os.path.join(self.root, rel) if rel else self.root
        with tempfile.TemporaryFile() as output:

            def work() -> Any:
                return self.engine.run_command(
                    self.session.id,
                    ["sh", "-c", command],
                    cwd=workdir,
                    timeout=timeout,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                )

            result = self._call(work)
            output.seek(0)
            text = output.read().decode("utf-8", "replace")
        lines = [text.rstrip("\n")] if text else []
        if result.timed_out:
            lines.append(f"(still running after {timeout:g} s; it goes on, and its changes are recorded when it ends)")
        else:
            lines.append(f"(exit status {result.exit_code})")
        line = result.line or command_line(result.call.changes, self.engine.load)
        if line:
            lines.append(line)
        return "\n".join(lines)


def build_server(tools: Tools) -> MCPServer:
    server: MCPServer = MCPServer(
        "turnback",
        instructions=(
            "File tools with checkpoints: every change can be taken back by the user with turnback. "
            f"Only paths inside {tools.root} are allowed."
        ),
    )

    @server.tool(description="Read a text file (head/tail: only the first or last N lines).")
    async def read_text_file(path: Path, head: int | None = None, tail: int | None = None) -> str:
        return tools.read_text_file(path, head, tail)

    @server.tool(description="Create or overwrite a file; the earlier content is kept so the user can take it back.")
    async def write_file(path: Path, content: str) -> str:
        return tools.write_file(path, content)

    @server.tool(description="Replace exact text in a file (each oldText must occur once); dryRun previews the diff.")
    async def edit_file(path: Path, edits: list[EditOperation], dryRun: bool = False) -> str:
        return tools.edit_file(path, edits, dryRun)

    @server.tool(description="Create a folder, and the folders above it that are missing.")
    async def create_directory(path: Path) -> str:
        return tools.create_directory(path)

    @server.tool(description="List a folder: [FILE] and [DIR] entries.")
    async def list_directory(path: Path) -> str:
        return tools.list_directory(path)

    @server.tool(description="The tree below a folder as JSON (name, type, children).")
    async def directory_tree(path: Path, excludePatterns: list[str] | None = None) -> str:
        return tools.directory_tree(path, excludePatterns)

    @server.tool(description="Move or rename a file.")
    async def move_file(source: Path, destination: Path) -> str:
        return tools.move_file(source, destination)

    @server.tool(description="Find files below a folder whose name matches a glob pattern.")
    async def search_files(path: Path, pattern: str, excludePatterns: list[str] | None = None) -> str:
        return tools.search_files(path, pattern, excludePatterns)

    @server.tool(description="Size, times, kind and permissions of a file or folder.")
    async def get_file_info(path: Path) -> str:
        return tools.get_file_info(path)

    @server.tool(description="The folder these tools may use.")
    async def list_allowed_directories() -> str:
        return tools.list_allowed_directories()

    @server.tool(description="Delete a file, link or empty folder; the user can take it back.")
    async def delete_file(path: Path) -> str:
        return tools.delete_file(path)

    @server.tool(
        description="Run a shell command in the folder; what it changes is recorded so the user can take it back. "
        "Returns its output, exit status and a line naming the files it changed."
    )
    async def run_command(command: str, timeout: float | None = None, cwd: str | None = None) -> str:
        return tools.run_command(command, timeout, cwd)

    return server


def _unreadable_reply(problem: Exception) -> JSONRPCError | None:
    """The error reply to a message the SDK could not read; ``None`` for a notification (it gets no reply).

    The SDK drops such a message without a word, so a request that held, say, a lone surrogate
    (``"\\ud800"``, no Unicode character) left its client waiting for ever.
    """
    errors = problem.errors() if isinstance(problem, ValidationError) else []
    given = errors[0].get("input") if errors else None
    try:
        message = json.loads(given if isinstance(given, str) else "")  # Python's reader takes lone surrogates
    except ValueError:
        return JSONRPCError(
            jsonrpc="2.0", id=None, error=ErrorData(code=PARSE_ERROR, message="the message is not valid JSON")
        )
    if not isinstance(message, dict) or "id" not in message:
        return None
    request_id = message["id"]
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None
    if any(error.get("type") == "json_invalid" for error in errors):  # JSON to Python, not to the SDK: surrogates
        reason = "the request holds text that is not Unicode (a lone surrogate such as \\ud800); nothing was done"
    else:
        reason = "the request is not a JSON-RPC request this server reads; nothing was done"
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=INVALID_REQUEST, message=reason))


class _AnsweringReader:
    """The SDK's read stream, but a message it could not read gets an error reply instead of silence."""

    def __init__(self, inner: Any, replies: Any):
        self._inner = inner
        self._replies = replies

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            reply = _unreadable_reply(item)
            if reply is not None:
                await self._replies.send(SessionMessage(reply))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _AnsweringReader:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _AnsweringReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def _run_stdio(server: MCPServer) -> None:
    """``server.run("stdio")``, with every message answered (see :class:`_AnsweringReader`)."""
    lowlevel = server._lowlevel_server  # the SDK's own run_stdio_async does the same; no public handle exists
    async with stdio_server() as (read_stream, write_stream):
        reader = _AnsweringReader(read_stream, write_stream)
        await lowlevel.run(reader, write_stream, lowlevel.create_initialization_options())


def serve(root: str, *, home: str | None = None, title: str | None = None) -> None:
    """Serve the tools for the folder *root* over stdio until the client disconnects."""
    real_root = os.path.realpath(root)
    if not os.path.isdir(real_root):
        raise turnback.UsageError(f"{root} is not a folder")
    engine = turnback.open(home, confined=True)
    try:
        session = engine.new_session(real_root, title=title or "MCP client")
        gap = float(engine.config_value("mcp.turn_gap_s", project_root=real_root))  # type: ignore[arg-type]
        anyio.run(_run_stdio, build_server(Tools(engine, session, real_root, gap)))
    finally:
        engine.close()


__all__ = ["TOOLS", "Tools", "build_server", "serve"]

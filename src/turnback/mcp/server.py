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

import base64
import datetime
import json
import os
import signal
import stat
import subprocess
import tempfile
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ToolAnnotations,
)
from pydantic import Field
from typing_extensions import TypedDict
from wcmatch import glob

import turnback
from turnback import Engine, Session, TurnbackError, UsageError
from turnback.catalog import Message, language, say, word
from turnback.engine import CommandResult, KeptStore, TextEdit, TextEdited
from turnback.mcp.direct import DirectCalls, ToolFunction
from turnback.mcp.wire import run_stdio
from turnback.render.diff import diff_bytes, file_headers
from turnback.render.summary import command_line

T = TypeVar("T")
DEFAULT_TURN_GAP_S = 30.0
TOOLS = (
    "read_file",
    "read_text_file",
    "read_media_file",
    "read_multiple_files",
    "write_file",
    "edit_file",
    "create_directory",
    "list_directory",
    "list_directory_with_sizes",
    "directory_tree",
    "move_file",
    "search_files",
    "get_file_info",
    "list_allowed_directories",
    "delete_file",
    "run_command",
)
# Tools that wait while they work (a command, in a worker thread): the SDK answers them, serving other calls
# meanwhile and stopping the command when the client cancels; the others answer at once (mcp/direct.py).
WAITS = frozenset({"run_command"})


Path = Annotated[str, Field(description="a path inside the allowed folder (relative to it, or absolute)")]


class EditOperation(TypedDict):
    oldText: str
    newText: str


# The reference server matches with minimatch(relative path, pattern, {dot: true}): ``**`` spans any number of
# folders (none too, so ``**/*.txt`` finds top-level files), ``*`` stays inside one, braces and extglobs expand,
# a leading ``!`` negates, and dot-files are not special. wcmatch's globmatch with these flags is the same.
GLOB_FLAGS = glob.GLOBSTAR | glob.DOTGLOB | glob.BRACE | glob.EXTGLOB | glob.NEGATE | glob.NEGATEALL


def glob_matches(rel: str, pattern: str) -> bool:
    """Whether the path *rel* (relative to the folder searched) matches *pattern* as the reference's minimatch."""
    return bool(glob.globmatch(rel, pattern, flags=GLOB_FLAGS))


def tree_excludes(rel: str, pattern: str) -> bool:
    """directory_tree's exclusion, as the reference's: a pattern with ``*`` matches the relative path; one
    without matches the path, any entry of that name, or anything below a folder of that name."""
    if "*" in pattern:
        return glob_matches(rel, pattern)
    return any(glob_matches(rel, p) for p in (pattern, f"**/{pattern}", f"**/{pattern}/**"))


def format_size(size: int) -> str:
    """A size as the reference's list_directory_with_sizes words it: ``512 B``, ``1.50 KB``."""
    units = ("B", "KB", "MB", "GB", "TB")
    if size <= 0:
        return "0 B"
    index = 0
    while index + 1 < len(units) and size >= 1024 ** (index + 1):
        index += 1
    return f"{size} B" if index == 0 else f"{size / 1024**index:.2f} {units[index]}"


MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
    ".svg": "image/svg+xml",
    ".mp3": "audio/mpeg",
    ".wav": "audio/wav",
    ".ogg": "audio/ogg",
    ".flac": "audio/flac",
}


def _unified(path: str, old: bytes, new: bytes) -> str:
    diff = diff_bytes(old, new)
    if diff.binary:
        return diff.binary_line
    return "\n".join([*file_headers(path, old_exists=True, new_exists=True), *diff.lines])


class CommandJob:
    """One running ``run_command``: its process group, stopped when the client cancels the call."""

    KILL_AFTER_S = 2.0  # a command that ignores SIGTERM this long is killed

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._stopped = False
        self._done = False

    def started(self, pid: int) -> None:
        with self._lock:
            self._pid = pid
            stopped = self._stopped
        if stopped:  # the cancel came before the command started
            self._signal(signal.SIGTERM)

    def stop(self) -> None:
        """Stop the command and what it started (its process group); what it changed is still recorded."""
        with self._lock:
            self._stopped = True
        self._signal(signal.SIGTERM)
        timer = threading.Timer(self.KILL_AFTER_S, self._signal, (signal.SIGKILL,))
        timer.daemon = True
        timer.start()

    def ended(self) -> None:
        with self._lock:
            self._done = True

    def _signal(self, number: int) -> None:
        with self._lock:  # once the engine has reaped the command, its group id may name someone else's
            if self._pid is None or self._done:
                return
            try:
                os.killpg(self._pid, number)
            except (ProcessLookupError, PermissionError):
                pass


def _why(exc: OSError | TurnbackError) -> str:
    """Why a folder could not be read, in the session's language (an OS error says it in its own words)."""
    return word(exc.message) if isinstance(exc, TurnbackError) else str(exc)


class Tools:
    """The tool implementations: each parses, calls the engine, and words the result for the model.

    Each call has an engine of its own over the store *kept* open (as the hook relay's events do), so a store
    whose database was deleted, or made again in its place, is noticed at the next call: a call is refused as
    opening the store is, never recorded into a database no one will read again (see :meth:`_in_session`).
    """

    def __init__(self, kept: KeptStore, session: Session, root: str, gap_s: float):
        self.kept = kept
        self.session = session
        self.root = root
        self.gap_s = gap_s
        self._session_lock = threading.Lock()  # a command's worker thread checks the session too
        with kept.lent() as engine:
            self.home, self.store_url = engine.home, engine.store_url
            self._session_store: object = engine.store if kept.keeps(engine) else None  # the store it is known in
            self._hidden = engine.unlisted(session.id)  # never listed, walked or searched: .git, the store

    def _call(self, work: Callable[[Engine], T], lend: Callable[[], ContextManager[Engine]] | None = None) -> T:
        """Run *work* inside a tool turn (see :meth:`_answer`)."""

        def in_turn(engine: Engine) -> T:
            with engine.tool_turn(self.session.id, gap_s=self.gap_s):
                return work(engine)

        return self._answer(in_turn, lend)

    def _answer(self, work: Callable[[Engine], T], lend: Callable[[], ContextManager[Engine]] | None = None) -> T:
        """*work*'s answer, given an engine that *lend* opens (else one over the kept store); turnback's
        refusals, opening the store's among them, become tool errors the model reads."""
        try:
            with (lend or self.kept.lent)() as engine:
                return work(self._in_session(engine))
        except TurnbackError as exc:
            raise ToolError(word(exc.message)) from exc
        except OSError as exc:
            raise ToolError(f"{exc.filename or ''}: {exc.strerror or exc}".strip(": ")) from exc

    def _in_session(self, engine: Engine) -> Engine:
        """*engine*, its store holding this server's session: in a store made afresh in the folder (moved away,
        as the refusal to open a store whose database is gone advises), the calls go on in a new session of the
        same folder, and the user finds them there."""
        with self._session_lock:
            if engine.store is self._session_store:
                return engine
            try:
                engine.store.session(self.session.id)
            except UsageError as exc:
                if exc.code != "no_such_session":
                    raise
                self.session = engine.new_session(self.root, title=self.session.title)
            if self.kept.keeps(engine):
                self._session_store = engine.store
        return engine

    def _read(self, path: str) -> bytes:
        def read(engine: Engine) -> bytes:
            try:
                return engine.read(self.session.id, path, cwd=self.root)
            except FileNotFoundError as exc:
                raise ToolError(say("path_missing", path=path)) from exc

        return self._answer(read)

    def read_text_file(self, path: str, head: int | None = None, tail: int | None = None) -> str:
        if head is not None and tail is not None:
            raise ToolError(say("mcp_head_or_tail"))
        text = self._read(path).decode("utf-8", "replace")
        lines = text.splitlines(keepends=True)
        if head is not None:
            return "".join(lines[:head])
        if tail is not None:
            return "".join(lines[-tail:]) if tail else ""
        return text

    def read_multiple_files(self, paths: list[str]) -> str:
        """Each file as ``PATH:\\nTEXT\\n``, or ``PATH: Error - WHY``, joined by ``---`` lines (the reference's)."""
        parts = []
        for path in paths:
            try:
                parts.append(f"{path}:\n{self._read(path).decode('utf-8', 'replace')}\n")
            except ToolError as exc:
                parts.append(say("mcp_file_unreadable", path=path, why=str(exc)))
        return "\n---\n".join(parts)

    def read_media_file(self, path: str) -> ImageContent | AudioContent | EmbeddedResource:
        data = self._read(path)
        mime = MEDIA_TYPES.get(os.path.splitext(path)[1].lower(), "application/octet-stream")
        encoded = base64.b64encode(data).decode("ascii")
        if mime.startswith("image/"):
            return ImageContent(type="image", data=encoded, mime_type=mime)
        if mime.startswith("audio/"):
            return AudioContent(type="audio", data=encoded, mime_type=mime)
        uri = "file://" + os.path.join(self.root, str(self._where(path)[1] or ""))
        return EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(uri=uri, mime_type=mime, blob=encoded),
        )

    def write_file(self, path: str, content: str) -> str:
        call = self._call(
            lambda engine: engine.write(
                self.session.id,
                path,
                content.encode("utf-8"),
                cwd=self.root,
                tool="write_file",
                raw_input={"path": path, "content": content},
            )
        )
        return say("mcp_wrote", path=path, call=turnback.short_id(call.id))

    def edit_file(self, path: str, edits: list[EditOperation], dryRun: bool = False) -> str:
        def work(engine: Engine) -> TextEdited:
            return engine.edit_text(
                self.session.id,
                path,
                [TextEdit(edit["oldText"], edit["newText"]) for edit in edits],
                cwd=self.root,
                dry_run=dryRun,
                tool="edit_file",
                raw_input={"path": path, "edits": edits},
            )

        edited: TextEdited = self._answer(work) if dryRun else self._call(work)
        return _unified(edited.path, edited.before, edited.after)

    def create_directory(self, path: str) -> str:
        self._call(lambda engine: engine.mkdir(self.session.id, path, cwd=self.root))
        return say("mcp_created_directory", path=path)

    def _where(self, path: str, *, follow: bool = True) -> tuple[Any, Any]:
        found: tuple[Any, Any] = self._answer(
            lambda engine: engine.browse(self.session.id, path, cwd=self.root, follow_last=follow)
        )
        return found

    def list_directory(self, path: str) -> str:
        tree, rel = self._where(path)
        try:
            entries = tree.list_folder(rel)
        except (OSError, TurnbackError) as exc:
            raise ToolError(say("mcp_cannot_list", path=path, why=_why(exc))) from exc
        return "\n".join(
            f"{'[DIR]' if entry.is_dir else '[FILE]'} {name}"
            for name, entry in entries
            if not self._hidden(f"{rel}/{name}" if rel else name)
        )

    def list_directory_with_sizes(self, path: str, sortBy: str = "name") -> str:
        tree, rel = self._where(path)
        try:
            entries = [
                (name, entry)
                for name, entry in tree.list_folder(rel)
                if not self._hidden(f"{rel}/{name}" if rel else name)
            ]
        except (OSError, TurnbackError) as exc:
            raise ToolError(say("mcp_cannot_list", path=path, why=_why(exc))) from exc
        if sortBy == "size":
            entries.sort(key=lambda item: -item[1].size)
        else:
            entries.sort(key=lambda item: (item[0].casefold(), item[0]))
        lines = [  # a folder's line has no size column (the reference pads only the size)
            f"[DIR] {name:<30} " if entry.is_dir else f"[FILE] {name:<30} {format_size(entry.size):>10}"
            for name, entry in entries
        ]
        files = [entry for _, entry in entries if not entry.is_dir]
        lines += [
            "",
            say("mcp_total", files=len(files), folders=len(entries) - len(files)),
            say("mcp_combined_size", size=format_size(sum(entry.size for entry in files))),
        ]
        return "\n".join(lines)

    def _tree(self, tree: Any, rel: Any, exclude: list[str], top: Any) -> list[dict[str, Any]]:
        nodes = []
        for name, entry in tree.list_folder(rel):
            child = f"{rel}/{name}" if rel else name
            below = child[len(top) + 1 :] if top else child  # relative to the folder asked for
            if self._hidden(child) or any(tree_excludes(below, p) for p in exclude):
                continue
            if entry.is_dir:
                nodes.append({"name": name, "type": "directory", "children": self._tree(tree, child, exclude, top)})
            else:
                nodes.append({"name": name, "type": "file"})
        return nodes

    def directory_tree(self, path: str, excludePatterns: list[str] | None = None) -> str:
        tree, rel = self._where(path)
        try:
            return json.dumps(self._tree(tree, rel, excludePatterns or [], rel), indent=2)
        except (OSError, TurnbackError) as exc:
            raise ToolError(say("mcp_cannot_walk", path=path, why=_why(exc))) from exc

    def move_file(self, source: str, destination: str) -> str:
        """Move a file, link or folder; refused when the destination exists (the reference's contract)."""
        self._call(lambda engine: engine.move(self.session.id, source, destination, cwd=self.root, replace=False))
        return say("mcp_moved", source=source, destination=destination)

    def search_files(self, path: str, pattern: str, excludePatterns: list[str] | None = None) -> str:
        tree, rel = self._where(path)
        exclude = excludePatterns or []
        found: list[str] = []

        def walk(folder: Any) -> None:
            for name, entry in tree.list_folder(folder):
                child = f"{folder}/{name}" if folder else name
                below = child[len(rel) + 1 :] if rel else child  # the reference matches paths below the folder
                if self._hidden(child) or any(glob_matches(below, p) for p in exclude):
                    continue
                if glob_matches(below, pattern):
                    found.append(os.path.join(self.root, child))
                if entry.is_dir:
                    walk(child)

        try:
            walk(rel)
        except (OSError, TurnbackError) as exc:
            raise ToolError(say("mcp_cannot_search", path=path, why=_why(exc))) from exc
        return "\n".join(found) if found else say("mcp_no_matches")

    def get_file_info(self, path: str) -> str:
        tree, rel = self._where(path)
        if rel is None:
            st = os.stat(self.root)
        else:
            entry = tree.lstat(rel)
            if entry is None:
                raise ToolError(say("path_missing", path=path))
            st = os.lstat(os.path.join(self.root, rel))  # a link here leads outside the root: not followed
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
        if stat.S_ISLNK(st.st_mode):
            lines.append("isSymbolicLink: true")
        return "\n".join(lines)

    def list_allowed_directories(self) -> str:
        return say("mcp_allowed_directories", root=self.root)

    def delete_file(self, path: str) -> str:
        self._call(lambda engine: engine.delete(self.session.id, path, cwd=self.root))
        return say("mcp_deleted", path=path)

    def run_command(self, command: str, timeout: float | None = None, cwd: str | None = None) -> str:
        return self.run_command_at(command, self.command_workdir(cwd), timeout, CommandJob())

    def command_workdir(self, cwd: str | None) -> str:
        workdir = self.root
        if cwd:
            _, rel = self._where(cwd)
            workdir = os.path.join(self.root, rel) if rel else self.root
        return workdir

    def run_command_at(self, command: str, workdir: str, timeout: float | None, job: CommandJob) -> str:
        """Run *command* with an engine of its own, so this may run in a worker thread (an SQLite connection
        serves the thread that opened it) while the kept store answers other calls; *job* can stop it."""
        with tempfile.TemporaryFile() as output:

            def work(engine: Engine) -> tuple[CommandResult, str | None]:
                result = engine.run_command(
                    self.session.id,
                    ["sh", "-c", command],
                    cwd=workdir,
                    timeout=timeout,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    process_group=True,
                    started=job.started,
                )
                return result, result.line or command_line(result.call.changes, engine.load)

            try:
                result, changed = self._call(work, self._engine_of_this_thread)
            finally:
                job.ended()
            output.seek(0)
            text = output.read().decode("utf-8", "replace")
        lines = [text.rstrip("\n")] if text else []
        if result.timed_out:
            lines.append(say("mcp_command_still_running", seconds=f"{timeout:g}"))
        else:
            lines.append(say("mcp_exit_status", status=result.exit_code))
        if changed:
            lines.append(changed)
        return "\n".join(lines)

    def _engine_of_this_thread(self) -> Engine:
        return turnback.open(self.home, confined=True, store_url=self.store_url)


def _hints(*, read_only: bool, destructive: bool = False, idempotent: bool = False, open_world: bool = False) -> Any:
    """A tool's annotations, as the reference server gives them: read-only tools say only that (clients
    auto-approve them); the others say whether they destroy and whether repeating them changes more."""
    if read_only:
        return ToolAnnotations(read_only_hint=True, open_world_hint=open_world)
    return ToolAnnotations(
        read_only_hint=False, idempotent_hint=idempotent, destructive_hint=destructive, open_world_hint=open_world
    )


READS = _hints(read_only=True)


def build_server(tools: Tools) -> tuple[MCPServer, DirectCalls]:
    """The server of *tools*, and its calls answered without the SDK (to hand to :func:`run_stdio` with it)."""
    server: MCPServer = MCPServer(
        "turnback",
        version=turnback.__version__,
        instructions=(
            "File tools with checkpoints: every change can be taken back by the user with turnback. "
            f"Only paths inside {tools.root} are allowed."
        ),
    )
    functions: dict[str, ToolFunction] = {}

    def tool(**options: Any) -> Callable[[ToolFunction], ToolFunction]:
        """``server.tool``, each function also noted for the direct path (:mod:`turnback.mcp.direct`)."""

        def register(function: ToolFunction) -> ToolFunction:
            functions[function.__name__] = function
            return server.tool(**options)(function)

        return register

    @tool(
        title="Read File (Deprecated)",
        description="Read a text file. Deprecated: use read_text_file.",
        annotations=READS,
    )
    async def read_file(path: Path, head: int | None = None, tail: int | None = None) -> str:
        return tools.read_text_file(path, head, tail)

    @tool(
        title="Read Text File",
        description="Read a text file (head/tail: only the first or last N lines).",
        annotations=READS,
    )
    async def read_text_file(path: Path, head: int | None = None, tail: int | None = None) -> str:
        return tools.read_text_file(path, head, tail)

    @tool(
        title="Read Media File",
        description="Read a file as base64 with its MIME type: images and audio as such, anything else as a resource.",
        annotations=READS,
        structured_output=False,
    )
    async def read_media_file(path: Path) -> ImageContent | AudioContent | EmbeddedResource:
        return tools.read_media_file(path)

    @tool(
        title="Read Multiple Files",
        description="Read several text files at once; a file that cannot be read says why and stops no other.",
        annotations=READS,
    )
    async def read_multiple_files(paths: Annotated[list[str], Field(min_length=1)]) -> str:
        return tools.read_multiple_files(paths)

    @tool(
        title="Write File",
        description="Create or overwrite a file; the earlier content is kept so the user can take it back.",
        annotations=_hints(read_only=False, destructive=True, idempotent=True),
    )
    async def write_file(path: Path, content: str) -> str:
        return tools.write_file(path, content)

    @tool(
        title="Edit File",
        description="Replace exact text in a file (each oldText must occur once); dryRun previews the diff.",
        annotations=_hints(read_only=False, destructive=True),
    )
    async def edit_file(path: Path, edits: list[EditOperation], dryRun: bool = False) -> str:
        return tools.edit_file(path, edits, dryRun)

    @tool(
        title="Create Directory",
        description="Create a folder, and the folders above it that are missing.",
        annotations=_hints(read_only=False, idempotent=True),
    )
    async def create_directory(path: Path) -> str:
        return tools.create_directory(path)

    @tool(title="List Directory", description="List a folder: [FILE] and [DIR] entries.", annotations=READS)
    async def list_directory(path: Path) -> str:
        return tools.list_directory(path)

    @tool(
        title="List Directory with Sizes",
        description="List a folder with each file's size, sorted by name or size, and the totals.",
        annotations=READS,
    )
    async def list_directory_with_sizes(path: Path, sortBy: Literal["name", "size"] = "name") -> str:
        return tools.list_directory_with_sizes(path, sortBy)

    @tool(
        title="Directory Tree",
        description="The tree below a folder as JSON (name, type, children).",
        annotations=READS,
    )
    async def directory_tree(path: Path, excludePatterns: list[str] | None = None) -> str:
        return tools.directory_tree(path, excludePatterns)

    @tool(
        title="Move File",
        description="Move or rename a file or folder; refused if the destination exists.",
        annotations=_hints(read_only=False, destructive=True),
    )
    async def move_file(source: Path, destination: Path) -> str:
        return tools.move_file(source, destination)

    @tool(
        title="Search Files",
        description="Find files and folders below a folder whose path relative to it matches a glob "
        "('*.ext' in the folder itself, '**/*.ext' at any depth); excludePatterns are globs too.",
        annotations=READS,
    )
    async def search_files(path: Path, pattern: str, excludePatterns: list[str] | None = None) -> str:
        return tools.search_files(path, pattern, excludePatterns)

    @tool(
        title="Get File Info",
        description="Size, times, kind and permissions of a file or folder.",
        annotations=READS,
    )
    async def get_file_info(path: Path) -> str:
        return tools.get_file_info(path)

    @tool(title="List Allowed Directories", description="The folder these tools may use.", annotations=READS)
    async def list_allowed_directories() -> str:
        return tools.list_allowed_directories()

    @tool(
        title="Delete File",
        description="Delete a file, link or empty folder; the user can take it back.",
        annotations=_hints(read_only=False, destructive=True, idempotent=True),
    )
    async def delete_file(path: Path) -> str:
        return tools.delete_file(path)

    @tool(
        title="Run Command",
        description="Run a shell command in the folder; what it changes is recorded so the user can take it back. "
        "Returns its output, exit status and a line naming the files it changed.",
        annotations=_hints(read_only=False, destructive=True, open_world=True),
    )
    async def run_command(command: str, timeout: float | None = None, cwd: str | None = None) -> str:
        return await run_command_served(tools, command, timeout, cwd)

    return server, DirectCalls(server, functions, waits=WAITS)


async def run_command_served(tools: Tools, command: str, timeout: float | None, cwd: str | None) -> str:
    """Run the command in a worker thread, so the server answers other calls meanwhile; when the client
    cancels the call, its process group is stopped (the thread then records what it changed)."""
    workdir = tools.command_workdir(cwd)
    job = CommandJob()
    try:
        return await anyio.to_thread.run_sync(
            tools.run_command_at, command, workdir, timeout, job, abandon_on_cancel=True
        )
    except anyio.get_cancelled_exc_class():
        job.stop()
        raise


def serve(
    root: str,
    *,
    home: str | None = None,
    store_url: str | None = None,
    title: str | None = None,
    lang: str | None = None,
) -> None:
    """Serve the tools for the folder *root* over stdio until the client disconnects; the store is *home*'s, or
    in the database *store_url* (``turnback --store postgresql://… mcp``).

    Results and errors are worded in one language for the whole session: *lang* (``--lang``), else what
    :func:`turnback.pick_language` finds (``TURNBACK_LANG``, ``lang`` in config.toml, the locale).
    """
    real_root = os.path.realpath(root)
    if not os.path.isdir(real_root):
        raise turnback.UsageError(Message("mcp_root_not_folder", path=root))
    kept = KeptStore(lambda: turnback.open(home, confined=True, store_url=store_url), confined=True)
    turnback.Engine.auto_start_watchers()  # its commands on a big project start the watcher they share
    try:
        with kept.lent() as engine:
            language.set(turnback.pick_language(lang, engine.home))
            session = engine.new_session(real_root, title=title or "MCP client")
            gap = float(engine.config_value("mcp.turn_gap_s", project_root=real_root))  # type: ignore[arg-type]
        anyio.run(run_stdio, *build_server(Tools(kept, session, real_root, gap)))
    finally:
        kept.close()


__all__ = ["TOOLS", "Tools", "build_server", "serve"]

"""The MCP server's stdio wire: the client's pipes read and written by the event loop itself, and every message
answered, one the SDK could not read too.

Kept apart from the tools (``mcp/server.py``): this is how messages travel, not what they ask.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import json
import os
import stat
from collections.abc import Iterator
from typing import Any, cast

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

from turnback.catalog import say
from turnback.mcp.direct import DirectCalls


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
        return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=PARSE_ERROR, message=say("mcp_not_json")))
    if not isinstance(message, dict) or "id" not in message:
        return None
    request_id = message["id"]
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None
    if any(error.get("type") == "json_invalid" for error in errors):  # JSON to Python, not to the SDK: surrogates
        reason = say("mcp_request_not_unicode")
    else:
        reason = say("mcp_request_unreadable")
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


class _PipeLines:
    """The client's pipe to the server, read by the event loop itself: what the SDK's stdio transport reads
    through ``anyio.wrap_file`` (a worker thread for every line), without the thread.

    Lines come as that transport's text file gives them: UTF-8 with bad bytes replaced, a ``\r\n`` or a
    ``\r`` ending a line as ``\n`` does, and what follows the last line end at the end of input.
    """

    def __init__(self, fd: int):
        self._fd = fd
        self._pending = bytearray()
        self._lines: collections.deque[str] = collections.deque()
        self._ended = False

    def __aiter__(self) -> _PipeLines:
        return self

    async def __anext__(self) -> str:
        while not self._lines:
            if self._ended:
                raise StopAsyncIteration
            await self._read()
        return self._lines.popleft()

    async def _read(self) -> None:
        await anyio.wait_readable(self._fd)
        try:
            chunk = os.read(self._fd, 1 << 16)
        except BlockingIOError:
            return
        searched = len(self._pending)
        self._pending += chunk
        end = self._pending.rfind(b"\n", searched) + 1 if chunk else len(self._pending)
        self._ended = not chunk
        if not end:
            return
        text = self._pending[:end].decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
        del self._pending[:end]
        lines = text.split("\n")
        self._lines.extend(line + "\n" for line in lines[:-1])
        if lines[-1]:
            self._lines.append(lines[-1])


class _PipeWriter:
    """The server's pipe to the client, written by the event loop itself (the SDK's transport writes and
    flushes each message in a worker thread): a write waits only while the client has not read the pipe.
    Two writers (the SDK's and :class:`_Shortcut`) take turns, so a message written in parts is never torn."""

    def __init__(self, fd: int):
        self._fd = fd
        self._turn = anyio.Lock()

    async def write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        async with self._turn:
            while data:
                try:
                    data = data[os.write(self._fd, data) :]
                except BlockingIOError:
                    await anyio.wait_writable(self._fd)

    async def flush(self) -> None:
        """Nothing is buffered."""


class _Shortcut:
    """The client's lines as the SDK reads them, less those :class:`~turnback.mcp.direct.DirectCalls` answers
    on the wire: their replies are written here, and the SDK never sees them."""

    def __init__(self, lines: _PipeLines, writer: _PipeWriter, direct: DirectCalls):
        self._lines = lines
        self._writer = writer
        self._direct = direct

    def __aiter__(self) -> _Shortcut:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._lines.__anext__()
            reply = await self._direct.answer_line(line)
            if reply is None:
                return line
            await self._writer.write(reply)


@contextlib.contextmanager
def _pipe_wire() -> Iterator[tuple[_PipeLines, _PipeWriter] | None]:
    """The client's pipes, read and written without worker threads; ``None`` unless both ends are pipes or
    sockets (a terminal or a file is served by the SDK's transport: its flags are shared with others).

    As the SDK's transport does, the wire moves to private descriptors, and fd 0 reads the null device and
    fd 1 writes to stderr meanwhile, so nothing the server or a child process prints reaches the wire.
    """
    if not all(stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) for mode in (os.fstat(0).st_mode, os.fstat(1).st_mode)):
        yield None
        return
    wire = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in (0, 1)]
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
        for fd in wire:
            os.set_blocking(fd, False)
        yield _PipeLines(wire[0]), _PipeWriter(wire[1])
    finally:
        for std, fd in zip((0, 1), wire, strict=True):
            os.set_blocking(fd, True)  # the client may hand its pipe to another reader after this server
            os.dup2(fd, std)
            os.close(fd)
        os.close(null)


async def run_stdio(server: MCPServer, direct: DirectCalls) -> None:
    """``server.run("stdio")``, with every message answered (see :class:`_AnsweringReader`), over the
    SDK's transport fed by :func:`_pipe_wire`'s pipes where it can (each call then costs no thread hops, and
    *direct* answers the calls it may on the wire: :class:`_Shortcut`)."""
    lowlevel = server._lowlevel_server  # the SDK's own run_stdio_async does the same; no public handle exists
    with _pipe_wire() as wire:
        # The SDK types its explicit streams as anyio files; it only iterates the one and writes and flushes the other.
        if wire is None:
            streams = stdio_server()
        else:
            lines, writer = wire
            streams = stdio_server(*cast("tuple[Any, Any]", (_Shortcut(lines, writer, direct), writer)))
        async with streams as (read_stream, write_stream):
            reader = _AnsweringReader(read_stream, write_stream)
            await lowlevel.run(reader, write_stream, lowlevel.create_initialization_options())

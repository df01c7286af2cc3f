"""``tools/call`` answered without the SDK's tool manager, where the arguments' JSON types alone make them valid.

The SDK's high-level server validates each call's arguments with a pydantic model built for the tool, wraps
the call in a context object and converts the result through the tool's output model: about a tenth of a
millisecond of CPU per call on this machine, which a small ``write_file`` pays on top of its own work. Most
calls a model makes name plain strings (``path``, ``content``); for those the checks are what the JSON already
says, and this handler calls the very function the SDK registered and shapes the result as the SDK does.
Everything else — a missing or extra argument, a number given as a string, a list, a tool with no string
result — goes to the SDK's own handler, so what a client sees never depends on which path answered.

Such a call is answered in one of two places: by the SDK's ``tools/call`` handler, or, before the SDK reads
the line at all, on the stdio wire (:meth:`DirectCalls.answer_line`, fed by ``mcp/wire.py``), which spares
the SDK's parse, streams, task, context and envelope as well (docs/performance.md, MCP).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolRequestParams, CallToolResult, TextContent
from mcp_types.methods import serialize_server_result
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

ToolFunction = Callable[..., Awaitable[Any]]

# The SDK's own logger for tool failures, so a refusal is logged the same way whichever path answered it.
SDK_LOGGER = logging.getLogger("mcp.server.mcpserver.server")

# A JSON schema type, and the one Python type the JSON parser gives for it that the SDK's model passes on
# unchanged (an integer for a ``number`` becomes a float there, so it is not taken here).
PLAIN_TYPES: Mapping[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}
STRING_RESULT = {"result": {"title": "Result", "type": "string"}}


class PlainArguments:
    """What a tool's input schema allows, when each property is a plain type (or a choice of them, null too)."""

    def __init__(self, schema: Mapping[str, Any]):
        self.required = frozenset(schema.get("required", ()))
        self.types: dict[str, tuple[type, ...]] = {}
        for name, spec in schema.get("properties", {}).items():
            allowed = _plain_types(spec)
            if allowed:
                self.types[name] = allowed

    def accepts(self, arguments: Mapping[str, Any]) -> bool:
        """Whether the SDK's model would take *arguments* as they are: each one known and of its exact type."""
        if not self.required.issubset(arguments):
            return False
        for name, value in arguments.items():
            allowed = self.types.get(name)
            if allowed is None or type(value) not in allowed:
                return False
        return True


def _plain_types(spec: Mapping[str, Any]) -> tuple[type, ...]:
    """The Python types a property's schema allows, or none when it is more than a plain type (an enum, a
    length, a pattern, a list or an object)."""
    choices = spec.get("anyOf", [spec])
    allowed = []
    for choice in choices:
        if set(choice) - {"type", "title", "description", "default"} or choice.get("type") not in PLAIN_TYPES:
            return ()
        allowed.append(PLAIN_TYPES[choice["type"]])
    return tuple(allowed)


class DirectTool:
    def __init__(self, function: ToolFunction, arguments: PlainArguments):
        self.function = function
        self.arguments = arguments


async def direct_tools(server: MCPServer, functions: Mapping[str, ToolFunction]) -> dict[str, DirectTool]:
    """The tools of *server* this path may answer: those of *functions* (name → the function registered for
    it) whose result is one string and whose arguments are plain."""
    found = {}
    for tool in await server.list_tools():
        function = functions.get(tool.name)
        if function is None or (tool.output_schema or {}).get("properties") != STRING_RESULT:
            continue
        found[tool.name] = DirectTool(function, PlainArguments(tool.input_schema))
    return found


class DirectCalls:
    """The server's ``tools/call`` answered without the SDK where it may (see :func:`direct_tools`; worked out
    at the first call), in two places: as the SDK's ``tools/call`` handler (:meth:`call_tool`), and on the
    wire itself, before the SDK reads the line (:meth:`answer_line`)."""

    def __init__(self, server: MCPServer, functions: Mapping[str, ToolFunction], waits: frozenset[str]):
        self._server = server
        self._functions = functions
        self._waits = waits
        self._tools: dict[str, DirectTool] | None = None
        self._version: str | None = None  # the protocol version the handshake settled on
        self._ready = False
        lowlevel = server._lowlevel_server  # no public handle; mcp/wire.py's run_stdio uses it the same way
        routed = lowlevel.get_request_handler("tools/call")
        if routed is None:
            raise RuntimeError("the SDK's server has no tools/call handler")
        self._sdk_handler = routed.handler
        lowlevel.add_request_handler("tools/call", CallToolRequestParams, self.call_tool)

    async def _direct(self, name: str, arguments: Mapping[str, Any]) -> DirectTool | None:
        if self._tools is None:
            self._tools = await direct_tools(self._server, self._functions)
        tool = self._tools.get(name)
        return tool if tool is not None and tool.arguments.accepts(arguments) else None

    async def call_tool(self, ctx: Any, params: CallToolRequestParams) -> Any:
        arguments = params.arguments or {}
        tool = await self._direct(params.name, arguments)
        if tool is None:
            return await self._sdk_handler(ctx, params)
        return await call_tool_directly(params.name, tool.function, arguments)

    async def answer_line(self, line: str) -> str | None:
        """The reply to the client's *line* when it is a ``tools/call`` this path answers on the wire, else
        ``None``: the SDK reads the line as it came.

        Answered here: after the client's ``notifications/initialized`` (before it, the SDK refuses what it
        must), a request of the legacy era's plain form (``name`` and ``arguments``, no ``_meta``: nothing
        asks for progress or carries a per-request envelope), of a tool that answers without waiting
        (not one of *waits*: those run in a thread while the SDK serves other calls, and a cancel stops
        them). The reply is the one the SDK writes for the same result: the SDK's own parse, dispatch,
        task, context and envelope are about a millisecond of CPU a call, as much as a small write's own work.
        """
        if not self._ready:
            self._handshake(line)
            return None
        if '"tools/call"' not in line:
            return None
        message = _json_object(line)
        if message is None or message.get("method") != "tools/call" or message.get("jsonrpc") != "2.0":
            return None
        if "\\u" in line and not _unicode(message):  # a lone surrogate ("\ud800"): the SDK words that refusal
            return None
        request_id, params = message.get("id"), message.get("params")
        if type(request_id) not in (int, str) or not isinstance(params, dict) or set(params) - {"name", "arguments"}:
            return None
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or name in self._waits or not isinstance(arguments, dict):
            return None
        tool = await self._direct(name, arguments)
        if tool is None:
            return None
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        try:
            result = await call_tool_directly(name, tool.function, arguments)
        except MCPError as exc:
            reply["error"] = exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)
        else:  # shaped by the SDK's surface of the protocol version, as its runner shapes every result
            dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
            reply["result"] = serialize_server_result("tools/call", str(self._version), dumped)
        return json.dumps(reply, ensure_ascii=False, separators=(",", ":")) + "\n"

    def _handshake(self, line: str) -> None:
        """Follow the legacy handshake the SDK answers: the version it settles on (its runner's rule: the
        client's, when it is one the handshake reaches, else the newest such), then the client's word that it
        is done. A client of the modern era never sends it, and this path then never answers."""
        if '"initialize"' in line:
            message = _json_object(line)
            params = message.get("params") if message is not None and message.get("method") == "initialize" else None
            if isinstance(params, dict):
                asked = params.get("protocolVersion")
                self._version = asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        elif '"notifications/initialized"' in line and self._version is not None:
            message = _json_object(line)
            self._ready = message is not None and message.get("method") == "notifications/initialized"


def _unicode(message: dict[str, Any]) -> bool:
    """Whether every string of *message* is Unicode text (Python's JSON reader also takes lone surrogates)."""
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _json_object(line: str) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


async def call_tool_directly(name: str, function: ToolFunction, arguments: Mapping[str, Any]) -> CallToolResult:
    """The result the SDK gives for *function* called with *arguments*: its string as text and as the
    structured result; a :class:`ToolError` (or anything else) as an error result worded as the SDK words it."""
    try:
        text = await function(**arguments)
    except MCPError:
        raise
    except ToolError as exc:
        SDK_LOGGER.info("Tool %r failed: %r", name, f"Error executing tool {name}: {exc}")
        return _failed(f"Error executing tool {name}: {exc}")
    except Exception:
        SDK_LOGGER.exception("Tool %r raised an unexpected exception", name)
        return _failed(f"Error executing tool {name}")
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content={"result": text}, is_error=False
    )


def _failed(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

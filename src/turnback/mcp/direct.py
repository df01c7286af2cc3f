"""``tools/call`` answered without the SDK's tool manager, where the arguments' JSON types alone make them valid.

The SDK's high-level server validates each call's arguments with a pydantic model built for the tool, wraps
the call in a context object and converts the result through the tool's output model: about a tenth of a
millisecond of CPU per call on this machine, which a small ``write_file`` pays on top of its own work. Most
calls a model makes name plain strings (``path``, ``content``); for those the checks are what the JSON already
says, and this handler calls the very function the SDK registered and shapes the result as the SDK does.
Everything else — a missing or extra argument, a number given as a string, a list, a tool with no string
result — goes to the SDK's own handler, so what a client sees never depends on which path answered.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolRequestParams, CallToolResult, TextContent

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


def answer_directly(server: MCPServer, functions: Mapping[str, ToolFunction]) -> None:
    """Route the server's ``tools/call`` through :func:`call_tool_directly` where it may (see
    :func:`direct_tools`; worked out at the first call), else to the SDK's handler."""
    lowlevel = server._lowlevel_server  # no public handle; mcp/wire.py's run_stdio uses it the same way
    routed = lowlevel.get_request_handler("tools/call")
    if routed is None:
        raise RuntimeError("the SDK's server has no tools/call handler")
    handler = routed.handler
    tools: dict[str, DirectTool] = {}
    listed = False

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> Any:
        nonlocal listed
        if not listed:
            tools.update(await direct_tools(server, functions))
            listed = True
        tool = tools.get(params.name)
        arguments = params.arguments or {}
        if tool is None or not tool.arguments.accepts(arguments):
            return await handler(ctx, params)
        return await call_tool_directly(params.name, tool.function, arguments)

    lowlevel.add_request_handler("tools/call", CallToolRequestParams, call_tool)


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

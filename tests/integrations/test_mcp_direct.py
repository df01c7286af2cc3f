"""The direct ``tools/call`` path (``turnback.mcp.direct``) answers exactly as the SDK's tool manager does,
both where the SDK dispatches the call to it and where it answers on the wire before the SDK reads the line.

Each pair of calls below asks the same thing twice: once with arguments of their exact JSON types (answered
directly), once in a form only the SDK's model takes (``"3"`` for 3, an extra key it ignores), which the
direct path hands to the SDK. The two answers must be the same, success and refusal alike, on the wire.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import cli_env
from tests.integrations.test_mcp import serve

mcp = pytest.importorskip("mcp")

from mcp import ClientSession  # noqa: E402

from turnback.mcp.direct import PlainArguments  # noqa: E402

# (direct form, the SDK's form) of each call
PAIRS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("read_text_file", {"path": "a.txt", "head": 2}, {"path": "a.txt", "head": "2"}),
    ("read_text_file", {"path": "missing.txt"}, {"path": "missing.txt", "unknown": 1}),
    (
        "write_file",
        {"path": "../outside.txt", "content": "x"},
        {"path": "../outside.txt", "content": "x", "unknown": 1},
    ),
    ("list_allowed_directories", {}, {"unknown": True}),
    ("get_file_info", {"path": "nowhere"}, {"path": "nowhere", "unknown": None}),
]


def wire(result: Any) -> str:
    return json.dumps(result.model_dump(by_alias=True, mode="json", exclude_none=True), sort_keys=True)


def test_a_direct_answer_is_the_sdks_answer_for_success_and_refusal(tmp_path: Path, home: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "a.txt").write_text("one\ntwo\nthree\n")

    async def body(session: ClientSession) -> list[tuple[str, str]]:
        answers = []
        for tool, direct, routed in PAIRS:
            answers.append((wire(await session.call_tool(tool, direct)), wire(await session.call_tool(tool, routed))))
        return answers

    answers = serve(home, project, tmp_path / "err.log", body)
    for (tool, direct, _), (direct_answer, routed_answer) in zip(PAIRS, answers, strict=True):
        assert direct_answer == routed_answer, (tool, direct)
    assert json.loads(answers[0][0])["content"][0]["text"] == "one\ntwo\n"
    assert json.loads(answers[2][0])["isError"] is True
    assert not (tmp_path / "outside.txt").exists()


def test_a_write_answered_directly_is_recorded_and_its_text_names_the_call(tmp_path: Path, home: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()

    async def body(session: ClientSession) -> dict[str, Any]:
        result = await session.call_tool("write_file", {"path": "new.txt", "content": "hello\n"})
        answer: dict[str, Any] = json.loads(wire(result))
        return answer

    answer = serve(home, project, tmp_path / "err.log", body)
    text = answer["content"][0]["text"]
    assert text.startswith("Successfully wrote to new.txt (call ")
    shown = {key: answer[key] for key in ("content", "isError", "structuredContent")}
    assert shown == {
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "structuredContent": {"result": text},
    }
    assert (project / "new.txt").read_bytes() == b"hello\n"


class RawClient:
    """``turnback mcp`` over its real pipes, spoken to line by line (what the server writes, exactly)."""

    def __init__(self, home: Path, project: Path, errors: Path):
        self.server = subprocess.Popen(
            [sys.executable, "-m", "turnback", "mcp", "--root", str(project)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors.open("wb"),
            env=cli_env(home),
            cwd=project,
        )

    def send(self, message: dict[str, Any]) -> None:
        assert self.server.stdin is not None
        self.server.stdin.write(json.dumps(message).encode() + b"\n")
        self.server.stdin.flush()

    def reply(self, timeout: float = 20.0) -> dict[str, Any]:
        assert self.server.stdout is not None
        ready, _, _ = select.select([self.server.stdout], [], [], timeout)
        assert ready, f"no reply within {timeout} s"
        answer = json.loads(self.server.stdout.readline())
        assert isinstance(answer, dict)
        return answer

    def call(self, request_id: int, params: dict[str, Any]) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
        answer = self.reply()
        assert answer.pop("id") == request_id, answer
        return answer

    def close(self) -> None:
        assert self.server.stdin is not None
        self.server.stdin.close()
        assert self.server.wait(20) == 0


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", "1999-01-01"])
def test_a_call_answered_on_the_wire_is_the_reply_the_sdk_writes(tmp_path: Path, home: Path, version: str) -> None:
    """The same calls in the plain form (answered on the wire) and with a ``_meta`` (read by the SDK, which
    hands them to the direct handler): the replies are the same JSON, key for key, for each protocol version
    the handshake can settle on (an unknown one settles on the newest)."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "a.txt").write_text("one\ntwo\n")
    client = RawClient(home, project, tmp_path / "err.log")
    try:
        before = client.call(1, {"name": "write_file", "arguments": {"path": "early.txt", "content": "x"}})
        assert "error" in before, before  # before the handshake: the SDK's refusal, nothing written
        assert not (project / "early.txt").exists()
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        client.send({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": params})
        assert client.reply()["id"] == 2
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        calls = [
            ("read_text_file", {"path": "a.txt"}),
            ("write_file", {"path": "../outside.txt", "content": "x"}),  # refused: an error result
            ("list_allowed_directories", {}),
            ("get_file_info", {"path": "nowhere"}),
        ]
        request_id = 10
        for name, arguments in calls:
            request_id += 2
            on_wire = client.call(request_id, {"name": name, "arguments": arguments})
            by_sdk = client.call(request_id + 1, {"name": name, "arguments": arguments, "_meta": {}})
            assert on_wire == by_sdk, name
            assert "resultType" not in on_wire["result"], on_wire  # no field of a later protocol version
        written = client.call(99, {"name": "write_file", "arguments": {"path": "new.txt", "content": "hello\n"}})
        assert written["result"]["isError"] is False, written
        assert (project / "new.txt").read_bytes() == b"hello\n"
    finally:
        client.close()
    assert not (tmp_path / "outside.txt").exists()


WRITE_FILE_SCHEMA = {
    "properties": {
        "path": {"description": "a path", "title": "Path", "type": "string"},
        "content": {"title": "Content", "type": "string"},
        "head": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None, "title": "Head"},
        "sortBy": {"default": "name", "enum": ["name", "size"], "title": "Sortby", "type": "string"},
    },
    "required": ["path", "content"],
}


@pytest.mark.parametrize(
    ("arguments", "direct"),
    [
        ({"path": "a", "content": "b"}, True),
        ({"path": "a", "content": "b", "head": 3}, True),
        ({"path": "a", "content": "b", "head": None}, True),
        ({"path": "a"}, False),  # a required argument missing: the SDK words the refusal
        ({"path": "a", "content": 5}, False),
        ({"path": "a", "content": "b", "head": "3"}, False),  # the SDK's model turns "3" into 3
        ({"path": "a", "content": "b", "head": True}, False),  # a bool is no integer here
        ({"path": "a", "content": "b", "sortBy": "name"}, False),  # an enum is checked by the SDK
        ({"path": "a", "content": "b", "other": 1}, False),
        ({"path": ["a"], "content": "b"}, False),
    ],
)
def test_only_arguments_of_their_exact_plain_types_are_taken_directly(arguments: dict[str, Any], direct: bool) -> None:
    assert PlainArguments(WRITE_FILE_SCHEMA).accepts(arguments) is direct


def test_the_wire_answers_plain_calls_of_tools_that_do_not_wait_and_only_after_the_handshake(
    home: Path, project: Path
) -> None:
    """What :meth:`DirectCalls.answer_line` takes from the SDK, line by line (``None``: the SDK reads it)."""
    import anyio

    import turnback
    from turnback.engine import KeptStore
    from turnback.mcp.server import Tools, build_server

    kept = KeptStore(lambda: turnback.open(str(home), confined=True), confined=True)
    root = str(project.resolve())

    def call(name: str, arguments: object, **extra: object) -> str:
        params = {"name": name, "arguments": arguments, **extra}
        return json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}) + "\n"

    write = call("write_file", {"path": "w.txt", "content": "w\n"})
    handshake = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
    not_on_the_wire = [
        call("write_file", {"path": "w.txt", "content": "w\n"}, _meta={"progressToken": 1}),
        call("run_command", {"command": "true"}),  # it waits: the SDK serves other calls meanwhile
        call("edit_file", {"path": "w.txt", "edits": [{"oldText": "w", "newText": "v"}]}),  # not plain
        call("write_file", {"path": "w.txt"}),  # an argument missing: the SDK words it
        call("write_file", {"path": "\ud800", "content": "w\n"}),  # no Unicode
        json.dumps({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}),
    ]

    async def lines() -> tuple[list[str | None], str | None, list[str | None]]:
        with kept.lent() as engine:
            session = engine.new_session(root, title="t")
        _, direct = build_server(Tools(kept, session, root, 30.0))
        early = [await direct.answer_line(line) for line in (write, *handshake)]
        return early, await direct.answer_line(write), [await direct.answer_line(line) for line in not_on_the_wire]

    try:
        early, answered, passed = anyio.run(lines)
    finally:
        kept.close()
    assert early == [None, None, None]
    assert answered is not None and answered.endswith("\n")
    assert json.loads(answered)["result"]["isError"] is False, answered
    assert passed == [None] * len(not_on_the_wire)
    assert (project / "w.txt").read_bytes() == b"w\n"

"""The direct ``tools/call`` path (``turnback.mcp.direct``) answers exactly as the SDK's tool manager does.

Each pair of calls below asks the same thing twice: once with arguments of their exact JSON types (answered
directly), once in a form only the SDK's model takes (``"3"`` for 3, an extra key it ignores), which the
direct path hands to the SDK. The two answers must be the same, success and refusal alike, on the wire.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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

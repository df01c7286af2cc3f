"""The hook and the MCP server word what they tell the agent in the user's language (TURNBACK_LANG, config,
locale); English by default. Japanese has entries for the refusals used here."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import cli_env, run_cli
from tests.integrations.test_claude_code import Claude
from tests.integrations.test_mcp import refused, serve

ASK_END = ". Allow it only if you need no way back."


def _ask_reason(claude: Claude, big: Path, use_id: str, env: dict[str, str] | None = None) -> str:
    tool_input = {"file_path": str(big), "content": "small\n"}
    asked = claude.raw(claude.payload("PreToolUse", tool_name="Write", tool_input=tool_input, tool_use_id=use_id), env)
    assert asked.err == "", asked
    output = json.loads(asked.out)["hookSpecificOutput"]
    assert output["permissionDecision"] == "ask", output
    reason = output["permissionDecisionReason"]
    assert isinstance(reason, str)
    return reason


def test_the_hook_s_ask_reason_is_in_japanese_with_turnback_lang_ja_and_english_by_default(
    home: Path, project: Path
) -> None:
    assert run_cli(home, "config", "set", "store.max_mib", "1", cwd=project).rc == 0
    big = project / "big.bin"
    big.write_bytes(os.urandom(3 << 19))  # 1.5 MiB: over the cap, so turnback cannot keep a copy
    claude = Claude(home, project)
    claude.prompt("shrink it")
    english = _ask_reason(claude, big, "toolu_en")
    assert english.startswith("turnback cannot keep a copy of big.bin (1.5 MiB, over store.max_mib (1 MiB)), ")
    assert english.endswith("so this change could not be undone" + ASK_END)
    # The first hook left a relay running in English: a hook asking for Japanese must not get its answer.
    japanese = _ask_reason(claude, big, "toolu_ja", {"TURNBACK_LANG": "ja"})
    assert "big.bin" in japanese and "のコピーを保持できないため、この変更は取り消せなくなります" in japanese
    assert "cannot keep a copy" not in japanese
    assert _ask_reason(claude, big, "toolu_en_again") == english


def test_an_mcp_tool_error_is_in_japanese_with_turnback_lang_ja_and_english_by_default(
    home: Path, project: Path, tmp_path: Path
) -> None:
    edits = [{"oldText": "absent text", "newText": "x"}]

    async def body(session) -> str:  # type: ignore[no-untyped-def]
        return await refused(session, "edit_file", path="README.md", edits=edits)

    assert serve(home, project, tmp_path / "en.err", body) == (
        "Error executing tool edit_file: edit 1: the old text is not in README.md; nothing was changed"
    )
    japanese = serve(home, project, tmp_path / "ja.err", body, env=cli_env(home, {"TURNBACK_LANG": "ja"}))
    assert (
        japanese
        == "Error executing tool edit_file: 編集 1：古いテキストが README.md にありません。何も変更されていません"
    )


DENIED = {
    "en": "the call failed: denied: no, not that",
    "zh-CN": "已拒绝：no, not that",
    "ja": "拒否されました: no, not that",
}
COMPACTION = {
    "en": "compaction (Claude Code is summarising the conversation)",
    "zh-CN": "压缩（Claude Code 正在总结对话）",
    "ja": "コンパクション（Claude Code が会話を要約しています）",
}


def test_what_the_hook_recorded_is_worded_in_the_language_it_is_shown_in(home: Path, project: Path) -> None:
    """A denied call's error and the compaction mark are kept as codes: each front end words them in its own
    language when it shows them, whatever language the hook ran in."""
    from tests.integrations.test_claude_code import replay

    claude = Claude(home, project, session_id="replay-denied-languages")
    replay(claude, "denied")
    log = json.loads(run_cli(home, "log", "--json", cwd=project).out)
    [denied] = [call for turn in log["turns"] for call in turn["calls"] if call["status"] == "failed"]
    claude.prompt("go on")
    claude.quiet("PreCompact", trigger="auto", custom_instructions="")
    for lang in DENIED:
        shown = run_cli(home, "show", denied["id"], "--lang", lang, cwd=project)
        assert shown.rc == 0, shown
        assert any(DENIED[lang] in line for line in shown.lines), (lang, shown.lines)
        busy = run_cli(home, "status", "--lang", lang, cwd=project)
        assert any(COMPACTION[lang] in line for line in busy.lines), (lang, busy.lines)

"""The CLI in English, 简体中文 and 日本語: previews, refusals and summaries translated, codes the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cli.terminal import run_on_a_terminal
from tests.conftest import cli_env
from tests.history.helpers import cli_turn, log_json, new_session, short_id, turn_id
from turnback.catalog import Message, word
from turnback.render.diff import human_size
from turnback.render.terminal import display_width


def _conflict(cli: Any, project: Path) -> tuple[str, str]:
    """A turn that edits README.md and makes new.txt, then a user edit of README.md: (session, turn id)."""
    (project / "README.md").write_bytes(b"hello\n")
    sid = new_session(cli)
    cli_turn(cli, sid, "the work", ("write", "README.md", b"agent\n"), ("write", "new.txt", b"new\n"))
    (project / "README.md").write_bytes(b"the user's\n")
    return sid, turn_id(log_json(cli, sid), 1)


PREVIEWS = {
    "en": [
        "undo turn {turn}: the work",
        "trash       new.txt",
        "skip        README.md (changed after the turn; --force overwrites it)",
    ],
    "zh-CN": [
        "撤销轮次 {turn}：the work",
        "移入回收站  new.txt",
        "跳过        README.md (该轮次之后已被修改；--force 会覆盖它)",
    ],
    "ja": [
        "ターン {turn} を取り消す：the work",
        "ゴミ箱へ    new.txt",
        "スキップ    README.md (そのターンの後に変更されています。--force で上書きします)",
    ],
}


@pytest.mark.parametrize("lang", sorted(PREVIEWS))
def test_an_undo_preview_is_worded_in_the_chosen_language_and_aligned_by_display_width(
    cli: Any, project: Path, lang: str
) -> None:
    sid, turn = _conflict(cli, project)
    preview = cli("undo", "--dry-run", "--session", sid, "--lang", lang)
    assert preview.rc == 0, preview.err
    assert preview.lines == [line.format(turn=short_id(turn)) for line in PREVIEWS[lang]]
    # The path column starts at the same terminal column in every row, whatever the label's script.
    assert {display_width(row.split(" README.md")[0].split(" new.txt")[0]) for row in preview.lines[1:]} == {11}


REVERT_REASONS = {
    "en": "(changed since the call; --anyway restores the earlier content over it)",
    "zh-CN": "(自该调用以来已被修改；--anyway 会用之前的内容覆盖它)",
    "ja": "(その呼び出し以降に変更されています。--anyway で、その上から以前の内容を復元します)",
}


@pytest.mark.parametrize("lang", sorted(REVERT_REASONS))
def test_a_conflicting_revert_says_why_in_the_chosen_language(cli: Any, project: Path, lang: str) -> None:
    sid, _ = _conflict(cli, project)
    call = next(c for c in log_json(cli, sid)["turns"][0]["calls"] if c["changes"][0]["path"] == "README.md")
    preview = cli("revert", short_id(call["id"]), "--dry-run", "--lang", lang)
    assert preview.rc == 0, preview.err
    [row] = [line for line in preview.lines if "README.md (" in line]
    assert row.endswith(REVERT_REASONS[lang])
    assert (project / "README.md").read_bytes() == b"the user's\n"


REFUSALS = {
    "en": "turnback: nothing to undo: no turn of this session changed files\n",
    "zh-CN": "turnback: 没有可撤销的内容：本会话没有任何轮次修改过文件\n",
    "ja": "turnback: 取り消すものはありません：このセッションにはファイルを変更したターンがありません\n",
}


@pytest.mark.parametrize("lang", sorted(REFUSALS))
def test_a_refusal_is_worded_in_the_chosen_language_with_the_same_exit_code(cli: Any, lang: str) -> None:
    sid = new_session(cli)
    refused = cli("undo", "--session", sid, "--lang", lang)
    assert (refused.rc, refused.out, refused.err) == (1, "", REFUSALS[lang])


SUMMARIES = {"en": "1 file changed, +1 -0", "zh-CN": "1 个文件已修改，+1 -0", "ja": "1 個のファイルを変更、+1 -0"}


@pytest.mark.parametrize("lang", sorted(SUMMARIES))
def test_the_end_of_turn_summary_is_worded_in_the_chosen_language(cli: Any, lang: str) -> None:
    sid = new_session(cli)
    assert cli("turn", "begin", "--session", sid, "--message", "m").rc == 0
    assert cli("write", "--session", sid, "a.txt", stdin=b"a\n").rc == 0
    ended = cli("turn", "end", "--session", sid, "--lang", lang)
    assert (ended.rc, ended.lines) == (0, [SUMMARIES[lang]])


def test_json_codes_are_the_same_in_every_language_and_the_messages_are_not(cli: Any, project: Path) -> None:
    sid, _ = _conflict(cli, project)
    shown = {lang: cli("undo", "--dry-run", "--json", "--session", sid, "--lang", lang).json() for lang in PREVIEWS}
    codes = {lang: [(row["path"], row["code"]) for row in data["rows"]] for lang, data in shown.items()}
    assert codes["en"] == codes["zh-CN"] == codes["ja"] == [("new.txt", None), ("README.md", "clauses")]
    messages = {data["rows"][1]["message"] for data in shown.values()}
    assert len(messages) == 3 and "changed after the turn; --force overwrites it" in messages


CHANGED_AFTER = {  # a nested message is {"message": {code, params}}, as Message.to_json keeps it
    "parts": {
        "messages": [
            {"message": {"code": "changed_after_turn", "params": {}}},
            {"message": {"code": "flag_overwrites_it", "params": {"flag": "--force"}}},
        ]
    }
}


def test_json_rows_carry_their_params_so_a_reason_of_several_clauses_says_which(cli: Any, project: Path) -> None:
    """A row's code alone is ``clauses`` for every reason of several clauses: its params name them, in any language."""
    sid, _ = _conflict(cli, project)
    for lang in PREVIEWS:
        rows = cli("undo", "--dry-run", "--json", "--session", sid, "--lang", lang).json()["rows"]
        assert [(row["path"], row["code"], row["params"]) for row in rows] == [
            ("new.txt", None, None),
            ("README.md", "clauses", CHANGED_AFTER),
        ], lang


@pytest.mark.parametrize("lang", sorted(SUMMARIES))
def test_the_end_of_turn_summary_json_has_the_line_s_code_params_and_message(cli: Any, lang: str) -> None:
    sid = new_session(cli)
    assert cli("turn", "begin", "--session", sid, "--message", "m").rc == 0
    assert cli("write", "--session", sid, "a.txt", stdin=b"a\n").rc == 0
    summary = cli("turn", "end", "--session", sid, "--json", "--lang", lang).json()["summary"]
    assert (summary["code"], summary["params"]) == ("files_changed", {"count": 1, "added": 1, "removed": 0})
    assert summary["message"] == summary["line"] == SUMMARIES[lang]


def test_files_and_notices_json_give_each_item_s_code_params_and_message(cli: Any, project: Path) -> None:
    sid = new_session(cli)
    cli_turn(cli, sid, "the work", ("write", "a.txt", b"a\n"))
    [item] = cli("files", "--session", sid, "--json", "--lang", "ja").json()["files"]
    assert (item["code"], item["params"]) == ("file_created_in", {"number": 1})
    assert item["message"] == item["state"] == word(Message("file_created_in", number=1), "ja")
    [call] = log_json(cli, sid)["turns"][0]["calls"]
    assert cli("revert", short_id(call["id"]), "--yes").rc == 0
    [notice] = cli("notices", "--session", sid, "--json", "--lang", "zh-CN").json()["notices"]
    assert notice["path"] == "a.txt" and notice["code"] and notice["params"] is not None
    assert notice["message"] == notice["text"] == word(Message(notice["code"], **notice["params"]), "zh-CN")


def test_the_language_comes_from_the_flag_then_the_variable_then_the_config_then_the_locale(
    cli: Any, home: Path
) -> None:
    sid = new_session(cli)
    english, chinese, japanese = REFUSALS["en"], REFUSALS["zh-CN"], REFUSALS["ja"]
    assert cli("undo", "--session", sid, env={"LANG": "ja_JP.UTF-8"}).err == japanese
    assert cli("undo", "--session", sid, env={"LC_ALL": "zh_CN.UTF-8", "LANG": "ja_JP.UTF-8"}).err == chinese
    assert cli("undo", "--session", sid, env={"LANG": "C.UTF-8"}).err == english
    assert cli("config", "set", "lang", "zh-CN").rc == 0
    assert cli("undo", "--session", sid, env={"LANG": "ja_JP.UTF-8"}).err == chinese
    assert cli("undo", "--session", sid, env={"TURNBACK_LANG": "ja"}).err == japanese
    assert cli("--lang", "en", "undo", "--session", sid, env={"TURNBACK_LANG": "ja"}).err == english


@pytest.mark.parametrize(
    ("args", "env", "named"), [(["--lang", "fr"], {}, "--lang fr"), ([], {"TURNBACK_LANG": "de"}, "TURNBACK_LANG de")]
)
def test_an_unknown_language_is_a_usage_error_naming_the_three(
    cli: Any, args: list[str], env: dict[str, str], named: str
) -> None:
    refused = cli(*args, "log", env=env)
    assert refused.rc == 2
    assert refused.err == f"turnback: {named} is not a language turnback speaks; choose one of en, zh-CN, ja\n"


IDLE = {
    "zh-CN": "空闲：没有正在运行的内容，也没有未完成的操作",
    "ja": "待機中：実行中のものも、未完了のものもありません",
}


@pytest.mark.parametrize("lang", ["zh-CN", "ja"])
def test_status_is_worded_in_the_chosen_language(cli: Any, engine: Any, lang: str) -> None:
    sid = new_session(cli)
    kept = cli("status", "--session", sid, "--json").json()["kept_bytes"]
    shown = cli("status", "--session", sid, "--lang", lang)
    assert shown.rc == 0, shown.err
    assert shown.lines == [
        word(Message("status_session_head", session=short_id(sid), head=Message("status_head_start")), lang),
        IDLE[lang],
        word(Message("status_kept", size=human_size(kept), max_mib=engine.config.store_max_mib), lang),
    ]


@pytest.mark.parametrize("lang", ["zh-CN", "ja"])
def test_sessions_and_their_labels_are_worded_in_the_chosen_language(cli: Any, project: Path, lang: str) -> None:
    sid = new_session(cli)
    cli_turn(cli, sid, "the work", ("write", "a.txt", b"a\n"))
    [english] = cli("sessions").lines
    [shown] = cli("sessions", "--lang", lang).lines
    assert english.startswith(f"{short_id(sid)}  ")
    assert english.endswith(f"  1 turn  {project}  t  (default)")
    # The same columns, with each label in the chosen language.
    expected = english
    for english_label, label in (("1 turn", {"zh-CN": "1 个轮次", "ja": "1 ターン"}), ("(default)", SESSION_DEFAULT)):
        expected = expected.replace(english_label, label[lang])
    assert shown.split() == expected.split()  # the same columns, each label in the chosen language


SESSION_DEFAULT = {"zh-CN": "(默认)", "ja": "(デフォルト)"}
NOTHING_CHANGED = {"en": "no files changed", "zh-CN": "没有文件被修改", "ja": "変更されたファイルはありません"}


@pytest.mark.parametrize("lang", sorted(NOTHING_CHANGED))
def test_files_of_a_turn_that_changed_nothing_says_so_in_the_chosen_language(cli: Any, lang: str) -> None:
    sid = new_session(cli)
    cli_turn(cli, sid, "only looked")
    shown = cli("files", "--session", sid, "--lang", lang)
    assert (shown.rc, shown.lines) == (0, [NOTHING_CHANGED[lang]])


def test_files_aligns_its_state_column_by_display_width_when_a_name_is_chinese(cli: Any) -> None:
    sid = new_session(cli)
    cli_turn(cli, sid, "two files", ("write", "文档.txt", b"doc\n"), ("write", "a.txt", b"a\n"))
    shown = cli("files", "--session", sid)
    assert shown.rc == 0, shown.err
    assert [row.split("  ")[-1].strip() for row in shown.lines] == ["created in turn 1"] * 2
    # 文档.txt takes 8 columns on a terminal (each Chinese character two), so both states start at column 10.
    assert sorted((row.split()[0], display_width(row[: row.index("created")])) for row in shown.lines) == [
        ("a.txt", 10),
        ("文档.txt", 10),
    ], shown.lines


LEFT_OUT = {
    "en": "new app.log (not covered: excluded by snapshot.exclude (*.log))",
    "zh-CN": "新建 app.log (无副本：被 snapshot.exclude（*.log）排除)",
    "ja": "新規 app.log (対象外：snapshot.exclude（*.log）で除外)",
}


@pytest.mark.parametrize("lang", sorted(LEFT_OUT))
def test_why_a_scan_kept_no_copy_is_worded_in_the_language_it_is_shown_in(cli: Any, lang: str) -> None:
    """The reason is recorded once, as a code, by the scan; show words it in each language."""
    sid = new_session(cli)
    assert cli("config", "set", "snapshot.exclude", "*.log").rc == 0
    assert cli("turn", "begin", "--session", sid, "--message", "logs").rc == 0
    ran = cli("exec", "--session", sid, "--", "sh", "-c", "echo x > app.log")
    assert ran.rc == 0, ran.err
    assert cli("turn", "end", "--session", sid).rc == 0
    [call] = log_json(cli, sid)["turns"][0]["calls"]
    shown = cli("show", call["id"], "--lang", lang)
    assert shown.rc == 0, shown.err
    assert shown.lines[-1] == LEFT_OUT[lang]


def test_resend_s_calls_column_is_as_wide_as_its_widest_label_in_japanese(cli: Any, project: Path) -> None:
    """日本語's "1 件の呼び出し" is 14 columns: the counts after it start two columns on, in every row."""
    sid = new_session(cli)
    cli_turn(cli, sid, "two files", ("write", "a.txt", b"a\n"), ("write", "b.txt", b"b\n"), ("write", "a.txt", b"A\n"))
    english = cli("resend", "1", "--session", sid)
    assert english.lines[:2] == ["a.txt  2 calls   +0 -1", "b.txt  1 call    +0 -1"]
    shown = cli("resend", "1", "--session", sid, "--lang", "ja")
    assert shown.rc == 0, shown.err
    assert shown.lines[:2] == ["a.txt  2 件の呼び出し  +0 -1", "b.txt  1 件の呼び出し  +0 -1"]
    assert {display_width(row[: row.index("+")]) for row in shown.lines[:2]} == {23}


def test_ops_kind_column_is_as_wide_as_its_widest_kind_in_japanese(cli: Any, project: Path) -> None:
    sid = new_session(cli)
    for number in (1, 2, 3):
        cli_turn(cli, sid, f"turn {number}", ("write", f"{number}.txt", b"x\n"))
    assert cli("undo", "--session", sid, "--yes").rc == 0
    assert cli("rollback", "1", "--session", sid, "--confirm").rc == 0
    english = cli("ops", "--session", sid).lines
    assert [row.split("  ", 2)[2] for row in english] == ["rollback 1 of 1 rows done", "undo     1 of 1 rows done"]
    shown = cli("ops", "--session", sid, "--lang", "ja").lines
    # ロールバック takes 12 columns: 取り消し (8) is padded to it, and the rows' counts start at one column.
    assert [row.split("  ", 2)[2] for row in shown] == ["ロールバック 1 行中 1 行完了", "取り消し     1 行中 1 行完了"]
    assert len({display_width(row[: row.index("1 行中")]) for row in shown}) == 1


PROMPT_ENDS = {"en": "y = yes, n = no", "zh-CN": "y = 是，n = 否", "ja": "y = はい、n = いいえ"}
ACTION_LABELS = {  # the product's labels, as the revert prompt names the action, and the log a reverted call
    "en": ("Revert?", "Delete?", "Restore Anyway?", "Delete Anyway?", "(Reverted)"),
    "zh-CN": ("撤销修改？", "删除？", "仍然恢复？", "仍然删除？", "(已撤销)"),
    "ja": ("元に戻す？", "削除？", "このまま復元？", "このまま削除？", "(元に戻し済み)"),
}


@pytest.mark.parametrize("lang", sorted(ACTION_LABELS))
def test_revert_names_its_action_by_the_product_s_labels_in_the_chosen_language(
    cli: Any, home: Path, project: Path, lang: str
) -> None:
    revert, delete, restore_anyway, delete_anyway, reverted = ACTION_LABELS[lang]
    sid, _ = _conflict(cli, project)  # README.md changed by the user since; new.txt made by the turn
    calls = {c["changes"][0]["path"]: short_id(c["id"]) for c in log_json(cli, sid)["turns"][0]["calls"]}
    env, end = cli_env(home), PROMPT_ENDS[lang].encode()

    def prompt(*args: str, keys: bytes = b"n\n") -> str:
        code, shown = run_on_a_terminal(["revert", *args, "--lang", lang], project, env, keys, prompt_end=end)
        assert code == (0 if keys == b"y\n" else 1), shown
        [asked] = [line for line in shown.splitlines() if PROMPT_ENDS[lang] in line]
        return asked.split(PROMPT_ENDS[lang])[0].rstrip()

    assert prompt(calls["new.txt"]) == delete
    assert prompt(calls["README.md"], "--anyway") == restore_anyway
    (project / "new.txt").write_bytes(b"the user's too\n")
    assert prompt(calls["new.txt"], "--anyway") == delete_anyway
    (project / "README.md").write_bytes(b"agent\n")  # what the call wrote: a clean revert
    assert prompt(calls["README.md"], keys=b"y\n") == revert
    assert (project / "README.md").read_bytes() == b"hello\n"
    [row] = [line for line in cli("log", "--session", sid, "--lang", lang).lines if calls["README.md"] in line]
    assert row.endswith(f"  {reverted}"), row

"""The message catalog: every code worded in all three languages, alike in placeholders, and used."""

from __future__ import annotations

import ast
import string
from pathlib import Path

import pytest

from turnback.catalog import LANGUAGES, Message, entries, word
from turnback.catalog.docs import markdown

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "turnback"

LABELS = {
    "label_revert": ("Revert", "撤销修改", "元に戻す"),
    "label_reverted": ("Reverted", "已撤销", "元に戻し済み"),
    "label_delete": ("Delete", "删除", "削除"),
    "label_revert_and_send": ("Revert and Send", "撤销并发送", "元に戻して送信"),
    "label_keep_files_and_send": ("Keep Files and Send", "保留文件并发送", "ファイルはそのままで送信"),
    "label_send_anyway": ("Send Anyway", "仍然发送", "このまま送信"),
    "label_restore_anyway": ("Restore Anyway", "仍然恢复", "このまま復元"),
    "label_delete_anyway": ("Delete Anyway", "仍然删除", "このまま削除"),
}


def _placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def _source_strings() -> tuple[set[str], set[str]]:
    """Every string constant in src/, and the codes given as the first argument of Message(...) or say(...)."""
    constants: set[str] = set()
    named: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                constants.add(node.value)
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("Message", "say")
                and node.args
            ):
                named |= _codes_of(node.args[0])
    return constants, named


def _codes_of(node: ast.expr) -> set[str]:
    """The codes an argument can be: a string, or either branch of ``A if COND else B``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _codes_of(node.body) | _codes_of(node.orelse)
    return set()


@pytest.mark.parametrize("lang", LANGUAGES[1:])
def test_every_code_has_a_message_in_each_language_with_the_same_placeholders(lang: str) -> None:
    english = entries("en")
    other = entries(lang)
    assert sorted(set(english) - set(other)) == []
    assert sorted(set(other) - set(english)) == []
    for code, entry in english.items():
        wanted = set().union(*(_placeholders(text) for text in entry.forms.values()))
        for form, text in other[code].forms.items():
            assert _placeholders(text) == wanted, (lang, code, form, text)


def test_every_english_entry_says_when_it_happens_and_plural_entries_have_one_and_other() -> None:
    for code, entry in entries("en").items():
        assert entry.when, code
        if "text" not in entry.forms:
            assert set(entry.forms) == {"one", "other"}, code
            assert "count" in _placeholders(entry.forms["other"]), code


def test_every_code_the_source_names_is_in_the_catalog_and_every_entry_is_used() -> None:
    constants, named = _source_strings()
    codes = set(entries("en"))
    assert sorted(named - codes) == []
    assert sorted(codes - constants) == []


@pytest.mark.parametrize(("code", "texts"), sorted(LABELS.items()))
def test_the_product_labels_are_exact(code: str, texts: tuple[str, str, str]) -> None:
    assert tuple(word(Message(code), lang) for lang in LANGUAGES) == texts


def test_plural_forms_follow_the_count_in_each_language() -> None:
    assert word(Message("files_restored", count=1), "en") == "1 file restored"
    assert word(Message("files_restored", count=2), "en") == "2 files restored"
    for lang in LANGUAGES[1:]:
        one, two = (word(Message("files_restored", count=n), lang) for n in (1, 2))
        assert "1" in one and "2" in two and one.replace("1", "2") == two


def test_a_message_survives_a_json_round_trip_with_nested_messages() -> None:
    message = Message("clauses", parts=(Message("changed_after_turn"), Message("flag_overwrites_it", flag="--force")))
    assert Message.from_json(message.to_json()) == message
    assert str(message) == "changed after the turn; --force overwrites it"


def test_a_message_kept_as_text_reads_back_and_an_older_stores_english_text_is_shown_as_it_is() -> None:
    message = Message("call_denied_because", why="the user said no: 不要")
    assert Message.loads(message.dumps()) == message
    assert word(Message.loads(message.dumps()), "ja") == "拒否されました: the user said no: 不要"
    assert Message.loads("larger than snapshot.max_file_mib (1 MiB)") == Message(
        "plain", text="larger than snapshot.max_file_mib (1 MiB)"
    )
    assert Message.loads('{"code": not json') == Message("plain", text='{"code": not json')


def test_docs_messages_md_is_made_from_the_catalog() -> None:
    assert (ROOT / "docs" / "messages.md").read_text(encoding="utf-8") == markdown(), (
        "docs/messages.md is stale: run python -m turnback.catalog.docs docs/messages.md"
    )

"""The page's files: the catalog codes they name are the ones the server serves them, and nothing in them needs
an inline script, an inline style or another origin (the strict CSP holds, and no asset comes from the internet)."""

from __future__ import annotations

import re
from pathlib import Path

from turnback.catalog import LANGUAGES, entries
from turnback.web.page_codes import PAGE_CODES

STATIC = Path(__file__).resolve().parents[2] / "src" / "turnback" / "web" / "static"
QUOTED = re.compile(r'data-word="([a-z0-9_]+)"|"([a-z0-9_]+)"')


def _named_codes() -> set[str]:
    """Every quoted word of the page's files that is a catalog code (and every data-word)."""
    codes = set(entries("en"))
    named: set[str] = set()
    for path in STATIC.iterdir():
        for word, quoted in QUOTED.findall(path.read_text(encoding="utf-8")):
            if word or quoted in codes:
                named.add(word or quoted)
    return named


def test_the_codes_the_page_names_are_the_codes_it_is_served() -> None:
    named = _named_codes()
    kinds = {code for code in PAGE_CODES if code.startswith("kind_")}  # named as "kind_" + a change's kind
    labels = {code for code in PAGE_CODES if code.startswith("label_")}  # served whole; some come as plan actions
    assert sorted(named - set(PAGE_CODES)) == []
    assert sorted(set(PAGE_CODES) - named - kinds - labels) == []
    assert len(PAGE_CODES) == len(set(PAGE_CODES))


def test_every_page_code_is_worded_in_every_language() -> None:
    for lang in LANGUAGES:
        assert sorted(set(PAGE_CODES) - set(entries(lang))) == [], lang


def test_the_page_has_no_inline_script_or_style_and_fetches_nothing_from_elsewhere() -> None:
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == []
    assert re.findall(r"<style|\sstyle=|\son[a-z]+=", html) == []
    for path in STATIC.iterdir():
        text = path.read_text(encoding="utf-8")
        assert re.findall(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text) == [], path.name
        assert "innerHTML" not in text and ".style." not in text, path.name

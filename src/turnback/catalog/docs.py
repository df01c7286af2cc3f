"""docs/messages.md, made from the English catalog: every code, when it happens, and its text.

``python -m turnback.catalog.docs docs/messages.md`` writes it; a test checks it is current.
"""

from __future__ import annotations

import sys

from turnback.catalog import entries


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    """The page: a table of every code in the order of ``en.toml``."""
    lines = [
        "# Messages",
        "",
        "Every outcome turnback reports is a code with parameters (`--json` gives `code`, `params` and the worded",
        "`message`); the text below is its English wording, from `src/turnback/catalog/en.toml`. The same codes",
        "are worded in 简体中文 (`zh-CN.toml`) and 日本語 (`ja.toml`) next to it. Placeholders in braces are the",
        "parameters.",
        "Codes never change with the language or the wording. This page is made by",
        "`python -m turnback.catalog.docs docs/messages.md`.",
        "",
        "| code | when | English |",
        "|---|---|---|",
    ]
    for code, entry in entries("en").items():
        if "text" in entry.forms:
            english = f"`{_cell(entry.forms['text'])}`"
        else:
            english = " / ".join(f"{form}: `{_cell(text)}`" for form, text in entry.forms.items())
        lines.append(f"| `{code}` | {_cell(entry.when or '')} | {english} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m turnback.catalog.docs PATH", file=sys.stderr)
        return 2
    with open(argv[0], "w", encoding="utf-8") as page:
        page.write(markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

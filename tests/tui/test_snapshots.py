"""The main screens in English, 简体中文 and 日本語, compared with the snapshots under ``__snapshots__/``.

The session's ids and times come from a fixed clock (``fixed_engine``), so a screen differs from its snapshot
only when what the TUI draws does. After a deliberate change: ``pytest tests/tui --snapshot-update``, then look
at the SVGs before committing them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

import turnback
from tests.tui.conftest import Story
from turnback.tui.app import TurnbackApp

LANGS = ["en", "zh-CN", "ja"]
Compare = Callable[..., bool]


def _app(engine: turnback.Engine, story: Story, lang: str) -> TurnbackApp:
    return TurnbackApp(
        turnback.KeptStore(lambda: engine), story.session, lang=lang, poll_s=60
    )  # no redraw mid-screenshot


def _typing(line: str) -> Callable[[Pilot[Any]], Any]:
    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.press("slash", *line.removeprefix("/"), "enter")
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("lang", LANGS)
def test_the_history_tree_and_the_selected_node(
    snap_compare: Compare, fixed_engine: turnback.Engine, story: Story, lang: str
) -> None:
    assert snap_compare(_app(fixed_engine, story, lang), press=["down"], terminal_size=(100, 30))


@pytest.mark.parametrize("lang", LANGS)
def test_a_rollback_preview_with_its_confirm_bar(
    snap_compare: Compare, fixed_engine: turnback.Engine, story: Story, lang: str
) -> None:
    app = _app(fixed_engine, story, lang)
    assert snap_compare(app, run_before=_typing("/rollback 1"), terminal_size=(100, 30))


@pytest.mark.parametrize("lang", LANGS)
def test_the_history_tree_and_the_selected_node_in_an_80_by_24_terminal(
    snap_compare: Compare, fixed_engine: turnback.Engine, story: Story, lang: str
) -> None:
    assert snap_compare(_app(fixed_engine, story, lang), press=["down"], terminal_size=(80, 24))


@pytest.mark.parametrize("lang", LANGS)
def test_help_in_an_80_by_24_terminal(
    snap_compare: Compare, fixed_engine: turnback.Engine, story: Story, lang: str
) -> None:
    assert snap_compare(_app(fixed_engine, story, lang), run_before=_typing("/help"), terminal_size=(80, 24))


@pytest.mark.parametrize(
    ("screenshot", "snapshot"),
    [
        ("history.svg", "test_the_history_tree_and_the_selected_node[en].svg"),
        ("rollback-preview.svg", "test_a_rollback_preview_with_its_confirm_bar[en].svg"),
    ],
)
def test_the_readmes_screenshots_are_the_english_snapshots(screenshot: str, snapshot: str) -> None:
    """README.md shows docs/tui/*.svg: copies of the snapshots above, so a change to what the TUI draws that
    updates a snapshot fails here until the screenshot is copied too (and the README stays true)."""
    root = Path(__file__).parents[2]
    shown = (root / "docs" / "tui" / screenshot).read_bytes()
    assert shown == (Path(__file__).parent / "__snapshots__" / "test_snapshots" / snapshot).read_bytes(), (
        f"cp 'tests/tui/__snapshots__/test_snapshots/{snapshot}' docs/tui/{screenshot}"
    )
    assert f"(docs/tui/{screenshot})" in (root / "README.md").read_text(encoding="utf-8")

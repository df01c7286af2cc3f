"""What the TUI tests share: a session of three turns recorded with fixed ids and times, and the app on it."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

pytest.importorskip("textual", reason="the tui extra (Textual) is not installed: pip install -e '.[dev]'")

import turnback
from tests.conftest import TEST_KEY, tree_state
from tests.history.helpers import lib_turn
from turnback.model import IdSource
from turnback.tui.app import TurnbackApp

SIZE = (100, 30)
START_NS = 1_780_000_000 * 10**9  # a fixed clock: the same ids and times on every run, so snapshots compare


class Story(NamedTuple):
    """The session the tests drive: its id, its turns' ids (1, 2, 3), and the project after each turn."""

    session: turnback.Session
    turns: tuple[str, str, str]
    states: tuple[dict[str, tuple[str, bytes | str | None, int]], ...]


@pytest.fixture
def fixed_engine(home: Path) -> Iterator[turnback.Engine]:
    """An engine whose ids and clock count up from a fixed start (a snapshot shows ids)."""
    ticks = itertools.count()
    clock = lambda: START_NS + next(ticks) * 1_000_000  # noqa: E731 - a millisecond per call
    ids = IdSource(clock_ms=lambda: clock() // 1_000_000, randbits=lambda bits: 0)
    with turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False, clock=clock, ids=ids) as opened:
        yield opened


@pytest.fixture
def story(fixed_engine: turnback.Engine, project: Path) -> Story:
    session = fixed_engine.new_session(str(project), title="tui")
    states = [tree_state(project)]
    turns = []
    for step in (
        ("add a greeting", ("write", "README.md", b"# project\n\nhello\n"), ("write", "notes.txt", b"one\n")),
        ("say goodbye too", ("edit", "README.md", "hello", "hello\ngoodbye")),
        ("drop the guide", ("rm", "docs/guide.md"), ("write", "notes.txt", b"one\nthree\n")),
    ):
        turns.append(lib_turn(fixed_engine, session.id, step[0], *step[1:]).id)
        states.append(tree_state(project))
    return Story(fixed_engine.session(session.id), (turns[0], turns[1], turns[2]), tuple(states))


@pytest.fixture
def app(fixed_engine: turnback.Engine, story: Story) -> TurnbackApp:
    return TurnbackApp(turnback.KeptStore(lambda: fixed_engine), story.session, lang="en", poll_s=0.2)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # Textual runs on asyncio

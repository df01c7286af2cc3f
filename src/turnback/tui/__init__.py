"""``turnback tui``: the terminal UI over the engine (Textual, the optional ``tui`` extra).

Imported only by ``turnback tui``: nothing on a hook's path, nor the rest of the CLI, loads Textual.
"""

from __future__ import annotations

from turnback import Engine, Session
from turnback.tui.app import TurnbackApp


def run(engine: Engine, session: Session, *, lang: str) -> int:
    """Run the TUI on *session* until the user quits; the exit code."""
    return TurnbackApp(engine, session, lang=lang).run() or 0


__all__ = ["TurnbackApp", "run"]

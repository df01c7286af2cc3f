"""``turnback tui``: the terminal UI over the engine (Textual, the optional ``tui`` extra).

Imported only by ``turnback tui``: nothing on a hook's path, nor the rest of the CLI, loads Textual.
"""

from __future__ import annotations

from turnback import KeptStore, Session
from turnback.tui.app import TurnbackApp


def run(kept: KeptStore, session: Session, *, lang: str) -> int:
    """Run the TUI on *session*, over the store *kept* open, until the user quits; the exit code.

    Textual shows an error it caught inside the app and ends it with return code 1; that is a bug, which
    the CLI's boundary logs and ends with its own code.
    """
    app = TurnbackApp(kept, session, lang=lang)
    try:
        code = app.run()
    finally:
        kept.give_back(app.engine)  # a shared store's (one opened for the last poll or command) is closed
    if code is None and app.return_code == 1:
        raise RuntimeError("turnback tui ended on an unexpected error (shown above)")
    return code or 0


__all__ = ["TurnbackApp", "run"]

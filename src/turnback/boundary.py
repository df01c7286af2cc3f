"""The error boundary every front end runs in (the CLI, ``exec``, a hook): what an error is as JSON, and
where an unexpected one is written down (``turnback.log`` in the store).

Imports nothing heavy: a hook process that fails comes here too.
"""

from __future__ import annotations

import os

LOG_NAME = "turnback.log"


def error_data(kind: str, message: str, exit_code: int) -> dict[str, object]:
    """The JSON object of an error: its type, its message, and the exit status it ends with."""
    return {"error": {"type": kind, "message": message, "exit": exit_code}}


def refusal_data(error: BaseException, exit_code: int) -> dict[str, object]:
    """The JSON object of an error turnback raised on purpose (a refusal, a usage error): its ``code`` and
    ``params`` beside ``message``, worded in the current language."""
    from turnback.catalog import word
    from turnback.errors import TurnbackError

    if not isinstance(error, TurnbackError):
        return error_data(type(error).__name__, str(error), exit_code)
    outcome = error.message.to_json()
    return {"error": {"type": type(error).__name__, **outcome, "message": word(error.message), "exit": exit_code}}


def log_unexpected(home: str | None, origin: str) -> str | None:
    """Append the traceback being handled to the store's log, after a line naming when, *origin* (``turnback``,
    ``hook claude-code``) and the versions; the log's path, or None when it cannot be written."""
    import datetime
    import platform
    import traceback

    from turnback import __version__

    if not home or not os.path.isdir(home):
        return None
    path = os.path.join(home, LOG_NAME)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace") as log_file:
            log_file.write(
                f"--- {datetime.datetime.now().isoformat()} {origin} turnback {__version__} "
                f"python {platform.python_version()} {platform.platform()}\n"
            )
            log_file.write(traceback.format_exc())
    except OSError:
        return None
    return path


__all__ = ["LOG_NAME", "error_data", "log_unexpected", "refusal_data"]

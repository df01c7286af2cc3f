"""The ``turnback`` command. ``entry`` sends a hook event straight to its adapter, and a harness's ``turn
begin``, ``exec`` and ``turn end`` to :mod:`turnback.cli.fast` (the hook relay serves them), before anything
else is imported, because an agent waits for each; everything else goes through :mod:`turnback.cli.main`."""

from __future__ import annotations

import sys

# The first words of the forms cli.fast serves (the rest of its check costs nothing to import).
FAST_FIRST_WORDS = ("turn", "exec", "--store", "--session")


def entry() -> int:
    if sys.argv[1:2] == ["hook"] and sys.argv[2:3] in (["claude-code"], ["codex"], ["gemini"], ["cursor"]):
        from turnback.hooks.relay import hook_main

        return hook_main(sys.argv[2])
    if sys.argv[1:2] and sys.argv[1].partition("=")[0] in FAST_FIRST_WORDS:
        from turnback.cli.fast import main as fast_main

        return fast_main(sys.argv[1:])
    from turnback.cli.main import main

    return main()

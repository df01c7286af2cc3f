"""The ``turnback`` command. ``entry`` sends a hook event straight to its adapter, before anything else is
imported, because an agent waits for every hook; everything else goes through :mod:`turnback.cli.main`."""

from __future__ import annotations

import sys


def entry() -> int:
    if sys.argv[1:2] == ["hook"] and sys.argv[2:3] in (["claude-code"], ["codex"], ["gemini"], ["cursor"]):
        from turnback.hooks.relay import hook_main

        return hook_main(sys.argv[2])
    from turnback.cli.main import main

    return main()

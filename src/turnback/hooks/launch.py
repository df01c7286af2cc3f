"""The program an agent runs for each hook event, as ``turnback install`` writes it:
``PYTHON -S -I …/turnback/hooks/launch.py hook claude-code`` (or ``hook codex``, ``hook gemini``: the last two
words name the harness and mark turnback's entries).

``-S`` leaves ``site`` out (site-packages and their ``.pth`` files: about 10 ms of a hook's start), ``-I`` the
``PYTHON*`` settings of the environment and the script's own folder on ``sys.path``. Only the folder that holds
the ``turnback`` package is put on the path; a hook that must handle its event itself (no relay answered) loads
``site`` then, for the engine's packages (:func:`turnback.hooks.relay.hook_main`).
"""

import os
import sys


def main() -> int:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from turnback.hooks.relay import hook_main

    harness = sys.argv[2] if sys.argv[1:2] == ["hook"] and len(sys.argv) == 3 else "claude-code"
    return hook_main(harness)


if __name__ == "__main__":
    sys.exit(main())

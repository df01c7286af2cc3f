"""A hook that records what Claude Code sent: it appends each event's JSON payload, as one line, to the file
named by ``TURNBACK_TEST_HOOK_LOG``, and prints nothing (so it changes nothing Claude Code does)."""

import os
import sys

raw = sys.stdin.buffer.read().replace(b"\n", b" ").strip()
with open(os.environ["TURNBACK_TEST_HOOK_LOG"], "ab") as log:
    log.write(raw + b"\n")

"""``benchmarks/sidebyside.py --quick``, the smoke run issue 18 keeps in CI: it runs every row to the end and
prints each target beside its figure. Timing never fails it (the figures of a loaded CI machine say little);
a row that breaks does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

# The rows of issue 18 (and those before it), as the run names them in its targets table.
TARGETS = [
    "first snapshot ≥3× faster than a shadow-git cold checkpoint",
    "first snapshot of a plain folder ≥5× faster than a shadow-git cold checkpoint",
    "a Claude Code Bash hook pair, no user step, ≤ 60 ms median",
    "a 10-file turn through turnback exec (CLI processes) ≤ 0.25× shadow git",
    "≥10× faster than git clean && git reset --hard",
    "peak memory on the 100,000-file tree under 200 MB",
]


def test_the_quick_side_by_side_run_measures_every_row_and_checks_every_undo(tmp_path: Path) -> None:
    figures = tmp_path / "quick.json"
    env = {key: value for key, value in os.environ.items() if not key.startswith("TURNBACK_")}
    done = subprocess.run(
        [sys.executable, "benchmarks/sidebyside.py", "--quick", "--json", str(figures), "--dir", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "Undo checks: both tools put every tree back exactly" in out
    targets = out[out.index("\ntargets:") :]
    for target in TARGETS:
        assert target in targets, target
    saved = json.loads(figures.read_text())
    assert saved["schema"] == 1
    assert {row["verdict"] for row in saved["targets"]} <= {"met (provisional)", "MISSED (provisional)"}
    [result] = saved["results"]
    memory = result["memory"]  # a git checkout: turnback's background copy of git objects counts in its peak
    assert result["tree"]["git_checkout"] and memory["adopt_bytes"] > 0
    assert memory["turnback_bytes"] == max(memory["own_bytes"], memory["with_split_bytes"], memory["adopt_bytes"])
    assert "its background copy of git objects, a process of its own waited for after the cold scan, " in out

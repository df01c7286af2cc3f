"""Peak memory of turnback, phase by phase (issue 18: at most 200 MB on the 100,000-file tree).

Run it from the repository root::

    .venv/bin/python benchmarks/memory.py                  # the 100,000-file tree (a few minutes)
    .venv/bin/python benchmarks/memory.py --files 20000    # a quicker look

Each scenario runs in a fresh process of this script, which imports what ``sidebyside.py``'s peak-memory
process imports:

- ``checkout``: a clean git checkout of the generated tree, ``sidebyside.py``'s peak-memory sequence one phase at
  a time: the first snapshot (it stands on git's index), the wait for the background copy of git objects (until
  its process ends; then this process checks the cache the copy saved once, decoding it), a scan with nothing
  changed, a bulk change (1,000 edits, 100 creates, 100 deletes by a "command", in a turn) and its undo;
- ``again``: a scan with nothing changed by a new process on that store, as each ``turnback exec`` or hook
  process pays it (the cache decoded, the tree walked by split processes);
- ``plain``: the same tree without ``.git``: its first snapshot, read by forked workers, and a scan with nothing
  changed.

For each phase: the process's resident size when it starts, its own peak during it (``VmHWM``, reset when the
phase starts through ``/proc/self/clear_refs``), and, sampled every 5 ms from outside, its resident size plus
the pages its forked scan processes hold of their own (``sidebyside.py``'s method). A phase's peak is the
larger. The background copy of git objects (``turnback _adopt``, started by the first snapshot) is turnback's
process too, on the user's machine: its own peak (``VmHWM``, sampled every 5 ms while it runs) is a row of its
own, and counts in the scenario's peak (the largest of its phases' and the copy's). ``--tracemalloc`` adds
the peak of Python's own allocations per phase (slower; its bookkeeping inflates the resident figures).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import sidebyside as sbs
from benchutil import positive, temp_base

DEFAULT_FILES = sbs.MEMORY_FILES
SCENARIOS: dict[str, tuple[str, ...]] = {
    "checkout": ("cold", "adopt", "nochange", "bulk", "undo"),
    "again": ("nochange",),
    "plain": ("cold", "nochange"),
}
SCENARIO_WHAT = {
    "checkout": "a clean git checkout, in one process (sidebyside.py's peak-memory sequence)",
    "again": "the same store, a new process",
    "plain": "a plain folder (no .git), a new store",
}
PHASE_WHAT = {
    "cold": "first snapshot",
    "adopt": "wait for the copy of git objects",
    "nochange": "scan, nothing changed",
    "bulk": "bulk change by a command",
    "undo": "undo of the bulk change",
}
ADOPT_WHAT = "background copy of git objects (its own process)"


@dataclass
class Phase:
    scenario: str
    name: str
    seconds: float = 0.0
    start_bytes: int = 0  # the process's resident size when the phase started
    own_peak_bytes: int = 0  # its own peak during the phase (VmHWM since the phase started)
    own_peak_since_start: bool = True  # False: VmHWM could not be reset, so this is the process's peak so far
    forked_bytes: int = 0  # the most its forked scan processes held of their own at once
    with_forked_bytes: int = 0  # the most its resident size plus those held at once
    traced_peak_bytes: int | None = None  # tracemalloc's peak during the phase

    @property
    def peak_bytes(self) -> int:
        return max(self.own_peak_bytes, self.with_forked_bytes)


# -- in the measured process -----------------------------------------------------------------------


def status_bytes(field: str) -> int:
    return (sbs.proc_fields("/proc/self/status", (field,)) or {}).get(field, 0)


def reset_peak() -> bool:
    """Reset this process's VmHWM to its resident size now (Linux: "5" into clear_refs); whether it could."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


def phase_child(spec: dict[str, Any]) -> None:
    """Run one scenario's phases, saying on the report pipe when each starts and what it took when it ends."""
    # As sidebyside.py's peak_child: children by fork + exec, so that none shares (and is counted with) this heap.
    subprocess._USE_VFORK = False  # type: ignore[misc]
    subprocess._USE_POSIX_SPAWN = False  # type: ignore[misc]
    report = os.fdopen(spec["report_fd"], "w", encoding="utf-8")

    def say(**message: Any) -> None:
        report.write(json.dumps(message) + "\n")
        report.flush()

    traced = bool(spec["tracemalloc"])
    if traced:
        tracemalloc.start()
    say(event="ready", resident_bytes=status_bytes("VmRSS"))
    tree = Path(spec["tree"])
    side = sbs.TurnbackSide(Path(spec["store"]), tree)
    turn: list[int] = []

    def bulk() -> None:
        turn.append(side.begin_turn("bulk"))
        call_id = side.begin_command()
        sbs.apply_staged(tree, Path(spec["staged"]))
        side.finish_command(call_id)
        side.end_turn()

    actions: dict[str, Callable[[], object]] = {
        "cold": side.scan,
        "adopt": side.wait_adopted,
        "nochange": side.scan,
        "bulk": bulk,
        "undo": lambda: side.undo_from(turn[0]),
    }
    try:
        for name in SCENARIOS[spec["scenario"]]:
            since_start = reset_peak()
            if traced:
                tracemalloc.reset_peak()
            say(event="start", phase=name, resident_bytes=status_bytes("VmRSS"), since_start=since_start)
            seconds, _ = sbs.timed(actions[name])
            say(
                event="end",
                phase=name,
                seconds=seconds,
                own_peak_bytes=status_bytes("VmHWM"),
                traced_peak_bytes=tracemalloc.get_traced_memory()[1] if traced else None,
            )
    finally:
        side.close()
        report.close()


# -- the measuring process ---------------------------------------------------------------------------


@dataclass
class ScenarioRun:
    scenario: str
    baseline_bytes: int  # the process's resident size once it has imported everything
    phases: list[Phase]
    adopt_peak_bytes: int  # the background copy of git objects (a process of its own), 0 when none was seen

    @property
    def peak_bytes(self) -> int:
        """The scenario's peak: the largest of its phases' and its background copy's."""
        return max([self.adopt_peak_bytes, *(phase.peak_bytes for phase in self.phases)])


def run_scenario(scenario: str, spec: dict[str, Any]) -> ScenarioRun:
    """Run *scenario* in a fresh process of this script, sampling its forked scan processes every 5 ms."""
    found, report_fd = os.pipe()
    argv = [sys.executable, str(Path(__file__).resolve()), "_phases"]
    payload = spec | {"scenario": scenario, "report_fd": report_fd}
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([*argv, json.dumps(payload)], pass_fds=(report_fd,), stdout=err, stderr=err)
        os.close(report_fd)
        run = ScenarioRun(scenario, 0, [], 0)
        current: Phase | None = None
        pending = b""
        with selectors.DefaultSelector() as selector:
            selector.register(found, selectors.EVENT_READ)
            while selector.get_map():
                if selector.select(sbs.SPLIT_SAMPLE_S):
                    data = os.read(found, 1 << 16)
                    if not data:
                        selector.unregister(found)
                    pending += data
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        current = take_message(run, current, json.loads(line))
                sampled = sbs.split_sample(proc.pid)
                if current is not None and sampled is not None:
                    resident, forked = sampled
                    if forked:
                        current.forked_bytes = max(current.forked_bytes, forked)
                        current.with_forked_bytes = max(current.with_forked_bytes, resident + forked)
                run.adopt_peak_bytes = max(run.adopt_peak_bytes, sbs.adopt_peak(proc.pid))
        os.close(found)
        if proc.wait() != 0:
            err.seek(0)
            raise RuntimeError(f"the {scenario} process failed: {err.read().decode()[-3000:]}")
    return run


def take_message(run: ScenarioRun, current: Phase | None, message: dict[str, Any]) -> Phase | None:
    """Note one message of the measured process; the phase running after it."""
    if message["event"] == "ready":
        run.baseline_bytes = message["resident_bytes"]
        return None
    if message["event"] == "start":
        phase = Phase(run.scenario, message["phase"], start_bytes=message["resident_bytes"])
        phase.own_peak_since_start = message["since_start"]
        run.phases.append(phase)
        return phase
    assert current is not None and current.name == message["phase"]
    current.seconds = message["seconds"]
    current.own_peak_bytes = message["own_peak_bytes"]
    current.traced_peak_bytes = message["traced_peak_bytes"]
    return None


def render(runs: list[ScenarioRun], info: sbs.TreeInfo, load: tuple[str, str]) -> str:
    traced = any(phase.traced_peak_bytes is not None for run in runs for phase in run.phases)
    lines = [
        f"peak memory, phase by phase: a generated tree of {info.files:,} files ({info.entries:,} entries, "
        f"{sbs.fmt_bytes(info.bytes)}); {os.cpu_count()} CPUs, load average {load[0]} at start, {load[1]} at end",
        "",
    ]
    header = ["scenario", "phase", "time", "resident at start", "own peak", "forked own", "resident + forked", "peak"]
    header += ["Python's own peak (tracemalloc)"] if traced else []
    rows: list[list[str]] = []
    for run in runs:
        rows.append([run.scenario, "Python and imports", "", sbs.fmt_bytes(run.baseline_bytes), "", "", "", ""])
        rows[-1] += [""] if traced else []
        for phase in run.phases:
            own = sbs.fmt_bytes(phase.own_peak_bytes) + ("" if phase.own_peak_since_start else " (so far)")
            rows.append(
                [
                    "",
                    PHASE_WHAT[phase.name],
                    sbs.fmt_s(phase.seconds),
                    sbs.fmt_bytes(phase.start_bytes),
                    own,
                    sbs.fmt_bytes(phase.forked_bytes) if phase.forked_bytes else "-",
                    sbs.fmt_bytes(phase.with_forked_bytes) if phase.forked_bytes else "-",
                    sbs.fmt_bytes(phase.peak_bytes),
                ]
            )
            if traced:
                rows[-1].append(sbs.fmt_bytes(phase.traced_peak_bytes or 0))
        if run.adopt_peak_bytes:
            peak = sbs.fmt_bytes(run.adopt_peak_bytes)
            rows.append(["", ADOPT_WHAT, "", "", peak, "-", "-", peak])
            rows[-1] += [""] if traced else []
    lines += sbs.text_table(header, rows)
    lines.append("")
    for run in runs:
        lines.append(f"{run.scenario}: {SCENARIO_WHAT[run.scenario]}")
    target = sbs.TARGET_PEAK_BYTES
    checkout, everywhere = runs[0], max(runs, key=lambda run: run.peak_bytes)
    met = "met" if everywhere.peak_bytes <= target else "MISSED"
    at = "" if info.files == sbs.MEMORY_FILES else f" (this tree has {info.files:,} files: provisional)"
    lines += [
        "",
        f"peak of the checkout's phases and its background copy (what sidebyside.py reports): "
        f"{sbs.fmt_bytes(checkout.peak_bytes)}, in {where_peak(checkout)}",
        f"peak of every phase and background copy: {sbs.fmt_bytes(everywhere.peak_bytes)}, in {everywhere.scenario} "
        f"{where_peak(everywhere)}; target ≤ {target / 1e6:.0f} MB on the {sbs.MEMORY_FILES:,}-file tree: {met}{at}",
    ]
    return "\n".join(lines)


def where_peak(run: ScenarioRun) -> str:
    """The phase (or the background copy) where *run* reached its peak."""
    top = max(run.phases, key=lambda phase: phase.peak_bytes)
    return f"'{ADOPT_WHAT}'" if run.adopt_peak_bytes > top.peak_bytes else f"'{PHASE_WHAT[top.name]}'"


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["_phases"]:
        phase_child(json.loads(args_in[1]))
        return 0
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--files", type=positive, default=DEFAULT_FILES, help=f"tree size (default {DEFAULT_FILES:,})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated tree and the edits (default 0)")
    parser.add_argument("--dir", metavar="DIR", help="make the temp folder in DIR (default: the system temp dir)")
    parser.add_argument("--tracemalloc", action="store_true", help="also trace Python's own allocations per phase")
    parser.add_argument("--json", metavar="PATH", help="where the figures go (default benchmarks/results/memory.json)")
    args = parser.parse_args(args_in)
    if args.files < 100:
        parser.error("the tree needs at least 100 files")

    text = sbs.TextSource(args.seed)
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    runs: list[ScenarioRun] = []
    with temp_base(args.dir, "turnback-memory-") as base:
        master, info = sbs.prepare_tree(base, args.files, None, args.seed, text, plain=False)
        tree = base / "tree"
        sbs.copy_project(master, tree, info)
        edits, creates, deletes = sbs.bulk_counts(info.files)
        rng = random.Random(f"peak:{args.seed}:{info.label}")
        change = sbs.make_change(
            sbs.EditState(info.editable), rng, text, tree, edits=edits, creates=creates, deletes=deletes, tag="peak"
        )
        sbs.stage_change(base / "staged", change)
        del change
        spec = {"tree": str(tree), "store": str(base / "store"), "staged": str(base / "staged")}
        spec["tracemalloc"] = args.tracemalloc
        for scenario in ("checkout", "again"):
            sbs.progress(f"memory: {scenario} ({SCENARIO_WHAT[scenario]})")
            runs.append(run_scenario(scenario, spec))
        shutil.rmtree(tree)
        plain = base / "plain"
        sbs.copy_tree(master, plain, skip_git=True)
        sbs.progress(f"memory: plain ({SCENARIO_WHAT['plain']})")
        runs.append(run_scenario("plain", spec | {"tree": str(plain), "store": str(base / "plain-store")}))
    load = (load_start, " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(render(runs, info, load))
    json_path = Path(args.json or here / "results" / "memory.json")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    figures = {
        "schema": 1,
        "command": " ".join(["benchmarks/memory.py", *args_in]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load": load,
        "tree": info.public(),
        "runs": [
            asdict(run)
            | {"peak_bytes": run.peak_bytes, "phases": [asdict(p) | {"peak_bytes": p.peak_bytes} for p in run.phases]}
            for run in runs
        ],
    }
    json_path.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(f"\nfigures written to {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

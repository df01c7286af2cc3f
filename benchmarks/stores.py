"""Benchmark the two stores: a recorded file-tool write into SQLite against the same into PostgreSQL on loopback.

For each store, two loads:

1. One session: ``--calls`` recorded ``Engine.write`` calls of a 10 KB file, one after the other.
2. ``--sessions`` sessions at once: ``--processes`` processes (each its own host to a shared store), each
   writing ``--per-session`` calls into each of its sessions in turn, all started together.

It prints file-tool calls per second and the p50 and p99 latency of one recorded write, per round and over
all rounds (``--rounds``: the stores take turns in each round, so a machine that other work loads loads
both alike), PostgreSQL's calls per second as a share of SQLite's, and the load average. ``--compare-src
DIR`` runs the PostgreSQL loads a third time with the turnback of another tree (``DIR/src``: the code before
a change), in the same rounds. The PostgreSQL server is ``--url``, else a throwaway one started from the
installed server programs (``tests/pgserver.py``, as the tests start it: ``-F``, so its commits do not wait
for the disk, as SQLite's do). Run it from the repository root::

    .venv/bin/python benchmarks/stores.py [--calls N] [--sessions N] [--processes N] [--per-session N]
        [--rounds N] [--compare-src DIR]

The target (issue 17): with 100 sessions, PostgreSQL manages as many calls per second as SQLite (100%).

It only reports. Everything it writes lives in a temp folder removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchutil import positive

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
KEY_SECRET = "turnback-benchmark-secret"

WRITER = """
import json, os, sys, time
sys.path.insert(0, {src!r})
sys.path.insert(0, {bench!r})
import turnback
from benchutil import Content

url, home, project, host, sessions, per_session, gate = sys.argv[1:8]
content = Content(int.from_bytes(host.encode(), "little") % 1000)
with turnback.Engine.open(home, key_secret={key!r}, try_keyring=False, store_url=url or None, host_id=host) as engine:
    made = [engine.new_session(project, title=f"bench {{n}}") for n in range(int(sessions))]
    for session in made:
        engine.begin_turn(session.id, "bench")
    while not os.path.exists(gate):
        time.sleep(0.001)
    latencies = []
    for i in range(int(per_session)):
        for n, session in enumerate(made):
            data = content()
            started = time.perf_counter_ns()
            engine.write(session.id, f"s{{n}}/f{{i % 5}}.txt", data)
            latencies.append(time.perf_counter_ns() - started)
    for session in made:
        engine.end_turn(session.id)
print(json.dumps(latencies))
"""


def _run(url: str, base: Path, processes: int, sessions: int, per_session: int, src: Path) -> tuple[float, list[int]]:
    """Start *processes* writers at once (turnback from *src*); the calls per second of them all, and every
    call's latency (ns)."""
    gate = base / "go"
    script = WRITER.format(src=str(src), bench=str(ROOT / "benchmarks"), key=KEY_SECRET)
    writers = []
    home = base / "home"  # one store folder for a SQLite store: the processes share its file
    for index in range(processes):
        project = base / f"project-{index}"
        project.mkdir()
        folder = home if not url else base / f"home-{index}"  # a shared store: each host its own folder
        args = [url, str(folder), str(project), f"host-{index}", str(sessions), str(per_session), str(gate)]
        writers.append(subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True))
    time.sleep(1.0 + 0.2 * processes)  # every writer has opened its store and begun its turns
    started = time.perf_counter()
    gate.touch()
    latencies: list[int] = []
    for writer in writers:
        out, _ = writer.communicate()
        if writer.returncode != 0:
            raise SystemExit(f"a writer failed (exit {writer.returncode})")
        latencies += json.loads(out)
    return len(latencies) / (time.perf_counter() - started), latencies


def _percentile(samples: list[int], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] / 1e6


def _load_average() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=positive, default=300, help="calls of the one-session load")
    parser.add_argument("--sessions", type=positive, default=100, help="sessions of the concurrent load")
    parser.add_argument("--processes", type=positive, default=10, help="processes that share them")
    parser.add_argument("--per-session", type=positive, default=10, help="calls into each session")
    parser.add_argument("--rounds", type=positive, default=1, help="rounds, the stores taking turns in each")
    parser.add_argument("--compare-src", type=Path, metavar="DIR", help="also PostgreSQL with DIR/src's turnback")
    parser.add_argument("--url", help="a PostgreSQL database to use (default: a throwaway server)")
    args = parser.parse_args()
    server = None
    url = args.url
    if url is None:
        from tests.pgserver import start_server

        server = start_server()
        url = server.url()
    stores = [("SQLite", "", ROOT / "src"), ("PostgreSQL", url, ROOT / "src")]
    if args.compare_src is not None:
        stores.append(("PostgreSQL*", url, args.compare_src.resolve() / "src"))  # * the other tree's code
    loads = [
        ("1 session", 1, 1, args.calls),
        (f"{args.sessions} sessions", args.processes, args.sessions // args.processes, args.per_session),
    ]
    rates: dict[tuple[str, str], list[float]] = {}
    samples: dict[tuple[str, str], list[int]] = {}
    print(f"load average {_load_average()}", flush=True)
    try:
        for round_number in range(1, args.rounds + 1):
            for label, processes, sessions, per_session in loads:
                for name, store_url, src in stores:
                    base = Path(tempfile.mkdtemp(prefix="turnback-bench-stores-"))
                    try:
                        if server is not None and store_url:
                            store_url = server.url(server.schema_for(base))
                        rate, latencies = _run(store_url, base, processes, sessions, per_session, src)
                    finally:
                        shutil.rmtree(base, ignore_errors=True)
                    rates.setdefault((name, label), []).append(rate)
                    samples.setdefault((name, label), []).extend(latencies)
                    figures = _figures(rate, latencies)
                    print(f"round {round_number}  {name:<11} {label:<13} {figures}", flush=True)
        print(f"all rounds (calls/s: the median round)   load average {_load_average()}")
        for label, *_ in loads:
            for name, *_ in stores:
                print(f"{name:<11} {label:<13} {_figures(statistics.median(rates[name, label]), samples[name, label])}")
            sqlite = statistics.median(rates["SQLite", label])
            for name, *_ in stores[1:]:
                share = statistics.median(rates[name, label]) / sqlite
                print(f"{name:<11} {label:<13} {share:7.0%} of SQLite's calls/s (target: 100%)")
    finally:
        if server is not None:
            server.ctl("stop", "-m", "immediate")
            shutil.rmtree(server.folder, ignore_errors=True)


def _figures(rate: float, latencies: list[int]) -> str:
    p50, p99 = statistics.median(latencies) / 1e6, _percentile(latencies, 0.99)
    return f"{rate:7.0f} calls/s   p50 {p50:6.2f} ms   p99 {p99:7.2f} ms   ({len(latencies)} calls)"


if __name__ == "__main__":
    main()

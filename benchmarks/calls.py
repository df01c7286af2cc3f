"""Benchmark turnback's two hot paths and print the figures against their targets.

1. A recorded ``Engine.write`` of a 10 KB file against a plain atomic write
   of the same bytes (temp file in the same folder, write, fsync,
   ``os.replace``, fsync the folder). Target: recording adds under 2 ms per call.
2. Planning and applying the undo of a turn that wrote 100 files of about
   10 KB (half overwrites, half new files). Target: a 100-file undo under 0.5 s.

Run it from the repository root::

    .venv/bin/python benchmarks/calls.py [--rounds N] [--undo-rounds N] [--json PATH] [--profile N]

It only reports: it never fails because a target is missed. Everything it
writes lives in a temp folder that is removed at the end. ``--dir`` puts that
folder elsewhere (the file system matters: fsync on tmpfs is free).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from benchutil import FILE_SIZE, Content, Spread, file_system_of, non_negative, plural, positive, temp_base

import turnback

ROTATING_PATHS = 5
CALLS_PER_TURN = 20
UNDO_FILES = 100
UNDO_FOLDERS = 5
KEY_SECRET = "turnback-benchmark-secret"
TARGET_OVERHEAD_MS = 2.0
TARGET_UNDO_S = 0.5


# -- helpers -------------------------------------------------------------------------------------


def plain_atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """The baseline: temp file in the same folder, write, fsync, rename over, fsync the folder."""
    folder = path.parent
    temp = folder / f".plain-{os.getpid()}-{random.getrandbits(48):012x}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def timed_ns(action: Callable[[], object]) -> int:
    start = time.perf_counter_ns()
    action()
    return time.perf_counter_ns() - start


def open_engine(base: Path) -> turnback.Engine:
    return turnback.Engine.open(str(base / "store"), key_secret=KEY_SECRET, try_keyring=False)


# -- 1. recorded write against plain write -------------------------------------------------------


@dataclass(frozen=True)
class WriteFigures:
    rounds: int
    warmup: int
    file_bytes: int
    recorded_ms: Spread
    plain_ms: Spread
    overhead_ms: float
    ratio: float


class TurnRunner:
    """A session in a project whose writes are grouped into turns of ``CALLS_PER_TURN`` calls."""

    def __init__(self, engine: turnback.Engine, project: Path):
        self.engine = engine
        self.project = project
        self.session = engine.new_session(str(project), title="benchmark")
        self._calls = 0
        self._open = False

    def before_call(self) -> None:
        """Begin a new turn every ``CALLS_PER_TURN`` calls (outside any timed region)."""
        if self._calls % CALLS_PER_TURN == 0:
            self.end()
            self.engine.begin_turn(self.session.id, f"turn {self._calls // CALLS_PER_TURN + 1}")
            self._open = True
        self._calls += 1

    def write(self, rel: str, data: bytes) -> None:
        self.engine.write(self.session.id, rel, data, cwd=str(self.project))

    def end(self) -> None:
        if self._open:
            self.engine.end_turn(self.session.id)
            self._open = False


def bench_writes(base: Path, rounds: int, warmup: int, content: Content) -> WriteFigures:
    recorded_root = base / "recorded"
    plain_root = base / "plain"
    for root in (recorded_root, plain_root):
        (root / "src").mkdir(parents=True)
    rels = [f"src/module_{i}.py" for i in range(ROTATING_PATHS)]
    recorded_ns: list[int] = []
    plain_ns: list[int] = []
    engine = open_engine(base)
    try:
        runner = TurnRunner(engine, recorded_root)
        for i in range(warmup + rounds):
            rel = rels[i % len(rels)]
            data = content()
            runner.before_call()

            def recorded(rel: str = rel, data: bytes = data) -> None:
                runner.write(rel, data)

            def plain(rel: str = rel, data: bytes = data) -> None:
                plain_atomic_write(plain_root / rel, data)

            # Alternate which goes first so neither always follows the other's fsyncs.
            if i % 2:
                t_plain, t_recorded = timed_ns(plain), timed_ns(recorded)
            else:
                t_recorded, t_plain = timed_ns(recorded), timed_ns(plain)
            if i >= warmup:
                recorded_ns.append(t_recorded)
                plain_ns.append(t_plain)
        runner.end()
    finally:
        engine.close()
    rec, pla = Spread.of_ns(recorded_ns), Spread.of_ns(plain_ns)
    return WriteFigures(
        rounds=rounds,
        warmup=warmup,
        file_bytes=FILE_SIZE,
        recorded_ms=rec,
        plain_ms=pla,
        overhead_ms=rec.median - pla.median,
        ratio=rec.median / pla.median if pla.median else float("inf"),
    )


# -- 2. undo of a 100-file turn ------------------------------------------------------------------


@dataclass(frozen=True)
class UndoFigures:
    rounds: int
    files: int
    restored: int
    trashed: int
    plan_ms: Spread
    apply_ms: Spread
    total_ms: Spread


def bench_undo(base: Path, rounds: int, content: Content) -> UndoFigures:
    """Each round writes a fresh 100-file turn (50 overwrites, 50 new files), then plans and applies its undo.

    The files are spread over a few folders that exist before the turn, so the plan has exactly one row
    per file. Each round checks that the undo restored and trashed what it should (not its timing).
    """
    project = base / "undo"
    overwrite_rels = [f"pkg_{i % UNDO_FOLDERS}/existing_{i}.py" for i in range(UNDO_FILES // 2)]
    originals: dict[str, bytes] = {}
    for rel in overwrite_rels:
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        originals[rel] = content()
        (project / rel).write_bytes(originals[rel])
    plan_ns: list[int] = []
    apply_ns: list[int] = []
    total_ns: list[int] = []
    restored = trashed = 0
    engine = open_engine(base)
    try:
        for round_no in range(rounds + 1):  # round 0 warms up
            # A fresh session each round: plan_undo reads the whole session's history, so reusing
            # one session would make later rounds slower and the figure depend on --undo-rounds.
            session = engine.new_session(str(project), title=f"undo benchmark {round_no}")
            engine.begin_turn(session.id, f"write {UNDO_FILES} files")
            for i in range(UNDO_FILES):
                # Even calls overwrite a file that existed before the turn, odd calls make a new one.
                rel = overwrite_rels[i // 2] if i % 2 == 0 else f"pkg_{i % UNDO_FOLDERS}/new_{round_no}_{i}.py"
                engine.write(session.id, rel, content(), cwd=str(project))
            engine.end_turn(session.id)

            start = time.perf_counter_ns()
            plan = engine.plan_undo(session.id)
            planned = time.perf_counter_ns()
            result = engine.apply(plan)
            applied = time.perf_counter_ns()

            restored, trashed = result.count("restore"), result.count("trash")
            if (restored, trashed) != (UNDO_FILES // 2, UNDO_FILES // 2):
                raise RuntimeError(f"undo did not do what the benchmark expects: {restored=} {trashed=}")
            for rel, data in originals.items():
                if (project / rel).read_bytes() != data:
                    raise RuntimeError(f"undo did not restore {rel}")
            if round_no:
                plan_ns.append(planned - start)
                apply_ns.append(applied - planned)
                total_ns.append(applied - start)
    finally:
        engine.close()
    return UndoFigures(
        rounds=rounds,
        files=UNDO_FILES,
        restored=restored,
        trashed=trashed,
        plan_ms=Spread.of_ns(plan_ns),
        apply_ms=Spread.of_ns(apply_ns),
        total_ms=Spread.of_ns(total_ns),
    )


# -- profile of the recorded-write path ----------------------------------------------------------


def profile_writes(base: Path, calls: int, top: int, content: Content) -> str:
    """cProfile of *calls* recorded writes (after a warm-up), top functions by cumulative and own time."""
    project = base / "profiled"
    (project / "src").mkdir(parents=True)
    rels = [f"src/module_{i}.py" for i in range(ROTATING_PATHS)]
    engine = open_engine(base)
    profiler = cProfile.Profile()
    try:
        runner = TurnRunner(engine, project)
        for i in range(20 + calls):
            data = content()
            runner.before_call()
            if i < 20:
                runner.write(rels[i % len(rels)], data)
                continue
            profiler.enable()
            runner.write(rels[i % len(rels)], data)
            profiler.disable()
        runner.end()
    finally:
        engine.close()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs()
    out.write(f"profile of {calls} recorded writes, by cumulative time\n")
    stats.sort_stats("cumulative").print_stats(top)
    out.write(f"profile of {calls} recorded writes, by own time\n")
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


# -- report --------------------------------------------------------------------------------------


def row(label: str, spread: Spread | None = None, note: str = "", value: float | None = None) -> str:
    if spread is None:
        shown = f"{value:>10.2f}" if value is not None else f"{'':>10}"
        return f"  {label:<28}{shown}{'':>10}{'':>10}  {note}".rstrip()
    figures = f"{spread.median:>10.2f}{spread.p10:>10.2f}{spread.p90:>10.2f}"
    return f"  {label:<28}{figures}  {note}".rstrip()


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def report(env: dict[str, object], writes: WriteFigures, undo: UndoFigures) -> tuple[str, dict[str, object]]:
    overhead_met = writes.overhead_ms < TARGET_OVERHEAD_MS
    undo_s = undo.total_ms.median / 1000
    undo_met = undo_s < TARGET_UNDO_S
    lines = [
        f"turnback {env['turnback']} · Python {env['python']} · {env['platform']}",
        f"{env['cpus']} CPUs · temp dir on {env['file_system']} · 1-minute load average "
        f"{env['load_average_1min_start']} at start, {env['load_average_1min_end']} at end",
        "",
        f"  {'(ms)':<28}{'median':>10}{'p10':>10}{'p90':>10}",
        f"write {writes.file_bytes // 1024} KB, {plural(writes.rounds, 'round')} after {writes.warmup} warm-up",
        row("recorded engine.write", writes.recorded_ms),
        row("plain atomic write", writes.plain_ms),
        row(
            "overhead per call",
            value=writes.overhead_ms,
            note=f"(median − median; recorded/plain {writes.ratio:.1f}x)",
        ),
        f"undo of a {undo.files}-file turn ({undo.restored} restored, {undo.trashed} trashed), "
        f"{plural(undo.rounds, 'round')} after 1 warm-up",
        row("plan_undo", undo.plan_ms),
        row("apply", undo.apply_ms),
        row("plan + apply", undo.total_ms),
        "",
        f"recording overhead: {writes.overhead_ms:.2f} ms per call "
        f"(target < {TARGET_OVERHEAD_MS:g} ms, 'recording adds under 2 ms per call'): {verdict(overhead_met)}",
        f"100-file undo: {undo_s:.3f} s (target < {TARGET_UNDO_S:g} s, 'a 100-file undo under 0.5 s'): "
        f"{verdict(undo_met)}",
    ]
    figures: dict[str, object] = {
        "schema": 1,
        "environment": env,
        "write": asdict(writes),
        "undo": asdict(undo),
        "targets": {
            "recording_overhead": {"value_ms": writes.overhead_ms, "limit_ms": TARGET_OVERHEAD_MS, "met": overhead_met},
            "undo_100_files": {"value_s": undo_s, "limit_s": TARGET_UNDO_S, "met": undo_met},
        },
    }
    return "\n".join(lines), figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=positive, default=300, help="timed writes of each kind (default 300)")
    parser.add_argument("--warmup", type=non_negative, default=30, help="untimed writes first (default 30)")
    parser.add_argument("--undo-rounds", type=positive, default=7, help="timed 100-file undos (default 7)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    parser.add_argument("--dir", metavar="DIR", help="make the temp folder in DIR (default: the system temp dir)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random content (default 0)")
    parser.add_argument(
        "--profile",
        type=non_negative,
        metavar="N",
        default=0,
        help="also cProfile N recorded writes and print the top functions",
    )
    args = parser.parse_args(argv)

    content = Content(args.seed)
    with temp_base(args.dir, "turnback-bench-") as base:
        env: dict[str, object] = {
            "turnback": turnback.__version__,
            "python": platform.python_version(),
            "platform": platform.platform(terse=True),
            "cpus": os.cpu_count(),
            "file_system": file_system_of(base),
            "load_average_1min_start": round(os.getloadavg()[0], 2),
        }
        writes = bench_writes(base / "writes", args.rounds, args.warmup, content)
        undo = bench_undo(base / "undo", args.undo_rounds, content)
        env["load_average_1min_end"] = round(os.getloadavg()[0], 2)
        profile = profile_writes(base / "profile", args.profile, 25, content) if args.profile else ""

    text, figures = report(env, writes, undo)
    print(text)
    if profile:
        print()
        print(profile)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        print(f"\nfigures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

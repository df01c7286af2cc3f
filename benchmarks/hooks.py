"""Benchmark Claude Code's hook path: a PreToolUse + PostToolUse pair around a 10 KB Write, each a real process.

Claude Code starts ``turnback hook claude-code`` once per event, with the event
as JSON on stdin, and waits for it: the agent's tool call is that much slower.
Each round times, as wall time of the whole process, the PreToolUse hook of a
Write of a fresh 10 KB file, then writes the file (as Claude Code does, not
timed), then times the PostToolUse hook. Target: the pair under 120 ms median,
Python start-up included. For reference the same loop times ``python -c pass``
(the interpreter's start-up alone) and a hook given an event it ignores
(start-up, imports and parsing, no store).

Run it from the repository root::

    .venv/bin/python benchmarks/hooks.py [--rounds N] [--warmup N] [--json PATH] [--turnback PATH] [--dir DIR]

It only reports: it never fails because the target is missed (it does fail
when a hook misbehaves or the calls were not recorded). Everything it writes
lives in a temp folder (project and store) that is removed at the end; the
hooks run with a cleared environment, a temp ``HOME``, ``TURNBACK_HOME``,
``TURNBACK_KEY`` and ``TURNBACK_NO_KEYRING=1``, so the user's store and
keyring are never touched.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from benchutil import FILE_SIZE, Content, Spread, file_system_of, non_negative, plural, positive, temp_base

ROTATING_PATHS = 5
CALLS_PER_TURN = 20
KEY_SECRET = "turnback-benchmark-secret"
TARGET_PAIR_MS = 120.0
SESSION_ID = "benchmark-session"
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Figures:
    rounds: int
    warmup: int
    file_bytes: int
    pre_ms: Spread
    post_ms: Spread
    pair_ms: Spread
    python_startup_ms: Spread
    ignored_event_ms: Spread


def find_turnback(given: str | None) -> Path:
    """The installed ``turnback`` console script: --turnback, else the repository's .venv, else PATH."""
    candidates = [given] if given else [str(ROOT / ".venv" / "bin" / "turnback"), shutil.which("turnback")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return Path(candidate).absolute()
    raise SystemExit("no turnback script found: make the .venv (make test) or give --turnback PATH")


def interpreter_of(script: Path) -> str:
    """The Python the console script runs on (its #! line), else this one."""
    try:
        with script.open("rb") as handle:
            first = handle.readline().decode("utf-8", "replace").strip()
    except OSError:
        return sys.executable
    if first.startswith("#!"):
        words = first[2:].split()
        if words and os.access(words[0], os.X_OK) and "python" in os.path.basename(words[0]):
            return words[0]
    return sys.executable


class Hooks:
    """Claude Code's side: one ``turnback hook claude-code`` process per event, timed as a whole."""

    def __init__(self, turnback: Path, base: Path):
        self.turnback = turnback
        self.project = base / "project"
        self.project.mkdir()
        (self.project / "src").mkdir()
        (base / "home").mkdir()
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(base / "home"),
            "LANG": "C.UTF-8",
            "TURNBACK_HOME": str(base / "store"),
            "TURNBACK_KEY": KEY_SECRET,
            "TURNBACK_NO_KEYRING": "1",
        }
        self._uses = 0

    def event(self, name: str, **fields: object) -> bytes:
        data: dict[str, object] = {
            "session_id": SESSION_ID,
            "transcript_path": str(self.project.parent / "transcript.jsonl"),
            "cwd": str(self.project),
            "permission_mode": "default",
            "hook_event_name": name,
            **fields,
        }
        return json.dumps(data).encode("utf-8")

    def run(self, command: list[str], stdin: bytes = b"") -> tuple[int, str]:
        """Run *command* to its end; its wall time in ns and what it printed (a hook's Stop prints a line)."""
        start = time.perf_counter_ns()
        done = subprocess.run(command, input=stdin, capture_output=True, cwd=self.project, env=self.env, timeout=120)
        elapsed = time.perf_counter_ns() - start
        if done.returncode != 0 or done.stderr:
            raise RuntimeError(f"{command} exited {done.returncode}: {done.stderr.decode('utf-8', 'replace')}")
        return elapsed, done.stdout.decode("utf-8", "replace")

    def hook(self, stdin: bytes) -> tuple[int, str]:
        return self.run([str(self.turnback), "hook", "claude-code"], stdin)

    def quiet_hook(self, stdin: bytes) -> int:
        elapsed, out = self.hook(stdin)
        if out:
            raise RuntimeError(f"the hook printed {out!r} where it should print nothing")
        return elapsed

    def write_pair(self, rel: str, data: bytes) -> tuple[int, int]:
        """PreToolUse, the write (Claude Code's own, untimed), PostToolUse: the two hooks' wall times."""
        self._uses += 1
        path = self.project / rel
        text = data.decode("ascii")
        tool_input = {"file_path": str(path), "content": text}
        use_id = f"toolu_bench_{self._uses:06d}"
        pre = self.quiet_hook(self.event("PreToolUse", tool_name="Write", tool_input=tool_input, tool_use_id=use_id))
        path.write_bytes(data)
        post = self.quiet_hook(
            self.event(
                "PostToolUse",
                tool_name="Write",
                tool_input=tool_input,
                tool_use_id=use_id,
                tool_response={"type": "update", "filePath": str(path), "content": text},
            )
        )
        return pre, post

    def recorded_writes(self) -> tuple[int, int]:
        """How many Write calls the store holds, and how many of them are cut short (should be none)."""
        _, out = self.run([str(self.turnback), "log", "--json"])
        calls = [call for turn in json.loads(out)["turns"] for call in turn["calls"] if call["tool"] == "Write"]
        return len(calls), sum(1 for call in calls if call["cut_short"])


def bench(turnback: Path, base: Path, rounds: int, warmup: int, content: Content) -> Figures:
    hooks = Hooks(turnback, base)
    python = interpreter_of(turnback)
    rels = [f"src/module_{i}.py" for i in range(ROTATING_PATHS)]
    ignored = hooks.event("PreToolUse", tool_name="Read", tool_input={"file_path": str(hooks.project / rels[0])})
    pre_ns: list[int] = []
    post_ns: list[int] = []
    pair_ns: list[int] = []
    startup_ns: list[int] = []
    ignored_ns: list[int] = []
    hooks.quiet_hook(hooks.event("SessionStart", source="startup"))
    for i in range(warmup + rounds):
        if i % CALLS_PER_TURN == 0:  # a prompt every CALLS_PER_TURN writes, outside the timed region
            if i:
                hooks.hook(hooks.event("Stop", stop_hook_active=False))
            hooks.quiet_hook(hooks.event("UserPromptSubmit", prompt=f"write files, part {i // CALLS_PER_TURN + 1}"))
        pre, post = hooks.write_pair(rels[i % len(rels)], content())
        startup, _ = hooks.run([python, "-c", "pass"])
        skipped = hooks.quiet_hook(ignored)
        if i >= warmup:
            pre_ns.append(pre)
            post_ns.append(post)
            pair_ns.append(pre + post)
            startup_ns.append(startup)
            ignored_ns.append(skipped)
    hooks.hook(hooks.event("Stop", stop_hook_active=False))
    recorded, cut_short = hooks.recorded_writes()
    if (recorded, cut_short) != (warmup + rounds, 0):
        raise RuntimeError(f"expected {warmup + rounds} recorded writes, none cut short: {recorded=} {cut_short=}")
    return Figures(
        rounds=rounds,
        warmup=warmup,
        file_bytes=FILE_SIZE,
        pre_ms=Spread.of_ns(pre_ns),
        post_ms=Spread.of_ns(post_ns),
        pair_ms=Spread.of_ns(pair_ns),
        python_startup_ms=Spread.of_ns(startup_ns),
        ignored_event_ms=Spread.of_ns(ignored_ns),
    )


def row(label: str, spread: Spread) -> str:
    return f"  {label:<34}{spread.median:>10.1f}{spread.p10:>10.1f}{spread.p90:>10.1f}"


def report(env: dict[str, object], figures: Figures) -> tuple[str, dict[str, object]]:
    median = figures.pair_ms.median
    met = median < TARGET_PAIR_MS
    lines = [
        f"turnback {env['turnback']} · Python {env['python']} · {env['platform']}",
        f"{env['cpus']} CPUs · temp dir on {env['file_system']} · 1-minute load average "
        f"{env['load_average_1min_start']} at start, {env['load_average_1min_end']} at end",
        f"hook command: {env['hook_command']}",
        "",
        f"  {'(ms, wall time of whole processes)':<34}{'median':>10}{'p10':>10}{'p90':>10}",
        f"Write of {figures.file_bytes // 1024} KB, {plural(figures.rounds, 'round')} after {figures.warmup} warm-up",
        row("PreToolUse hook", figures.pre_ms),
        row("PostToolUse hook", figures.post_ms),
        row("pair (PreToolUse + PostToolUse)", figures.pair_ms),
        "reference",
        row("python -c pass", figures.python_startup_ms),
        row("hook, an event it ignores", figures.ignored_event_ms),
        "",
        f"hook pair: {median:.1f} ms median (target < {TARGET_PAIR_MS:g} ms including Python start-up): "
        f"{'met' if met else 'MISSED'}",
    ]
    data: dict[str, object] = {
        "schema": 1,
        "environment": env,
        "figures": asdict(figures),
        "target": {"hook_pair_median_ms": {"value_ms": median, "limit_ms": TARGET_PAIR_MS, "met": met}},
    }
    return "\n".join(lines), data


def turnback_version(python: str) -> str:
    done = subprocess.run(
        [python, "-c", "import turnback; print(turnback.__version__)"], capture_output=True, text=True, timeout=60
    )
    return done.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=positive, default=20, help="timed PreToolUse + PostToolUse pairs (default 20)")
    parser.add_argument("--warmup", type=non_negative, default=3, help="untimed pairs first (default 3)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    parser.add_argument("--turnback", metavar="PATH", help="the turnback script (default: .venv/bin/turnback)")
    parser.add_argument("--dir", metavar="DIR", help="make the temp folder in DIR (default: the system temp dir)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random content (default 0)")
    args = parser.parse_args(argv)

    turnback = find_turnback(args.turnback)
    python = interpreter_of(turnback)
    with temp_base(args.dir, "turnback-hook-bench-") as base:
        env: dict[str, object] = {
            "turnback": turnback_version(python),
            "python": platform.python_version(),
            "platform": platform.platform(terse=True),
            "cpus": os.cpu_count(),
            "file_system": file_system_of(base),
            "hook_command": f"{turnback} hook claude-code",
            "load_average_1min_start": round(os.getloadavg()[0], 2),
        }
        figures = bench(turnback, base, args.rounds, args.warmup, Content(args.seed))
        env["load_average_1min_end"] = round(os.getloadavg()[0], 2)

    text, data = report(env, figures)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        print(f"\nfigures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

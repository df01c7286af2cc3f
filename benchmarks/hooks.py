"""Benchmark Claude Code's hook path: every event of a scripted session, each a real hook process, timed whole.

Claude Code starts a hook process once per event, with the event as JSON on
stdin, and waits for it: the agent is that much slower. Each round is one
turn of a scripted session: UserPromptSubmit, a Write of a fresh 10 KB file
(PreToolUse, the write itself as Claude Code does it, untimed, PostToolUse),
a Bash ``ls`` (PreToolUse, PostToolUse), an Edit of that file, and Stop.
Each event is timed as the wall time of the whole hook process, from exec to
exit, Python's start-up included, for:

- the command ``turnback install`` writes (``PYTHON -S -I …/hooks/launch.py
  hook claude-code``), with the relay serving it: the target, every event
  at most 25 ms median;
- the console script (``turnback hook claude-code``: what older installs
  hold), with the relay;
- the console script with ``TURNBACK_HOOK_RELAY=0``: each hook does the work
  itself, as the first event of a session does;
- with ``--baseline PATH``, another turnback's console script with its relay
  (an older checkout's, for a before/after under the same load).

Each has its own store and project, and they take turns round by round, so
the machine's load falls on all of them alike. After each event the same
loop times the floors: ``python -c pass`` and ``python -S -I -c pass``, the
interpreter's start-up alone.

Run it from the repository root::

    .venv/bin/python benchmarks/hooks.py [--rounds N] [--warmup N] [--json PATH] [--turnback PATH]
        [--baseline PATH] [--dir DIR]

It only reports: it never fails because the target is missed (it does fail
when a hook misbehaves or the calls were not recorded). Everything it writes
lives in a temp folder (projects and stores) that is removed at the end (each
relay ends when its store is gone); the hooks run with a cleared
environment, a temp ``HOME``, ``TURNBACK_HOME``, ``TURNBACK_KEY`` and
``TURNBACK_NO_KEYRING=1``, so the user's store and keyring are never touched.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from benchutil import FILE_SIZE, Content, Spread, file_system_of, non_negative, plural, positive, temp_base

KEY_SECRET = "turnback-benchmark-secret"
TARGET_EVENT_MS = 25.0  # issue 18: any hook event handed to the relay, process start included
SESSION_ID = "benchmark-session"
RELAY_SOCKET = "hook-relay.sock"
ROOT = Path(__file__).resolve().parent.parent
# The events of one round, in order; "write" is where the file is written between its two hooks (untimed).
SCRIPT = (
    "UserPromptSubmit",
    "PreToolUse Write",
    "PostToolUse Write",
    "PreToolUse Bash",
    "PostToolUse Bash",
    "PreToolUse Edit",
    "PostToolUse Edit",
    "Stop",
)
FLOORS = {"python -c pass": ["-c", "pass"], "python -S -I -c pass": ["-S", "-I", "-c", "pass"]}


@dataclass(frozen=True)
class Timing:
    """A sample's fastest run besides its spread, in milliseconds: on a loaded machine the minimum says what
    the code costs, the median what an agent waits."""

    min: float
    spread: Spread

    @classmethod
    def of_ns(cls, samples_ns: list[int]) -> Timing:
        return cls(min(samples_ns) / 1e6, Spread.of_ns(samples_ns))


@dataclass(frozen=True)
class Variant:
    label: str
    command: list[str]
    relayed: bool
    python: str  # the interpreter of its turnback: its store is read back with it


@dataclass(frozen=True)
class Figures:
    rounds: int
    warmup: int
    file_bytes: int
    events_per_round: int
    per_event: dict[str, dict[str, Timing]]  # variant -> event -> timing
    all_events: dict[str, Timing]  # variant -> every timed event
    write_pair: dict[str, Timing]  # variant -> PreToolUse + PostToolUse of the Write
    floors: dict[str, Timing]


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


def installed_command(python: str) -> list[str]:
    """The hook command exactly as ``turnback install claude-code`` writes it into settings.json."""
    done = subprocess.run(
        [python, "-c", "from turnback.hooks.install import hook_command; print(hook_command())"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return shlex.split(done.stdout.strip())


class Session:
    """Claude Code's side for one variant: its own project and store, one hook process per event."""

    def __init__(self, variant: Variant, base: Path, content: Content):
        self.variant = variant
        self.project = base / "project"
        (self.project / "src").mkdir(parents=True)
        (base / "home").mkdir()
        self.store = base / "store"
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(base / "home"),
            "LANG": "C.UTF-8",
            "TURNBACK_HOME": str(self.store),
            "TURNBACK_KEY": KEY_SECRET,
            "TURNBACK_NO_KEYRING": "1",
            **({} if variant.relayed else {"TURNBACK_HOOK_RELAY": "0"}),
        }
        self.content = content
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

    def hook(self, stdin: bytes, *, prints: bool = False) -> int:
        elapsed, out = self.run(self.variant.command, stdin)
        if bool(out) != prints:
            raise RuntimeError(f"{self.variant.label}: the hook printed {out!r}")
        return elapsed

    def wait_for_relay(self, timeout: float = 30.0) -> None:
        """Until the relay the first event started listens (each timed event must find it)."""
        deadline = time.monotonic() + timeout
        while not (self.store / RELAY_SOCKET).exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.variant.label}: no hook relay after {timeout:g} s")
            time.sleep(0.05)

    def round(self, number: int) -> dict[str, int]:
        """One scripted turn: each event's wall time in ns."""
        self._uses += 1
        path = self.project / "src" / f"module_{number}.py"
        text = self.content(FILE_SIZE).decode("ascii")
        use = f"toolu_bench_{self._uses:06d}"
        write = {"file_path": str(path), "content": text}
        edit = {"file_path": str(path), "old_string": text[:40], "new_string": text[:40] + "  # edited"}
        bash = {"command": "ls src", "description": "list the sources"}

        def tool(kind: str, tool_name: str, tool_input: dict[str, str], suffix: str, **more: object) -> int:
            return self.hook(
                self.event(kind, tool_name=tool_name, tool_input=tool_input, tool_use_id=use + suffix, **more)
            )

        times = {"UserPromptSubmit": self.hook(self.event("UserPromptSubmit", prompt=f"write module {number}"))}
        times["PreToolUse Write"] = tool("PreToolUse", "Write", write, "w")
        path.write_text(text)
        times["PostToolUse Write"] = tool("PostToolUse", "Write", write, "w", tool_response={"filePath": str(path)})
        times["PreToolUse Bash"] = tool("PreToolUse", "Bash", bash, "b")
        listing = "\n".join(sorted(os.listdir(path.parent)))
        times["PostToolUse Bash"] = tool(
            "PostToolUse", "Bash", bash, "b", tool_response={"stdout": listing, "stderr": "", "interrupted": False}
        )
        times["PreToolUse Edit"] = tool("PreToolUse", "Edit", edit, "e")
        path.write_text(text.replace(edit["old_string"], edit["new_string"], 1))
        times["PostToolUse Edit"] = tool("PostToolUse", "Edit", edit, "e", tool_response={"filePath": str(path)})
        times["Stop"] = self.hook(self.event("Stop", stop_hook_active=False), prints=True)  # the summary line
        return times

    def check_recorded(self, rounds: int) -> None:
        """Every Write and Edit in the store, none cut short; one turn per round."""
        _, out = self.run([self.variant.python, "-m", "turnback", "log", "--json"])
        turns = json.loads(out)["turns"]
        calls = [call for turn in turns for call in turn["calls"] if call["tool"] in ("Write", "Edit")]
        if len(turns) != rounds or len(calls) != 2 * rounds or any(call["cut_short"] for call in calls):
            raise RuntimeError(f"{self.variant.label}: {len(turns)} turns, calls {calls} after {rounds} rounds")


def bench(variants: list[Variant], python: str, base: Path, rounds: int, warmup: int, seed: int) -> Figures:
    sessions = []
    for index, variant in enumerate(variants):
        session = Session(variant, base / f"variant-{index}", Content(seed))
        session.hook(session.event("SessionStart", source="startup"))
        if variant.relayed:
            session.wait_for_relay()
        sessions.append(session)
    per_event: dict[str, dict[str, list[int]]] = {v.label: {name: [] for name in SCRIPT} for v in variants}
    floors: dict[str, list[int]] = {label: [] for label in FLOORS}
    for number in range(warmup + rounds):
        for session in sessions:
            times = session.round(number)
            for label, flags in FLOORS.items():  # as often as events, under the same load
                floor = [session.run([python, *flags])[0] for _ in SCRIPT]
                if number >= warmup:
                    floors[label].extend(floor)
            if number >= warmup:
                for name, elapsed in times.items():
                    per_event[session.variant.label][name].append(elapsed)
    for session in sessions:
        session.check_recorded(warmup + rounds)
    return Figures(
        rounds=rounds,
        warmup=warmup,
        file_bytes=FILE_SIZE,
        events_per_round=len(SCRIPT),
        per_event={
            label: {name: Timing.of_ns(ns) for name, ns in events.items()} for label, events in per_event.items()
        },
        all_events={
            label: Timing.of_ns([ns for got in events.values() for ns in got]) for label, events in per_event.items()
        },
        write_pair={
            label: Timing.of_ns(
                [a + b for a, b in zip(events["PreToolUse Write"], events["PostToolUse Write"], strict=True)]
            )
            for label, events in per_event.items()
        },
        floors={label: Timing.of_ns(ns) for label, ns in floors.items()},
    )


def report(env: dict[str, object], variants: list[Variant], figures: Figures) -> tuple[str, dict[str, object]]:
    labels = [variant.label for variant in variants]
    width = 12

    def cells(timings: list[Timing]) -> str:
        return "".join(f"{timing.spread.median:>{width}.1f}" for timing in timings)

    target_label = labels[0]
    median = figures.all_events[target_label].spread.median
    met = median <= TARGET_EVENT_MS
    lines = [
        f"turnback {env['turnback']} · Python {env['python']} · {env['platform']}",
        f"{env['cpus']} CPUs · temp dir on {env['file_system']} · 1-minute load average "
        f"{env['load_average_1min_start']} at start, {env['load_average_1min_end']} at end",
        *(f"{variant.label}: {shlex.join(variant.command)}" for variant in variants),
        "",
        f"median ms, wall time of whole processes; {plural(figures.rounds, 'round')} of "
        f"{figures.events_per_round} events after {figures.warmup} warm-up",
        f"  {'':<30}" + "".join(f"{label:>{width}}" for label in labels),
        *(f"  {name:<30}" + cells([figures.per_event[label][name] for label in labels]) for name in SCRIPT),
        f"  {'every event':<30}" + cells([figures.all_events[label] for label in labels]),
        f"  {'every event, min':<30}" + "".join(f"{figures.all_events[label].min:>{width}.1f}" for label in labels),
        f"  {'every event, p90':<30}"
        + "".join(f"{figures.all_events[label].spread.p90:>{width}.1f}" for label in labels),
        f"  {'Write pair (Pre + Post)':<30}" + cells([figures.write_pair[label] for label in labels]),
        "floor (the interpreter's start-up alone)      median       min",
        *(
            f"  {label:<30}{timing.spread.median:>{width}.1f}{timing.min:>10.1f}"
            for label, timing in figures.floors.items()
        ),
        "",
        f"{target_label}: {median:.1f} ms median per event, {median / TARGET_EVENT_MS:.2f}× the target "
        f"(≤ {TARGET_EVENT_MS:g} ms, process start included): {'met' if met else 'MISSED'}; "
        f"{median / figures.floors['python -S -I -c pass'].spread.median:.2f}× the -S -I floor",
    ]
    data: dict[str, object] = {
        "schema": 2,
        "environment": env,
        "commands": {variant.label: variant.command for variant in variants},
        "figures": asdict(figures),
        "target": {
            "hook_event_median_ms": {
                "value_ms": median,
                "limit_ms": TARGET_EVENT_MS,
                "met": met,
                "variant": target_label,
            }
        },
    }
    return "\n".join(lines), data


def turnback_version(python: str) -> str:
    done = subprocess.run(
        [python, "-c", "import turnback; print(turnback.__version__)"], capture_output=True, text=True, timeout=60
    )
    return done.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=positive, default=10, help="timed scripted turns (default 10)")
    parser.add_argument("--warmup", type=non_negative, default=2, help="untimed turns first (default 2)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    parser.add_argument("--turnback", metavar="PATH", help="the turnback script (default: .venv/bin/turnback)")
    parser.add_argument(
        "--baseline",
        metavar="PATH",
        help="also time another turnback script through its relay, in the same rounds (e.g. an older checkout's)",
    )
    parser.add_argument("--dir", metavar="DIR", help="make the temp folder in DIR (default: the system temp dir)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random content (default 0)")
    args = parser.parse_args(argv)

    turnback = find_turnback(args.turnback)
    python = interpreter_of(turnback)
    script = [str(turnback), "hook", "claude-code"]
    variants = [
        Variant("installed", installed_command(python), relayed=True, python=python),
        Variant("script", script, relayed=True, python=python),
        Variant("no relay", script, relayed=False, python=python),
    ]
    if args.baseline:
        baseline = find_turnback(args.baseline)
        variants.append(Variant("baseline", [str(baseline), "hook", "claude-code"], True, interpreter_of(baseline)))
    with temp_base(args.dir, "turnback-hook-bench-") as base:
        env: dict[str, object] = {
            "turnback": turnback_version(python),
            "python": platform.python_version(),
            "platform": platform.platform(terse=True),
            "cpus": os.cpu_count(),
            "file_system": file_system_of(base),
            "load_average_1min_start": round(os.getloadavg()[0], 2),
        }
        figures = bench(variants, python, base, args.rounds, args.warmup, args.seed)
        env["load_average_1min_end"] = round(os.getloadavg()[0], 2)

    text, data = report(env, variants, figures)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        print(f"\nfigures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

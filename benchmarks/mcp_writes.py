"""Small ``write_file`` calls over stdio: the reference filesystem server (npm) against ``turnback mcp``.

Each server gets its own fresh folder; the client (the official MCP Python SDK) writes a 1 KiB file N times
(cycling over a few names, so most writes replace a file turnback keeps a copy of) and times each call from
request to answer. The servers take turns, round after round (a fresh server and folder each round), so a
noisy neighbour on the disk or the CPU weighs on both alike. Prints each round's p50/p99 per server, the
median of the rounds, turnback's ratio to the reference beside the target (2x), and the load average.

    python benchmarks/mcp_writes.py [--writes 200] [--rounds 3] [--reference PATH/TO/dist/index.js] [--profile OUT]
                                    [--before SRC]

``--before SRC`` also runs turnback from another checkout's ``src`` folder (e.g. ``git archive main src``
unpacked), in the same rounds: a change's before and after, measured side by side.

``--profile OUT`` runs turnback's server under cProfile and writes the last round's stats to OUT (read it with
``python -m pstats OUT``). The reference is looked for in the test cache (tests/npmcache.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchutil import positive
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REFERENCE_VERSION = "2026.8.31"
DEFAULT_REFERENCE = (
    Path.home()
    / ".cache"
    / "turnback-tests"
    / f"server-filesystem-{REFERENCE_VERSION}"
    / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
)


async def timed_writes(params: StdioServerParameters, writes: int) -> list[float]:
    content = ("x" * 63 + "\n") * 16  # 1 KiB
    samples: list[float] = []
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for number in range(writes + 5):
                    started = time.perf_counter()
                    result = await session.call_tool("write_file", {"path": f"f{number % 8}.txt", "content": content})
                    took = time.perf_counter() - started
                    assert not result.is_error, result
                    if number >= 5:  # the first calls warm up imports and the store
                        samples.append(took * 1000)
    return samples


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


TARGET_RATIO = 2.0  # issue 13: small writes at most twice the reference's time


def servers(base: Path, reference: Path, profile: Path | None, before: Path | None) -> dict[str, StdioServerParameters]:
    """Each server, serving a fresh folder of its own under *base* (turnback's each with a store of its own)."""
    found = {"reference": base / "reference", "turnback": base / "turnback"}
    if before is not None:
        found["before"] = base / "before"
    for folder in found.values():
        folder.mkdir()
    params = {"reference": StdioServerParameters(command="node", args=[str(reference), str(found["reference"])])}
    for name in found.keys() - {"reference"}:
        env = {**os.environ, "TURNBACK_HOME": str(base / f"home-{name}"), "TURNBACK_NO_KEYRING": "1"}
        env["TURNBACK_KEY"] = "0" * 64
        if name == "before":
            assert before is not None
            env["PYTHONPATH"] = str(before)
        profiling = ["-m", "cProfile", "-o", str(profile)] if profile and name == "turnback" else []
        params[name] = StdioServerParameters(
            command=sys.executable, args=[*profiling, "-m", "turnback", "mcp", "--root", str(found[name])], env=env
        )
    return {name: params[name] for name in ("reference", "before", "turnback") if name in params}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=positive, default=200)
    parser.add_argument("--rounds", type=positive, default=3)
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument("--before", type=Path, default=None, help="another checkout's src folder, run alongside")
    args = parser.parse_args()
    if not args.reference.is_file():
        sys.exit(f"the reference server is not at {args.reference}: run tests/integrations/test_mcp_reference.py once")
    print(f"{args.writes} writes of 1 KiB each, over stdio (ms per call), {args.rounds} rounds taking turns")
    print(f"{'round':<6} {'server':<10} {'p50':>7} {'p99':>7} {'mean':>7}")
    rounds: dict[str, list[tuple[float, float]]] = {}
    for number in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory(prefix="mcp-writes-") as base:
            for name, params in servers(Path(base), args.reference, args.profile, args.before).items():
                samples = asyncio.run(timed_writes(params, args.writes))
                p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
                rounds.setdefault(name, []).append((p50, p99))
                print(f"{number:<6} {name:<10} {p50:>7.2f} {p99:>7.2f} {statistics.mean(samples):>7.2f}")
    medians = {name: [statistics.median(q) for q in zip(*figures, strict=True)] for name, figures in rounds.items()}
    for name, (p50, p99) in medians.items():
        print(f"{'median':<6} {name:<10} {p50:>7.2f} {p99:>7.2f}")
    ref = medians["reference"]
    for name in medians.keys() - {"reference"}:
        p50, p99 = medians[name]
        print(f"{name} / reference (medians of the rounds): p50 {p50 / ref[0]:.2f}x, p99 {p99 / ref[1]:.2f}x")
    ratio = medians["turnback"][0] / ref[0]
    verdict = "met" if ratio <= TARGET_RATIO else "not met"
    load = " ".join(f"{figure:.2f}" for figure in os.getloadavg())
    print(f"target: turnback p50 <= {TARGET_RATIO:g}x the reference's: {ratio:.2f}x, {verdict} (load average {load})")


if __name__ == "__main__":
    main()

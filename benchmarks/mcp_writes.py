"""Small ``write_file`` calls over stdio: the reference filesystem server (npm) against ``turnback mcp``.

Each server gets its own fresh folder; the client (the official MCP Python SDK) writes a 1 KiB file N times
(cycling over a few names, so most writes replace a file turnback keeps a copy of) and times each call from
request to answer. The servers take turns, round after round (a fresh server and folder each round), so a
noisy neighbour on the disk or the CPU weighs on both alike. Prints each round's p50/p99 per server, the
median of the rounds, and turnback's ratio to the reference.

    python benchmarks/mcp_writes.py [--writes 200] [--rounds 3] [--reference PATH/TO/dist/index.js] [--profile OUT]

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


def servers(base: Path, reference: Path, profile: Path | None) -> dict[str, StdioServerParameters]:
    """Each server, serving a fresh folder of its own under *base*."""
    ref_root, tb_root, home = (base / name for name in ("reference", "turnback", "home"))
    for folder in (ref_root, tb_root):
        folder.mkdir()
    env = {**os.environ, "TURNBACK_HOME": str(home), "TURNBACK_NO_KEYRING": "1", "TURNBACK_KEY": "0" * 64}
    profiling = ["-m", "cProfile", "-o", str(profile)] if profile else []
    return {
        "reference": StdioServerParameters(command="node", args=[str(reference), str(ref_root)]),
        "turnback": StdioServerParameters(
            command=sys.executable,
            args=[*profiling, "-m", "turnback", "mcp", "--root", str(tb_root)],
            env=env,
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=positive, default=200)
    parser.add_argument("--rounds", type=positive, default=3)
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--profile", type=Path, default=None)
    args = parser.parse_args()
    if not args.reference.is_file():
        sys.exit(f"the reference server is not at {args.reference}: run tests/integrations/test_mcp_reference.py once")
    print(f"{args.writes} writes of 1 KiB each, over stdio (ms per call), {args.rounds} rounds taking turns")
    print(f"{'round':<6} {'server':<10} {'p50':>7} {'p99':>7} {'mean':>7}")
    rounds: dict[str, list[tuple[float, float]]] = {"reference": [], "turnback": []}
    for number in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory(prefix="mcp-writes-") as base:
            for name, params in servers(Path(base), args.reference, args.profile).items():
                samples = asyncio.run(timed_writes(params, args.writes))
                p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
                rounds[name].append((p50, p99))
                print(f"{number:<6} {name:<10} {p50:>7.2f} {p99:>7.2f} {statistics.mean(samples):>7.2f}")
    medians = {name: [statistics.median(q) for q in zip(*figures, strict=True)] for name, figures in rounds.items()}
    for name, (p50, p99) in medians.items():
        print(f"{'median':<6} {name:<10} {p50:>7.2f} {p99:>7.2f}")
    ref, tb = medians["reference"], medians["turnback"]
    print(f"turnback / reference (medians of the rounds): p50 {tb[0] / ref[0]:.1f}x, p99 {tb[1] / ref[1]:.1f}x")


if __name__ == "__main__":
    main()

"""What the benchmark scripts share: spreads of timings, the environment they report, argument types.

Each script is run from the repository root (``python benchmarks/NAME.py``), so
this module is found beside it.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

FILE_SIZE = 10 * 1024
WORDS = ["def", "return", "self", "import", "class", "if", "else", "for", "in", "None", "value", "path", "data"]


@dataclass(frozen=True)
class Spread:
    """Median and the 10th and 90th percentiles of a sample, in milliseconds."""

    median: float
    p10: float
    p90: float
    n: int

    @classmethod
    def of_ns(cls, samples_ns: list[int]) -> Spread:
        ms = [s / 1e6 for s in samples_ns]
        if len(ms) == 1:
            return cls(ms[0], ms[0], ms[0], 1)
        deciles = statistics.quantiles(ms, n=10, method="inclusive")
        return cls(statistics.median(ms), deciles[0], deciles[-1], len(ms))


class Content:
    """Fresh, text-like content of an exact size: code-ish lines of random words."""

    def __init__(self, seed: int):
        self._rng = random.Random(seed)

    def __call__(self, size: int = FILE_SIZE) -> bytes:
        lines: list[str] = []
        total = 0
        while total < size:
            indent = "    " * self._rng.randint(0, 3)
            line = indent + " ".join(self._rng.choices(WORDS, k=self._rng.randint(3, 12)))
            lines.append(line)
            total += len(line) + 1
        return ("\n".join(lines) + "\n").encode("ascii")[:size]


def file_system_of(path: Path) -> str:
    """The file system type of the mount holding *path* (best effort, Linux only)."""
    try:
        mounts = Path("/proc/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return "unknown"
    real = os.path.realpath(path)
    best, kind = "", "unknown"
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, kind = point, fields[2]
    return kind


@contextmanager
def temp_base(parent: str | None, prefix: str) -> Iterator[Path]:
    """A temp folder for one run (in *parent*, else the system's), removed at the end."""
    with tempfile.TemporaryDirectory(prefix=prefix, dir=parent) as name:
        yield Path(name).resolve()


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"

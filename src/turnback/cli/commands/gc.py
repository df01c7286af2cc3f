"""``turnback gc``: reclaim copies nothing needs any more, and the disk space they took."""

from __future__ import annotations

import argparse

from turnback.catalog import Message, join
from turnback.cli import _common
from turnback.render.diff import human_size


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("gc", parents=[common], help="reclaim unused copies and disk space")
    parser.add_argument("--vacuum", action="store_true", help="compact the database even if little is free")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine = ctx.engine
    capped = engine.enforce_caps()
    reclaimed = engine.gc(vacuum=True if args.vacuum else None)
    blobs, size = reclaimed.blobs + capped.blobs, reclaimed.bytes + capped.bytes
    parts = [Message("gc_reclaimed", count=blobs, size=human_size(size))]
    if reclaimed.vacuumed or capped.vacuumed:
        parts.append(Message("gc_compacted"))
    if capped.evicted_calls:
        parts.append(Message("gc_evicted", count=len(capped.evicted_calls)))
    if reclaimed.held:
        parts.append(Message("gc_held", count=reclaimed.held))
    ctx.out.line(join(parts))
    ctx.out.json(
        {
            "blobs": blobs,
            "bytes": size,
            "vacuumed": reclaimed.vacuumed or capped.vacuumed,
            "evicted_calls": capped.evicted_calls,
            "held": reclaimed.held,
        }
    )
    return 0

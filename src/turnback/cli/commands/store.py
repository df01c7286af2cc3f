"""``turnback store copy SRC DST``: copy a whole store to another place or backend, every copy checked.

SRC and DST are each a store folder (its SQLite file) or a ``postgresql://``
database (with this host's store folder beside it). DST must be new: no
project yet. The copy keeps the source's key, so the key that opens SRC
opens DST; nothing in SRC changes. So a user moves to a shared store, or
back.
"""

from __future__ import annotations

import argparse
import os

import turnback
from turnback.catalog import say
from turnback.cli import _common
from turnback.engine import Engine


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "store",
        parents=[common],
        help="copy a whole store (SQLite and PostgreSQL, either way)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = parser.add_subparsers(dest="store_verb", metavar="VERB", required=True)
    copy = verbs.add_parser("copy", parents=[common], help="copy every record and copy to a new store")
    copy.add_argument("source", metavar="SRC", help="a store folder, or a postgresql:// database")
    copy.add_argument("target", metavar="DST", help="a new store folder, or a new postgresql:// database")


def _open(ctx: _common.Context, location: str) -> Engine:
    database = turnback.is_database_url(location)
    return Engine.open(
        ctx.home if database else os.path.abspath(location),
        key_secret=turnback.env_key_secret(),
        try_keyring=turnback.keyring_allowed(),
        store_url=location if database else None,
        host_id=turnback.env_host_id(),
        host_lease_s=turnback.env_host_lease_s(),
    )


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    with _open(ctx, args.source) as source, _open(ctx, args.target) as target:
        copied = source.copy_to(target)
    shown = {
        name: turnback.shown_location(location) for name, location in (("source", args.source), ("target", args.target))
    }
    ctx.out.line(say("pg_copied", projects=copied.projects, sessions=copied.sessions, count=copied.blobs, **shown))
    ctx.out.json({"projects": copied.projects, "sessions": copied.sessions, "blobs": copied.blobs, **shown})
    return 0

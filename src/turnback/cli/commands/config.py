"""``turnback config get KEY`` / ``turnback config set [--project DIR] KEY VALUE``.

Settings live in ``config.toml`` in the store folder, never inside a project
(so an agent's writes cannot change them). ``--project`` sets a value for
one project only. Keys: render.diff_lines, snapshot.max_file_mib,
snapshot.exclude, snapshot.home_max_files, snapshot.home_max_mib,
snapshot.max_mib, store.max_mib, mode, lang, diff.groups.NAME,
watch.auto_paths, watch.idle_s. Lists are given as ``a,b`` or as JSON.
"""

from __future__ import annotations

import argparse
import json

from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "config",
        parents=[common],
        help="read or set a setting in the store's config.toml",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = parser.add_subparsers(dest="config_verb", metavar="VERB", required=True)
    get = verbs.add_parser("get", parents=[common], help="print the value that applies")
    get.add_argument("key")
    get.add_argument("--project", metavar="DIR", help="the value for this project")
    put = verbs.add_parser("set", parents=[common], help="set a value")
    put.add_argument("key")
    put.add_argument("value")
    put.add_argument("--project", metavar="DIR", help="for this project only")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine = ctx.engine
    if args.config_verb == "get":
        value = engine.config_value(args.key, project_root=args.project)
    else:
        value = engine.set_config(args.key, args.value, project_root=args.project)
    ctx.out.line(json.dumps(value) if isinstance(value, list) else str(value))
    ctx.out.json({"key": args.key, "value": value})
    return 0

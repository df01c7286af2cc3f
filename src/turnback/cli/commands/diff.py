"""``turnback diff [TURN] [--stat]``: what a turn changed (the newest, or TURN).

On a terminal the patch is coloured (unless ``NO_COLOR`` is set); into a
pipe it is a plain patch that ``git apply`` accepts. Files ignored by the
project's ``.gitignore`` are listed, never their contents.
"""

from __future__ import annotations

import argparse
import sys

from turnback.catalog import say, word
from turnback.cli import _common
from turnback.render import data, views


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "diff",
        parents=[common],
        help="print what a turn changed: a patch, or with --stat the totals",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_session_option(parser)
    parser.add_argument("turn", nargs="?", help="a turn number or id (default: the newest turn)")
    parser.add_argument("--stat", action="store_true", help="per group totals and a line per file")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine = ctx.engine
    diff = engine.turn_diff(ctx.session(with_turns=True).id, args.turn)
    out = ctx.out
    ignored = set(diff.ignored)
    if diff.note:
        out.note("turnback: " + word(diff.note))
    files = [c for c in diff.changes if "dir" not in (c.before.kind, c.after.kind)]
    if out.json_mode:
        rows = [
            {"path": c.path, "kind": c.kind, "added": c.added, "removed": c.removed, "ignored": c.path in ignored}
            for c in files
        ]
        patch = views.patch_text(diff.changes, ignored, engine.load)  # with --stat too: one shape
        refs = [{"name": r.name, "before": r.before, "after": r.after} for r in diff.turn.refs]
        out.json({"turn": data.turn_data(diff.turn), "files": rows, "patch": patch, "refs": refs})
        return 0
    if not files and diff.turn.refs:
        # An empty patch would say nothing at all: say what the turn did move (on stderr, as the lines
        # about left-out files, so a pipe still gets a plain patch).
        out.note(say("diff_only_refs", refs=views.refs_moved(diff.turn.refs)))
        return 0
    left_out = views.left_out_lines(diff.changes, ignored)
    if args.stat:
        out.lines(views.stat_lines(diff.changes, engine.config.groups))
        if left_out:
            out.lines(["", *left_out])
    else:
        patch = views.patch_text(diff.changes, ignored, engine.load)
        if _common.wants_color(out):
            out.styled(views.colorize(patch.split("\n")[:-1]))  # lines end at \n only, as in the patch
            out.lines(left_out)
        else:
            out.flush()
            sys.stdout.buffer.write(patch.encode("utf-8", "surrogateescape"))
            sys.stdout.buffer.flush()
            for line in left_out:
                out.note(line)
    return 0

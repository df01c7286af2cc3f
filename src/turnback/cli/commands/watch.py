"""``turnback watch start|stop|status [DIR]``: the project's watcher, so a scan visits only what changed.

A scan (before and after each shell command) compares every file's stat
with the last scan. With the watcher running, it asks the watcher which
paths changed since then (inotify events) and visits only those. When the
watcher was not running the whole time, lost events (a queue overflow),
or cannot watch every folder (``fs.inotify.max_user_watches``), the scan
visits everything, as it does without a watcher: a change is never missed.

Linux only. Writes through ``mmap`` and changes made from another machine
(a network file system) make no inotify event: do not use the watcher there.
"""

from __future__ import annotations

import argparse

from turnback.catalog import say, word
from turnback.cli import _common
from turnback.model import ProjectId


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "watch",
        parents=[common],
        help="start, stop or show the watcher that makes scans visit only what changed",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = parser.add_subparsers(dest="watch_verb", metavar="VERB", required=True)
    for verb, text in (
        ("start", "start the project's watcher (detached; it runs until stopped)"),
        ("stop", "stop the project's watcher"),
        ("status", "show whether a watcher runs and what it watches"),
    ):
        each = verbs.add_parser(verb, parents=[common], help=text)
        each.add_argument("dir", nargs="?", default=".", help="a folder in the project (default: this one)")
    tree = sub.add_parser("_watch-tree", parents=[common])
    tree.add_argument("project")
    tree.add_argument("--idle-s", type=float, default=None)  # started automatically: end when no scan asks
    # Not for people: keep it out of the list of commands (argparse lists every parser that has help).
    sub._choices_actions[:] = [a for a in sub._choices_actions if a.dest != "_watch-tree"]


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine, out = ctx.engine, ctx.out
    if args.verb == "_watch-tree":
        engine.run_watcher(ProjectId(args.project), idle_s=args.idle_s)
        return 0
    project = engine.watched_project(args.dir)
    if args.watch_verb == "start":
        pid = engine.watch_start(project)
        status = engine.watch_status(project)
        out.line(say("watch_started", root=project.root, pid=pid))
        if status is not None and status.reason:
            out.line(say("watch_visits_everything", reason=word(status.reason)))
        out.json(
            {
                "project": project.root,
                "pid": pid,
                "folders": status.folders if status else 0,
                "reason": word(status.reason) if status and status.reason else None,
            }
        )
        return 0
    if args.watch_verb == "stop":
        stopped = engine.watch_stop(project)
        out.line(say("watch_stopped", root=project.root, pid=stopped) if stopped else say("watch_none_here"))
        out.json({"project": project.root, "stopped": stopped})
        return 0 if stopped else 1
    status = engine.watch_status(project)
    if status is None:
        out.line(say("watch_none_for", root=project.root))
    else:
        out.line(say("watch_status", root=project.root, pid=status.pid, count=status.folders))
        if status.reason:
            out.line(say("watch_visits_everything", reason=word(status.reason)))
    out.json(
        {
            "project": project.root,
            "pid": status.pid if status else None,
            "folders": status.folders if status else 0,
            "reason": word(status.reason) if status and status.reason else None,
        }
    )
    return 0 if status else 1

"""Hidden verbs for turnback's own detached helpers: ``_job`` runs a background job, ``_watch`` waits for a
command past its timeout (each records the command's changes when it ends); ``_adopt`` copies the git
objects a first snapshot stands on into the store; ``_first_snapshot`` takes a project's first snapshot for a
process that cannot split it over workers (an MCP or web server, which has threads)."""

from __future__ import annotations

import argparse
import os

from turnback.cli import _common
from turnback.model import CallId, ProjectId


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    job = sub.add_parser("_job", parents=[common])
    job.add_argument("call")
    job.add_argument("--cwd", required=True)
    job.add_argument("--output")
    job.add_argument("command", nargs=argparse.REMAINDER)
    watch = sub.add_parser("_watch", parents=[common])
    watch.add_argument("call")
    adopt = sub.add_parser("_adopt", parents=[common])
    adopt.add_argument("project")
    first = sub.add_parser("_first_snapshot", parents=[common])
    first.add_argument("project")
    # Not for people: keep them out of the list of commands (argparse lists every parser that has help).
    hidden = ("_job", "_watch", "_adopt", "_first_snapshot")
    sub._choices_actions[:] = [a for a in sub._choices_actions if a.dest not in hidden]


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    if args.verb == "_job":
        argv = args.command[1:] if args.command[:1] == ["--"] else args.command
        ctx.engine.run_job(CallId(args.call), argv, cwd=args.cwd, output=args.output)
    elif args.verb == "_adopt":
        os.nice(10)  # background work: a foreground scan or command goes first
        ctx.engine.adopt_git_objects(ProjectId(args.project))
    elif args.verb == "_first_snapshot":
        ctx.engine.take_first_snapshot(ProjectId(args.project))
    else:
        ctx.engine.watch_command(CallId(args.call))
    return 0

"""``turnback init [DIR]``: register a folder as a project."""

from __future__ import annotations

import argparse

from turnback.catalog import say
from turnback.cli import _common


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("init", parents=[common], help="register a folder (default: this one) as a project")
    parser.add_argument("dir", nargs="?", default=".", help="the project's root folder")


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    project, created = ctx.engine.init_project(args.dir)
    registered = "project_registered" if created else "project_already_registered"
    ctx.out.line(say(registered, root=project.root, project=project.id))
    ctx.out.json({"project": {"id": project.id, "root": project.root}, "created": created})
    return 0

"""``turnback jobs [stop ID]``: background jobs (and commands past their timeout) of this project."""

from __future__ import annotations

import argparse
import datetime
import json

from turnback import short_id
from turnback.catalog import say
from turnback.cli import _common
from turnback.render import data, text
from turnback.render.terminal import quote


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("jobs", parents=[common], help="list background jobs, or stop one")
    _common.add_session_option(parser)
    verbs = parser.add_subparsers(dest="jobs_verb", metavar="VERB")
    stop = verbs.add_parser("stop", parents=[common], help="ask a running job to end (its changes are still recorded)")
    stop.add_argument("job", help="the job's id, or a unique prefix of it")


def _command(raw: str | None) -> str:
    try:
        return " ".join(quote(str(word)) for word in json.loads(raw or "{}").get("command") or [])
    except ValueError:
        return ""


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    engine = ctx.engine
    if args.jobs_verb == "stop":
        call = engine.stop_job(args.job)
        ctx.out.line(say("job_asked_to_stop", job=short_id(call.id), command=_command(call.input)))
        ctx.out.json({"job": {"id": call.id, "stopping": True}})
        return 0
    session = ctx.session()
    jobs = engine.jobs(project_id=session.project_id)
    items = []
    for call in jobs:
        state = say("job_running", pid=call.pid) if call.status == "running" else text.job_end(call)
        mine = "" if call.session_id == session.id else "  " + say("job_of_another_session")
        started = datetime.datetime.fromtimestamp(call.started_at / 1e9).strftime("%H:%M:%S")
        files = sum(1 for c in call.changes if "dir" not in (c.before.kind, c.after.kind if c.after else ""))
        changed = "  " + say("job_files_changed", count=files) if call.status != "running" else ""
        ctx.out.line(f"{short_id(call.id)}  {started}  {state}{changed}  {_command(call.input)}{mine}")
        items.append({**data.call_data(call), "pid": call.pid, "exit": call.exit_code, "session": call.session_id})
    if not jobs:
        ctx.out.line(say("no_background_jobs"))
    ctx.out.json({"jobs": items})
    return 0

"""``turnback serve [--host H] [--port N] [--project DIR] [--open]``: the web page and its HTTP API.

Prints one line, ``turnback web: http://127.0.0.1:PORT/?token=TOKEN`` (with
``--json``, one object with ``url``, ``port`` and ``token``), and serves until
Ctrl-C or SIGTERM. Open the address: the page shows each session's turns and
calls with their diffs, and takes back a call, a turn or a branch with the
same plans as ``revert``, ``undo`` and ``rollback``. Every API request needs
the token (a new one each start, or ``TURNBACK_WEB_TOKEN``). It listens on
127.0.0.1 only, unless ``--host`` names another address and ``--allow-remote``
is given: then anyone who can reach the port and holds the token can revert
files. Needs the ``web`` extra: ``pip install 'turnback[web]'``.
"""

from __future__ import annotations

import argparse
import secrets

import turnback
from turnback.catalog import Message, say
from turnback.cli import _common
from turnback.errors import UsageError
from turnback.home import env_web_token

DEFAULT_PORT = 8765


def add_parser(sub: _common.Subparsers, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "serve",
        parents=[common],
        help="serve the web page and HTTP API on 127.0.0.1 (prints the address with its token)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"the port (default: {DEFAULT_PORT}; 0: any free port)"
    )
    parser.add_argument("--project", metavar="DIR", help="list only the sessions of this project")
    parser.add_argument("--open", action="store_true", help="open the page in a browser")
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host other than this machine's loopback: anyone who reaches the port with the token "
        "can revert files",
    )


def run(ctx: _common.Context, args: argparse.Namespace) -> int:
    try:
        from turnback.web import security, server
    except ImportError as exc:
        raise UsageError(Message("serve_package_missing")) from exc
    if not 0 <= args.port <= 65535:
        raise UsageError(Message("serve_port_out_of_range", port=args.port))
    remote = not security.is_loopback(args.host)
    if remote and not args.allow_remote:
        raise UsageError(Message("serve_remote_needs_flag", host=args.host))
    token = env_web_token() or secrets.token_urlsafe(32)
    home, store_url = ctx.home, ctx.store_url
    lang = turnback.pick_language(getattr(args, "lang", None), home)

    def started(url: str, port: int) -> None:
        if remote:
            ctx.out.note("turnback: " + say("serve_remote_warning", host=args.host, port=port))
        ctx.out.line(say("serve_listening", url=url))
        ctx.out.json({"url": url, "port": port, "token": token})
        ctx.out.flush()

    def open_engine() -> turnback.Engine:
        return turnback.open(home, store_url=store_url)

    try:
        server.serve(
            open_engine,
            home=home,
            host=args.host,
            port=args.port,
            token=token,
            default_lang=lang,
            project=args.project,
            started=started,
            open_browser=args.open,
        )
    except OSError as exc:
        raise UsageError(
            Message("serve_cannot_listen", host=args.host, port=args.port, why=exc.strerror or str(exc))
        ) from exc
    return 0

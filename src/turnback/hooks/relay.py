"""The hook relay: one long-lived process per store handles hook events, so a hook does not import turnback.

Claude Code starts ``turnback hook claude-code`` for every event and waits
for it. Python's start-up is about 15 ms; importing the engine (SQLite,
cryptography, zstandard and turnback's own modules) adds some 60 ms more, and
even ``json`` and ``socket`` cost a hook 10–25 ms (``re``, ``enum``,
``collections``). So a hook process imports only ``os``, ``_socket`` and
:mod:`turnback.home`, hands its event to the relay unread, as bytes, and
writes out what the relay sends back; the relay, a process that imported the
rest once, opens the store for the event, handles it exactly as the hook
would (:func:`turnback.hooks.claude.handle`), and replies what to print.
``turnback install`` has Claude Code run it as ``PYTHON -S -I
…/turnback/hooks/launch.py hook claude-code`` (:mod:`.launch`), which skips
``site`` too; a hook that must do the work itself loads ``site`` then.

- No relay yet (or ``TURNBACK_HOOK_RELAY=0``): the hook handles the event
  itself, then starts a relay for the next one (unless turned off).
- The relay listens on a Unix socket in the store folder (``hook-relay.sock``;
  Linux), which is the user's own (mode 0700): another user can neither bind
  a socket there nor connect to it. (An abstract socket has no permissions:
  another user could bind its name first and stall every hook.) Both ends
  check the other is the same user (``SO_PEERCRED``) too, and a hook waits
  at most ``CONNECT_TIMEOUT_S`` to be connected: past it, or to a stranger, it
  hands nothing over and handles its event itself. A hook whose
  ``TURNBACK_KEY``, keyring or language settings differ from the relay's is
  told so (``NOT_TAKEN``) and handles its event itself.
- One relay per store (a lock in the store folder says so). It serves one
  event at a time, and ends when it has had none for
  ``TURNBACK_HOOK_RELAY_IDLE_S`` seconds (600), when the store folder is
  gone, or when turnback's code changed on disk (an upgrade: looked at after
  each answer and each idle second, so at most one request more is answered
  by the code it loaded).
- A harness's ``turn begin``, ``exec`` and ``turn end`` come here too
  (:func:`cli_request`): the relay's process is :mod:`turnback.cli.fast`'s,
  which serves them with the command line's own code. A CLI process whose
  environment differs (:func:`cli_env`) is told NOT_TAKEN, and runs the
  full command line.
- A relay that fails once it took an event is not asked again for it: the
  hook says so on stderr and exits 0, as for any trouble of turnback's. The
  whole exchange ends within ``REPLY_TIMEOUT_S``, under the ``timeout`` that
  ``turnback install`` gives Claude Code for each hook (``HOOK_TIMEOUT_S``).
"""

from __future__ import annotations

import _socket  # socket's own module: socket.py imports enum, selectors and collections, some 10 ms for a hook
import os
import sys
import time

TYPE_CHECKING = False  # typing itself is among what a hook process should not import
if TYPE_CHECKING:
    import socket
    from collections.abc import Callable
    from typing import Any

    from turnback.engine import KeptStore

ENV_RELAY = "TURNBACK_HOOK_RELAY"
ENV_IDLE = "TURNBACK_HOOK_RELAY_IDLE_S"
IDLE_S = 600.0
HOOK_TIMEOUT_S = 60  # what turnback install tells Claude Code to wait for each hook, in seconds
REPLY_TIMEOUT_S = HOOK_TIMEOUT_S - 5.0  # the whole exchange with the relay, under Claude Code's limit
CONNECT_TIMEOUT_S = 0.3  # a relay this user runs accepts at once; past this, the hook does the work itself
READ_TIMEOUT_S = 5.0
SOCKET_NAME = "hook-relay.sock"
LOCK_NAME = "hook-relay.lock"
# What else decides how the store opens: its key, the keyring, the database that holds it, and this host in it.
SAME_STORE_ENV = ("TURNBACK_KEY", "TURNBACK_NO_KEYRING", "TURNBACK_STORE", "TURNBACK_HOST_ID", "TURNBACK_HOST_LEASE_S")
# A hook's request: this tag, the caller's fields and the environment's (see _request), each ended by a NUL,
# then the event as it came. A request without it is an older hook's JSON, which the relay does not take.
REQUEST_TAG = b"turnback-hook-request 4"
CALLER_FIELDS = 6  # the harness, parent pid, cwd, CLAUDE_PROJECT_DIR, the hook's start, CLAUDE_ENV_FILE
# The relay's reply: TAKEN once it has read the request and will handle the event, then the length of what
# goes to stdout, a newline, stdout's and stderr's text (UTF-8); or NOT_TAKEN. An older relay sends nothing.
TAKEN = b"T"
NOT_TAKEN = b"F"
OLD_NOT_TAKEN = b'{"taken": false}'  # what an older hook, which sends JSON, understands as "do it yourself"
# A request of the command line's (turnback.cli.fast serves a harness's ``turn begin``/``exec``/``turn end``):
# this tag, :func:`cli_env`, then the fields cli.fast reads, each ended by a NUL. The reply: TAKEN, then
# ``STATUS LENGTH`` (STATUS an exit code, or a step's own answer), a newline, stdout's bytes and stderr's.
CLI_REQUEST_TAG = b"turnback-cli-request 1"
CLI_REPLY_TIMEOUT_S = 3600.0  # the scan before a command on a big cold tree takes what it takes, as in the CLI
NO_COLOR = "NO_COLOR"  # the CLI's output is coloured unless it is set (https://no-color.org)
HANDLED_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PostToolBatch",
    "PreCompact",
    "Stop",
    "StopFailure",
    "SessionEnd",
)
FILE_TOOLS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
SHELL_TOOLS = ("Bash", "PowerShell")
CODEX_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Interrupt",
    "PreCompact",
    "PostCompact",
    "Stop",
    "SessionEnd",
)
CODEX_TOOLS = ("Bash", "apply_patch")
GEMINI_EVENTS = ("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent", "SessionEnd")
GEMINI_TOOLS = ("write_file", "replace", "run_shell_command")
CURSOR_EVENTS = (
    "sessionStart",
    "beforeSubmitPrompt",
    "beforeShellExecution",
    "afterShellExecution",
    "afterFileEdit",
    "stop",
    "sessionEnd",
)
PEERCRED_SIZE = 12  # struct ucred: pid, uid, gid, each 4 bytes


def process_started_at() -> float | None:
    """When this process started (seconds since the epoch, to a clock tick), where Linux tells it: the moment
    the harness started the hook, before Python's own start-up."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            ticks = int(handle.read().rsplit(b")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.time() - age


def parse(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """The event in *raw*, or None and the line that says why it is ignored."""
    import json

    try:
        event = json.loads(raw or b"{}")
    except ValueError:
        return None, "turnback: the hook event is not JSON; ignored\n"
    if not isinstance(event, dict):
        return None, "turnback: the hook event is not a JSON object; ignored\n"
    return event, ""


def wanted(event: dict[str, Any], harness: str = "claude-code") -> bool:
    """Whether an event needs the store at all (a Read or a Grep costs the agent no more than Python's start)."""
    name = str(event.get("hook_event_name") or "")
    tool = str(event.get("tool_name") or "")
    if harness == "codex":
        return name in CODEX_EVENTS and not ("ToolUse" in name and tool not in CODEX_TOOLS)
    if harness == "gemini":
        return name in GEMINI_EVENTS and not (name.endswith("Tool") and tool not in GEMINI_TOOLS)
    if harness == "cursor":
        return name in CURSOR_EVENTS
    return name in HANDLED_EVENTS and not ("ToolUse" in name and tool not in FILE_TOOLS and tool not in SHELL_TOOLS)


def _handler(harness: str) -> Callable[..., tuple[str, str]]:
    """The adapter's ``handle(event, caller, home)`` for *harness*."""
    if harness == "codex":
        from turnback.hooks.codex import handle as codex_handle

        return codex_handle
    if harness == "gemini":
        from turnback.hooks.gemini import handle as gemini_handle

        return gemini_handle
    if harness == "cursor":
        from turnback.hooks.cursor import handle as cursor_handle

        return cursor_handle
    from turnback.hooks.claude import handle

    return handle


def failure_line(exc: BaseException) -> str:
    """The one line a hook prints about turnback's own trouble (it names paths: control characters escaped)."""
    from turnback.catalog import say, word
    from turnback.errors import TurnbackError
    from turnback.render.terminal import escape_line  # only on this rare path: a hook imports little

    if isinstance(exc, TurnbackError):  # worded for the user: the class that carried it says nothing more
        return escape_line(say("hook_failed_because", why=word(exc.message))) + "\n"
    if isinstance(exc, OSError) and exc.strerror:  # the system's own words, and the path they are about
        why = f"{exc.strerror}: {exc.filename}" if exc.filename is not None else exc.strerror
        return escape_line(say("hook_failed_because", why=why)) + "\n"
    return escape_line(say("hook_failed", error=type(exc).__name__, why=str(exc))) + "\n"


def _no_answer(home: str) -> str:
    """The line a hook prints when the relay took its event and gave no answer, in the language the event's
    output is worded in (the catalog is imported only on this rare path, so a hook imports little)."""
    from turnback.catalog import Message, word
    from turnback.hooks.events import event_language

    return word(Message("hook_relay_no_answer"), event_language(home)) + "\n"


def _at_socket(home: str, call: Callable[[str], None]) -> None:
    """``call(path)`` with a path to the relay's socket in *home* that fits a Unix socket address (108 bytes)
    however deep the store is: through this process's descriptor of the folder."""
    folder = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        call(f"/proc/self/fd/{folder}/{SOCKET_NAME}")
    finally:
        os.close(folder)


def connect(home: str) -> _socket.socket | None:
    """A socket connected to the relay of the store in *home* and run by this user; None when there is none,
    it is another user's, or it does not take the connection within ``CONNECT_TIMEOUT_S``."""
    if not sys.platform.startswith("linux"):
        return None
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)  # never block in connect(): a full queue fails at once (EAGAIN)
        while True:
            try:
                _at_socket(home, sock.connect)
                break
            except BlockingIOError:  # its queue is full (hooks of the same moment): wait a little for room
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)
        if not _same_user(sock):
            raise PermissionError("another user's socket")  # never hand it an event
        return sock
    except OSError:
        sock.close()
        return None


def _same_user(sock: _socket.socket) -> bool:
    ucred = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, PEERCRED_SIZE)
    return int.from_bytes(ucred[4:8], sys.byteorder) == os.getuid()


def _store_env() -> list[bytes]:
    """What of the environment the relay must share with a hook to handle its event: how the store opens, and
    the language its output is worded in (``TURNBACK_LANG``, the locale); each ``=VALUE``, or empty when unset."""
    from turnback.home import ENV_LANG, LOCALE_VARIABLES  # os and sys only: a hook can afford it

    names = (*SAME_STORE_ENV, ENV_LANG, *LOCALE_VARIABLES)
    return [b"" if value is None else b"=" + value for value in map(os.environb.get, map(os.fsencode, names))]


def _read_all(sock: _socket.socket) -> bytes:
    parts = []
    while chunk := sock.recv(1 << 16):
        parts.append(chunk)
    return b"".join(parts)


# -- the hook's side ---------------------------------------------------------------------------


def _request(raw: bytes, harness: str) -> bytes:
    """What a hook sends the relay: REQUEST_TAG, the harness, the caller's fields and :func:`_store_env`, then
    *raw*."""
    started = process_started_at()
    caller = [
        harness.encode(),
        b"%d" % os.getppid(),
        os.getcwdb(),
        os.environb.get(b"CLAUDE_PROJECT_DIR", b""),
        b"" if started is None else repr(started).encode(),
        os.environb.get(b"CLAUDE_ENV_FILE", b""),
    ]
    return b"\0".join([REQUEST_TAG, *caller, *_store_env(), raw])


def _exchange(
    sock: _socket.socket, request: bytes, timeout: float, meanwhile: Callable[[], object] | None = None
) -> tuple[bytes, bool]:
    """Send *request* and read the reply, the whole exchange within *timeout* (*meanwhile* is called once the
    request is sent, while the relay works on it); what came back, and whether it came whole (False: the
    connection broke or the time ran out). The socket is closed."""
    deadline = time.monotonic() + timeout
    parts: list[bytes] = []
    try:
        sock.settimeout(timeout)
        sock.sendall(request)
        sock.shutdown(_socket.SHUT_WR)
        if meanwhile is not None:
            meanwhile()
        while True:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))  # a bound on the whole reply, not each part
            chunk = sock.recv(1 << 16)
            if not chunk:
                return b"".join(parts), True
            parts.append(chunk)
    except OSError:
        return b"".join(parts), False
    finally:
        sock.close()


def _ask(sock: _socket.socket, request: bytes) -> tuple[str, str] | bytes | None:
    """What to print (stdout, stderr) when the relay took the event; None when it may have taken it and gave no
    answer (it must not be handled again); else the first byte of its answer: NOT_TAKEN, or none (an older
    relay, which reads no such request, or one that failed before taking it)."""
    reply, whole = _exchange(sock, request, REPLY_TIMEOUT_S)
    if not whole:
        return None
    if not reply.startswith(TAKEN):
        return reply[:1]
    size, newline, texts = reply[len(TAKEN) :].partition(b"\n")
    if not newline or not size.isdigit() or int(size) > len(texts):
        return None  # it took the event and ended before its answer
    return texts[: int(size)].decode("utf-8", "surrogatepass"), texts[int(size) :].decode("utf-8", "surrogatepass")


def start_relay(home: str) -> None:
    """Start the relay of the store in *home*, detached (it ends at once when one already serves it).

    The process is :mod:`turnback.cli.fast`'s, which serves the command line's requests beside hook events
    (a module above this one, named here, not imported: the relay is started as turnback starts its helpers).
    """
    import subprocess

    try:
        subprocess.Popen(
            [sys.executable, "-m", "turnback.cli.fast", "serve", home],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            cwd="/",
        )
    except OSError:
        pass  # no relay: every hook handles its own event, as without one


def hook_main(harness: str = "claude-code") -> int:
    """``turnback hook claude-code|codex|gemini|cursor``: hand the event on stdin to the relay, or handle it here.
    Exits 0."""
    try:
        return _hook(harness)
    except Exception as exc:  # never block the agent (the event's own trouble is handled and logged deeper)
        sys.stderr.write(failure_line(exc))
        return 0


def _hook(harness: str) -> int:
    from turnback.home import default_home

    raw = sys.stdin.buffer.read()
    home = default_home()
    relayed = os.environ.get(ENV_RELAY, "") != "0" and sys.platform.startswith("linux")
    sock = connect(home) if relayed else None
    reply = _ask(sock, _request(raw, harness)) if sock is not None else b""
    if reply is None:
        sys.stderr.write(_no_answer(home))
        return 0
    if isinstance(reply, tuple):
        sys.stdout.write(reply[0])
        sys.stderr.write(reply[1])
        return 0
    if sys.flags.no_site:  # started by launch.py: the engine's packages (cryptography, zstandard) are found by site
        import site

        site.main()
    event, why = parse(raw)
    if event is None or not wanted(event, harness):
        sys.stderr.write(why)
        return 0
    from turnback.hooks.events import Caller

    out, err = _handler(harness)(event, Caller.this_process(), home)
    if relayed and reply != NOT_TAKEN and os.path.isdir(home):
        start_relay(home)  # none answered: one for the next event
    sys.stdout.write(out)
    sys.stderr.write(err)
    return 0


# -- the command line's side (turnback.cli.fast) --------------------------------------------------


def cli_env() -> list[bytes]:
    """What of the environment the relay must share with a CLI process to serve it: :func:`_store_env`, and
    whether colour is off."""
    return [*_store_env(), b"" if (value := os.environb.get(os.fsencode(NO_COLOR))) is None else b"=" + value]


def cli_request(fields: list[bytes]) -> bytes:
    """What a CLI process sends the relay: CLI_REQUEST_TAG, :func:`cli_env`, then *fields*."""
    return b"\0".join([CLI_REQUEST_TAG, *cli_env(), *fields])


def ask_cli(
    sock: _socket.socket, request: bytes, meanwhile: Callable[[], object] | None = None
) -> tuple[bytes, bytes, bytes] | bytes:
    """The relay's answer to a CLI *request*: (status, stdout, stderr); else TAKEN when it took the request
    and ended before answering, or the first byte of what it said (NOT_TAKEN; none from an older relay, or
    one that failed before taking it). *meanwhile*: called while the relay works (:func:`_exchange`)."""
    reply, whole = _exchange(sock, request, CLI_REPLY_TIMEOUT_S, meanwhile)
    if not reply.startswith(TAKEN):
        return reply[:1]
    head, newline, texts = reply[len(TAKEN) :].partition(b"\n")
    status, _, size = head.partition(b" ")
    if not whole or not newline or not size.isdigit() or int(size) > len(texts):
        return TAKEN
    return status, texts[: int(size)], texts[int(size) :]


def cli_reply(status: bytes, out: bytes, err: bytes) -> bytes:
    """What the relay sends a CLI process after TAKEN (see :func:`ask_cli`)."""
    return b"%s %d\n" % (status, len(out)) + out + err


# -- the relay's side --------------------------------------------------------------------------


class _CodeWatch:
    """Whether a module of turnback's that this process loaded changed on disk since it was loaded."""

    def __init__(self) -> None:
        self.stamps: dict[str, int] = {}
        self.changed()

    def changed(self) -> bool:
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None)
            if (name == "turnback" or name.startswith("turnback.")) and path:
                try:
                    mtime = os.stat(path).st_mtime_ns
                except OSError:
                    return True
                if self.stamps.setdefault(path, mtime) != mtime:  # a module loaded since counts from then
                    return True
        return False


def serve(
    home: str,
    served: Callable[[list[bytes]], bytes] | None = None,
    busy: Callable[[], bool] | None = None,
    kept: KeptStore | None = None,
) -> int:
    """Serve hook events for the store in *home* until idle, the store gone, or the code changed; and the
    command line's requests with *served* (their fields -> :func:`cli_reply`), when given. While *busy* says
    so (a command it began still runs), it is not idle. *kept*: the store the requests share (else one of
    its own), closed when the relay ends."""
    import contextlib
    import fcntl
    import socket

    import turnback.engine  # what every event needs, imported once, before the first one

    if kept is None:
        kept = turnback.engine.KeptStore(lambda: turnback.open(home))

    if not sys.platform.startswith("linux"):
        return 1
    try:
        lock = os.open(os.path.join(home, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        return 0  # the store folder is gone
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # another relay serves this store
        # A big project's first Bash call starts its watcher, which the commands of every session share.
        turnback.engine.Engine.auto_start_watchers()
        # Held before a hook can connect: once hooks reach it, the relay creates no file in the store (its
        # opening may), so a store deleted then is gone for good.
        with _StoreKeptOpen(kept):
            path = os.path.join(home, SOCKET_NAME)
            if os.path.lexists(path):
                os.unlink(path)  # a relay that was killed left it (the lock says none serves)
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                _at_socket(home, server.bind)
            except OSError:
                server.close()
                return 0  # the store's file system holds no sockets: every hook handles its own event
            bound = os.lstat(path)

            def retire() -> None:
                with contextlib.suppress(OSError):
                    if os.path.samestat(os.lstat(path), bound):
                        os.unlink(path)  # only ours: a store made again in its place may have a relay of its own

            try:
                os.chmod(path, 0o600)
                server.listen(16)
                return _serve(home, server, retire, served, busy, kept)
            finally:
                server.close()
                retire()
    finally:
        os.close(lock)


class _StoreKeptOpen:
    """The store opened before the first event and kept open, idle between events, while the relay runs (each
    event and request an engine of its own over it: *kept*; a shared store is held beside it, so that this
    host's lease is renewed while the relay runs); closed when the relay ends.

    SQLite's last connection to close writes the log (WAL) into the database and deletes it, syncing both:
    some 10 ms of every event when each event's connection was the last. Held open, the log stays and is
    written back as SQLite's own automatic checkpoints do it, once per thousand pages, and when the relay
    ends. Every commit is as durable as before (``synchronous=FULL`` on the log).
    """

    def __init__(self, kept: KeptStore) -> None:
        self.kept = kept
        self.held: Any = None

    def __enter__(self) -> None:
        import turnback

        try:
            engine = self.kept.engine()
        except (turnback.TurnbackError, OSError):
            return  # each event opens it then, and says what is wrong
        if self.kept.keeps(engine):
            self.kept.give_back(engine)
        else:
            self.held = engine  # a shared store, opened for each request: this one renews the host's lease

    def __exit__(self, *exc: object) -> None:
        if self.held is not None:
            self.held.close()
        self.kept.close()


def _serve(
    home: str,
    server: socket.socket,
    retire: Callable[[], None],
    served: Callable[[list[bytes]], bytes] | None = None,
    busy: Callable[[], bool] | None = None,
    kept: KeptStore | None = None,
) -> int:
    """Take events until it is time to end; then *retire* the socket (no hook connects any more) and answer
    the hooks already queued NOT_TAKEN, so that each handles its own event instead of losing it."""
    server.settimeout(1.0)
    idle = float(os.environ.get(ENV_IDLE) or IDLE_S)
    code = _CodeWatch()
    mine = _store_env()
    mine_cli = cli_env()
    last = time.monotonic()
    retiring = False
    code_changed = False  # as looked at after the last answer
    try:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                if retiring:
                    return 0  # every hook that connected before the socket went has been answered
                # Not idle while a command it began runs: it holds the store open (in a shared store, that
                # renews this host's lease, so that other hosts see the command's turn running).
                idled = time.monotonic() - last > idle and not (busy is not None and busy())
                if idled or not os.path.isdir(home) or code.changed():
                    retire()
                    retiring = True
                    server.settimeout(0.05)
                continue
            last = time.monotonic()
            with conn:
                stale = retiring or code_changed
                try:
                    conn.settimeout(READ_TIMEOUT_S)
                    if _same_user(conn):
                        _answer(conn, home, kept, mine, stale=stale, cli=(mine_cli, served))
                except (OSError, ValueError):
                    pass  # that hook hears nothing it can use: it says so, or handles the event itself
            if stale and not retiring:
                retire()
                retiring = True
                server.settimeout(0.05)
            # After the answer, not before it: the client goes on meanwhile (a stat of each module, some 1 ms of
            # each request). So at most one request is answered by code that changed on disk since (an upgrade
            # while the relay waits: else the check when none came for a second sees it).
            code_changed = code.changed()
    finally:
        server.close()


def _answer(
    conn: socket.socket,
    home: str,
    kept: KeptStore | None,
    mine: list[bytes],
    *,
    stale: bool,
    cli: tuple[list[bytes], Callable[[list[bytes]], bytes] | None] = ([], None),
) -> None:
    """Read one hook's request (:func:`_request`) and handle its event, or tell it to (NOT_TAKEN): when this
    relay is *stale* or the hook's environment is not *mine*. A CLI process's request (:func:`cli_request`)
    goes to *cli*'s server, when the process's environment is *cli*'s."""
    from turnback.hooks.events import Caller

    request = _read_all(conn)
    if request.startswith(CLI_REQUEST_TAG + b"\0"):
        env, served = cli
        _tag, *fields = request.split(b"\0")
        if stale or served is None or fields[: len(env)] != env:
            conn.sendall(NOT_TAKEN)
            return
        conn.sendall(TAKEN)  # from here on the CLI process counts the request as handed over
        conn.sendall(served(fields[len(env) :]))
        return
    if not request.startswith(REQUEST_TAG + b"\0"):
        conn.sendall(OLD_NOT_TAKEN)  # an older hook's JSON
        return
    _tag, *fields, raw = request.split(b"\0", CALLER_FIELDS + len(mine) + 1)
    if stale or fields[CALLER_FIELDS:] != mine:
        conn.sendall(NOT_TAKEN)
        return
    harness, parent, cwd, project_dir, started, env_file = fields[:CALLER_FIELDS]
    caller = Caller(
        int(parent),
        os.fsdecode(cwd),
        os.fsdecode(project_dir) or None,
        float(started) if started else None,
        os.fsdecode(env_file) or None,
    )
    conn.sendall(TAKEN)  # from here on the hook counts the event as handed over, whatever happens
    event, why = parse(raw)
    name = os.fsdecode(harness)
    out, err = _handler(name)(event, caller, home, kept) if event is not None and wanted(event, name) else ("", why)
    stdout = out.encode("utf-8", "surrogatepass")
    conn.sendall(b"%d\n" % len(stdout) + stdout + err.encode("utf-8", "surrogatepass"))

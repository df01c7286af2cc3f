"""The watcher: the paths changed in a project since each scan, as git's fsmonitor keeps them.

``turnback watch start`` runs one watcher per project. It watches every
folder of the project (never ``.git``, never turnback's own store) with
inotify, and numbers each change it sees. A scan asks it over a Unix
socket in the store folder (mode 0700: only its owner can ask): "what
changed since token T?" The watcher first reads every event queued so far
(inotify queues an event while the changing call runs, so a command that
has ended has all its events queued), then answers with the paths and a new
token; the scan then visits only those paths.

The answer is "I do not know" (and the scan visits everything) when the
watcher was not running at T (the token names another watcher), when the
kernel dropped events since (queue overflow), when it holds too many
paths, or when it could not watch a folder (``fs.inotify.max_user_watches``).
A change is never missed because the watcher was away.

Limits: writes through ``mmap`` and changes made on another machine (a
network file system) make no inotify event; a project where those happen
should not run the watcher.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import selectors
import signal
import socket
import stat
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

from turnback.capture import inotify
from turnback.catalog import Message
from turnback.errors import RefusedError
from turnback.procs import process_alive, process_start

WATCH_FOLDER = "watch"
MAX_CHANGED = 200_000  # paths kept; past it, a scan since an older token visits everything
ASK_TIMEOUT_S = 2.0
_REQUEST_LIMIT = 4096


class WatchAnswer(NamedTuple):
    """A watcher's answer: the token that names this moment, and what changed since the asked one.

    *paths* maps each changed path to whether everything below it must be
    visited too (a folder that appeared); ``None`` when the watcher does not
    know (the scan visits everything).
    """

    token: str
    paths: dict[str, bool] | None
    reason: Message | None  # why the watcher does not know, when it does not
    folders: int  # how many folders it watches


class WatcherStatus(NamedTuple):
    pid: int
    folders: int
    reason: Message | None  # why scans visit everything even so, if they do (beyond a first scan)


def watch_dir(home: str) -> str:
    return os.path.join(home, WATCH_FOLDER)


def _names(project_id: str) -> tuple[str, str, str]:
    return f"{project_id}.sock", f"{project_id}.pid", f"{project_id}.lock"


@contextlib.contextmanager
def _short_path(folder: str, name: str) -> Iterator[str]:
    """A path to *name* in *folder* that fits a Unix socket address (108 bytes) however deep the store is."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{name}"
    finally:
        os.close(fd)


# -- asking a watcher (the scan's side) ---------------------------------------------------


def ask(home: str, project_id: str, since: str | None) -> WatchAnswer | None:
    """What the project's watcher saw since the token *since*; ``None`` when no watcher answers."""
    folder = watch_dir(home)
    sock_name = _names(project_id)[0]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client, _short_path(folder, sock_name) as path:
            client.settimeout(ASK_TIMEOUT_S)
            client.connect(path)
            client.sendall(json.dumps({"since": since}).encode() + b"\n")
            data = b""
            while chunk := client.recv(1 << 20):
                data += chunk
        reply = json.loads(data)
        paths = reply["paths"]
        return WatchAnswer(
            str(reply["token"]),
            None if paths is None else {str(path): bool(deep) for path, deep in paths},
            _reason_from_wire(reply["reason"]),
            int(reply["folders"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None  # no watcher, a dead one, or a stranger: the scan visits everything


def _reason_to_wire(reason: Message | None) -> dict[str, Any] | None:
    return None if reason is None else reason.to_json()


def _reason_from_wire(reason: object) -> Message | None:
    """A watcher's reason as it sends it: a message's JSON, or the text an older turnback's watcher sends."""
    if reason is None:
        return None
    if isinstance(reason, dict):
        return Message.from_json(reason)
    return Message("plain", text=str(reason))


def watcher_status(home: str, project_id: str) -> WatcherStatus | None:
    """The project's running watcher, if there is one."""
    pid = _running_pid(home, project_id)
    if pid is None:
        return None
    answer = ask(home, project_id, None)
    if answer is None:
        return WatcherStatus(pid, 0, Message("watcher_does_not_answer"))
    return WatcherStatus(pid, answer.folders, answer.reason)


def _running_pid(home: str, project_id: str) -> int | None:
    """The pid its pid file names, when that process still runs."""
    try:
        with open(os.path.join(watch_dir(home), _names(project_id)[1])) as handle:
            pid, start = (int(value) for value in handle.read().split()[:2])
    except (OSError, ValueError):
        return None
    return pid if process_alive(pid, start) else None


def watcher_running(home: str, project_id: str) -> bool:
    """Whether the project's watcher runs, by its pid file alone (asking it would cost a scan's round trip)."""
    return _running_pid(home, project_id) is not None


def stop_watcher(home: str, project_id: str) -> int | None:
    """Stop the project's watcher; returns its pid, or ``None`` when none ran."""
    status = watcher_status(home, project_id)
    if status is None:
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(status.pid, signal.SIGTERM)
    return status.pid


# -- the watcher (its own process) ----------------------------------------------------------


class _Watcher:
    def __init__(self, root: str, skip: frozenset[str]):
        self.root = root.rstrip("/") or "/"
        self.skip = skip  # folders never watched: turnback's store when it is inside the project
        self.notify = inotify.Inotify()
        self.instance = f"{os.getpid()}-{secrets.token_hex(8)}"
        self.seq = 0
        self.floor = 1  # a token below it asks across lost events: answered "I do not know"
        self.changed: dict[str, tuple[int, bool]] = {}
        self.folder_of: dict[int, str] = {}
        self.watch_of: dict[str, int] = {}
        self.unbound: set[int] = set()  # watches whose folder left the tree (or came back: then bound again)
        self.broken: Message | None = None  # why nothing can be known any more (the root went away)
        self.partial: Message | None = None  # why some folder is not watched
        st = os.stat(self.root)
        self.root_id = (st.st_dev, st.st_ino)
        self.add_tree("")
        self.floor = self.seq + 1  # what changed while the first watches were set up is not known

    def _ignored(self, rel: str) -> bool:
        return rel.split("/")[-1] == ".git" or rel in self.skip

    def _bind(self, folder: str, wd: int) -> None:
        """*wd* watches *folder* now; the kernel gives a folder that moved its old watch back."""
        before = self.folder_of.get(wd)
        if before is not None and self.watch_of.get(before) == wd:
            del self.watch_of[before]
        replaced = self.watch_of.get(folder)
        if replaced is not None and replaced != wd:
            self.folder_of.pop(replaced, None)
            self.unbound.add(replaced)
        self.folder_of[wd] = folder
        self.watch_of[folder] = wd
        self.unbound.discard(wd)

    def add_tree(self, rel: str) -> None:
        """Watch the folder *rel* and every folder below it (links are not followed)."""
        pending = [rel]
        while pending:
            folder = pending.pop()
            full = os.path.join(self.root, folder) if folder else self.root
            try:
                wd = self.notify.add_watch(full)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.ENOMEM):
                    self.partial = Message("watch_limit_reached", folders=len(self.watch_of))
                elif exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                    shown = Message("plain", text=folder) if folder else Message("the_project_root")
                    self.partial = Message("cannot_watch_folder", folder=shown, error=exc.strerror or "")
                continue  # gone or replaced since it was listed: its removal is an event of its own
            self._bind(folder, wd)
            try:
                with os.scandir(full) as listing:
                    for entry in listing:
                        child = f"{folder}/{entry.name}" if folder else entry.name
                        if entry.is_dir(follow_symlinks=False) and not self._ignored(child):
                            pending.append(child)
            except OSError:
                continue

    def _forget_tree(self, rel: str) -> None:
        """*rel* and what is below it moved away: their watches wait, unbound, in case it comes back."""
        prefix = rel + "/"
        for folder in [f for f in self.watch_of if f == rel or f.startswith(prefix)]:
            wd = self.watch_of.pop(folder)
            if self.folder_of.get(wd) == folder:
                del self.folder_of[wd]
                self.unbound.add(wd)

    def _rewatch(self) -> None:
        """After lost events: watch the tree as it is now, from scratch."""
        previous = set(self.unbound) | set(self.folder_of)
        self.folder_of, self.watch_of, self.unbound, self.partial = {}, {}, set(), None
        self.add_tree("")
        self.unbound = previous - set(self.folder_of)

    def _mark(self, rel: str, deep: bool) -> None:
        self.seq += 1
        previous = self.changed.get(rel)
        self.changed[rel] = (self.seq, deep or (previous is not None and previous[1]))
        if len(self.changed) > MAX_CHANGED:
            self.changed.clear()
            self.floor = self.seq + 1

    def drain(self) -> None:
        """Take in every event queued so far."""
        overflowed = False
        moved: set[str] = set()
        for event in self.notify.read():
            if event.mask & inotify.IN_Q_OVERFLOW:
                overflowed = True
                continue
            folder = self.folder_of.get(event.wd)
            if folder is None:
                if event.mask & inotify.IN_IGNORED:
                    self.unbound.discard(event.wd)
                continue  # a watch whose folder left the tree
            if event.mask & inotify.IN_IGNORED:
                if self.watch_of.get(folder) == event.wd:
                    del self.watch_of[folder]
                del self.folder_of[event.wd]
                if not folder:
                    self.broken = Message("project_folder_gone")
                continue
            if not event.name:  # about the watched folder itself
                if event.mask & (inotify.IN_DELETE_SELF | inotify.IN_MOVE_SELF | inotify.IN_UNMOUNT) and not folder:
                    self.broken = Message("project_folder_gone")
                self._mark(folder, deep=False)
                continue
            name = os.fsdecode(event.name)
            rel = f"{folder}/{name}" if folder else name
            if self._ignored(rel):
                continue
            is_dir = bool(event.mask & inotify.IN_ISDIR)
            if is_dir and event.mask & (inotify.IN_MOVED_FROM | inotify.IN_MOVED_TO):
                moved.add(rel)  # settled after the batch: two folders may have swapped places
            elif is_dir and event.mask & inotify.IN_CREATE:
                self.add_tree(rel)
            self._mark(rel, deep=bool(is_dir and event.mask & (inotify.IN_CREATE | inotify.IN_MOVED_TO)))
        # Which watch belongs where after folders moved: the kernel knows (it hands back a folder's watch).
        for rel in moved:
            self._forget_tree(rel)
        for rel in sorted(moved, key=lambda path: path.count("/")):
            if os.path.isdir(os.path.join(self.root, rel)) and not os.path.islink(os.path.join(self.root, rel)):
                self.add_tree(rel)
        if overflowed:  # events were dropped: folders made or moved meanwhile may not be watched, or wrongly
            self.seq += 1
            self.floor = self.seq + 1
            self._rewatch()
        for wd in self.unbound:  # moved out of the tree and not back: nothing to watch there
            self.notify.rm_watch(wd)
        self.unbound.clear()

    def _check_root(self) -> None:
        try:
            st = os.stat(self.root)
        except OSError:
            st = None
        if st is None or (st.st_dev, st.st_ino) != self.root_id:
            self.broken = Message("project_folder_replaced")

    def answer(self, since: object) -> dict[str, Any]:
        self.drain()
        self._check_root()
        reply: dict[str, Any] = {
            "token": f"{self.instance}:{self.seq}",
            "paths": None,
            "reason": _reason_to_wire(self.broken or self.partial),
            "folders": len(self.watch_of),
        }
        instance, _, seq = since.rpartition(":") if isinstance(since, str) else ("", "", "")
        if reply["reason"] is None and instance == self.instance and seq.isdigit() and int(seq) >= self.floor - 1:
            after = int(seq)
            reply["paths"] = [[path, deep] for path, (at, deep) in self.changed.items() if at > after]
        return reply


def _serve_client(watcher: _Watcher, client: socket.socket) -> None:
    client.settimeout(ASK_TIMEOUT_S)
    data = b""
    while b"\n" not in data and len(data) < _REQUEST_LIMIT:
        chunk = client.recv(_REQUEST_LIMIT)
        if not chunk:
            break
        data += chunk
    try:
        since = json.loads(data).get("since")
    except (ValueError, AttributeError):
        return
    client.sendall(json.dumps(watcher.answer(since)).encode())


def run_watcher(
    home: str, project_id: str, root: str, skip: frozenset[str], *, on_ready: Any = None, idle_s: float | None = None
) -> None:
    """Watch *root* until SIGTERM or SIGINT, answering scans; one watcher per project (a lock says so).

    *idle_s*: end, too, once no scan asked for that long (a watcher started automatically)."""
    folder = watch_dir(home)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    sock_name, pid_name, lock_name = _names(project_id)
    lock_fd = os.open(os.path.join(folder, lock_name), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FileExistsError(errno.EEXIST, "a watcher already runs for this project") from None
        watcher = _Watcher(root, skip)
        if idle_s is not None and watcher.partial is not None:
            # Started automatically, it would only hold inotify watches (the user's, shared with editors) while
            # every scan visits everything: it ends, and its log says why (see Watcher.start_if_big).
            raise RefusedError(Message("watch_auto_gave_up", why=watcher.partial))
        stopping = False

        def stop(_signum: int, _frame: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_write)  # a signal wakes the select below at once
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(folder, sock_name))
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with _short_path(folder, sock_name) as path:
            server.bind(path)
        os.chmod(os.path.join(folder, sock_name), stat.S_IRUSR | stat.S_IWUSR)
        server.listen(16)
        pid_path = os.path.join(folder, pid_name)
        with open(pid_path + ".tmp", "w") as handle:
            handle.write(f"{os.getpid()} {process_start(os.getpid())}\n")
        os.replace(pid_path + ".tmp", pid_path)
        if on_ready is not None:
            on_ready(watcher.partial)
        selector = selectors.DefaultSelector()
        selector.register(server, selectors.EVENT_READ, "client")
        selector.register(watcher.notify.fd, selectors.EVENT_READ, "events")
        selector.register(wake_read, selectors.EVENT_READ, "signal")
        asked = time.monotonic()
        try:
            while not stopping and watcher.broken is None:
                if idle_s is not None and time.monotonic() - asked > idle_s:
                    break  # the socket goes first (below): a scan from now on visits everything
                for key, _ in selector.select(timeout=1.0 if idle_s is None else min(1.0, idle_s)):
                    if key.data == "signal":
                        with contextlib.suppress(BlockingIOError):
                            os.read(wake_read, 64)
                        continue
                    if key.data == "events":
                        watcher.drain()
                        continue
                    client, _ = server.accept()
                    asked = time.monotonic()
                    with client, contextlib.suppress(OSError):
                        _serve_client(watcher, client)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, sock_name))
            with contextlib.suppress(FileNotFoundError):
                os.unlink(pid_path)
            server.close()
            watcher.notify.close()
            signal.set_wakeup_fd(-1)
            os.close(wake_read)
            os.close(wake_write)
    finally:
        os.close(lock_fd)


__all__ = [
    "WatchAnswer",
    "WatcherStatus",
    "ask",
    "run_watcher",
    "stop_watcher",
    "watch_dir",
    "watcher_running",
    "watcher_status",
]

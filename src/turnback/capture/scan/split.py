"""A full scan of a large tree split over processes that only stat (``find_changes``); the paths they find
changed are then recorded by ``rescan_tree``, in the process that forked them, the only one that writes."""

from __future__ import annotations

import collections
import contextlib
import errno
import fcntl
import functools
import gc
import itertools
import marshal
import os
import signal
import stat
import struct
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO, NoReturn

from turnback.capture.scan.entries import ScanRules, Snapshot
from turnback.capture.scan.heap import trim_heap
from turnback.capture.scan.walk import DIR_FLAGS, NotKnown, Scanner, open_folder
from turnback.model import BlobId


class _ChangeFinder(Scanner):
    """A scan that stores nothing and reads no file: it notes which paths may differ from *previous*, for
    ``rescan_tree`` to record, and counts the others. Several of them walk one tree at once, in processes of
    their own, and only the process that forked them writes to the store.

    It keeps no object per path it meets: a process forked from a long-lived one shares that one's pages
    until either writes them, and new objects kept land on pages all over its heap, each then copied.
    """

    keeps_unchanged = False

    def __init__(self, rules: ScanRules, previous: Snapshot, scan_start_ns: int, root: str):
        super().__init__(rules, previous, _stores_nothing, scan_start_ns, None, root)
        self.changed: dict[str, bool] = {}
        self.closed: list[str] = []  # folders of *previous* met but not entered: all below them goes unmet

    def record(self, dir_fd: int, name: str, path: str, st: os.stat_result) -> bool:
        was = self.previous.get(path)
        folder = stat.S_ISDIR(st.st_mode)
        was_folder = was is not None and was.kind == "dir"
        enter = folder and was_folder and self.rules.excluded_by(path, is_dir=True) is None
        self.changed[path] = False  # a folder new to the snapshot is walked whole by the rescan anyway
        if was_folder and not enter:
            self.closed.append(path)
        return enter

    def entry_unreadable(self, path: str, exc: OSError) -> None:
        raise NotKnown from exc  # what a full scan records then, only a full scan records

    def folder_unreadable(self, path: str, exc: OSError) -> None:
        raise NotKnown from exc

    def folder_gone(self, path: str, exc: OSError) -> None:
        raise NotKnown from exc  # it was counted as met: changing under the walk, a full scan takes it

    def known(self) -> int:
        """How many paths of *previous* this finder met."""
        return self.unchanged + sum(path in self.previous for path in self.changed)


def _stores_nothing(chunks: Iterable[bytes]) -> tuple[BlobId, int]:
    raise AssertionError("a change finder reads no file")


# The folders near the top are handed out one at a time, so that a process that is done takes the next one.
SPLIT_UNITS = 256
SPLIT_MAX_PROCESSES = 4
_UNIT = struct.Struct("<I")
_PIPE_HOLDS = 1 << 16  # what a pipe holds unless it is asked for more (Linux, macOS)


def scan_processes() -> int:
    """How many processes a full scan of a large tree uses: ``TURNBACK_SCAN_PROCESSES``, or one per CPU this
    process may run on (at most ``SPLIT_MAX_PROCESSES``); one where forking is unsafe (other threads running)."""
    if not hasattr(os, "fork") or _threads_unsafe_to_fork():
        return 1
    return _wanted_processes()


def split_only_elsewhere() -> bool:
    """Whether a scan would be split over processes but for this process's other threads (an MCP server's, a web
    server's): a process started afresh, which has none, can split it."""
    return hasattr(os, "fork") and _wanted_processes() > 1 and _threads_unsafe_to_fork()


def _wanted_processes() -> int:
    wanted = os.environ.get("TURNBACK_SCAN_PROCESSES", "")
    if wanted.isdigit() and int(wanted) > 0:
        return int(wanted)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cpus, SPLIT_MAX_PROCESSES)


def holds_at_least(root: str, count: int) -> bool:
    """Whether the tree at *root* holds at least *count* paths (links not followed; listing stops there)."""
    folders, found = [root], 0
    while folders:
        try:
            with os.scandir(folders.pop()) as listing:
                for entry in listing:
                    found += 1
                    if found >= count:
                        return True
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
        except OSError:
            continue  # a folder it cannot list: the scan says so, this only counts
    return False


# Threads a forked scan process does without: a file tool's staged write (capture/calls.py) holds no lock the
# child takes (its queue's lock is made anew in a child), so a server that wrote a file a moment ago still splits.
FORK_SAFE_THREADS = frozenset({"turnback-staged-write"})


def _threads_unsafe_to_fork() -> bool:
    """Whether a thread other than this one runs that a forked child might need a lock of."""
    me = threading.current_thread()
    return any(thread is not me and thread.name not in FORK_SAFE_THREADS for thread in threading.enumerate())


def take_units(queue: int, units: list[tuple[int, str]], walk: Callable[[int, str], object]) -> None:
    """*walk* (folder descriptor, prefix) each unit whose number this process reads first from the pipe *queue*."""
    while record := os.read(queue, _UNIT.size):  # a pipe read of 4 bytes is never split between readers
        walk(*units[_UNIT.unpack(record)[0]])


def unit_queue(units: list[tuple[int, str]]) -> int | None:
    """A pipe to read the units' numbers from, each once, whichever process reads it; ``None`` when a pipe cannot
    hold them all (a folder near the top with hundreds of thousands of folders), or no pipe can be made for want of
    descriptors (the units hold them): the caller scans in one process.

    It is filled before any process reads it, so it is made as large as they need (a pipe holds 64 KiB, 16,384
    units, unless asked for more, up to the system's limit) and written without waiting.
    """
    payload = b"".join(_UNIT.pack(n) for n in range(len(units)))
    try:
        queue, feed = os.pipe()
    except OSError as exc:
        if exc.errno in (errno.EMFILE, errno.ENFILE):  # the units hold every descriptor this process may have
            return None
        raise
    try:
        if len(payload) > _PIPE_HOLDS and hasattr(fcntl, "F_SETPIPE_SZ"):
            with contextlib.suppress(OSError):
                fcntl.fcntl(feed, fcntl.F_SETPIPE_SZ, len(payload))
        os.set_blocking(feed, False)
        try:
            written = os.write(feed, payload)
        except BlockingIOError:
            written = 0
    finally:
        os.close(feed)
    if written < len(payload):
        os.close(queue)
        return None
    return queue


def split_units(scanner: Scanner, root_fd: int) -> list[tuple[int, str]]:
    """The folders near the top of the tree at *root_fd* (each opened, at its prefix), visited breadth first by
    *scanner* until they are ``SPLIT_UNITS`` or none is left; *root_fd* is theirs to close too."""
    frontier = collections.deque([(root_fd, "")])
    try:
        while frontier and len(frontier) < SPLIT_UNITS:
            fd, prefix = frontier[0]
            for name in scanner.list_folder(fd, prefix):
                sub = scanner.enter_folder(fd, prefix, name)
                if sub is not None:
                    frontier.append((sub, prefix + name + "/"))
            os.close(frontier.popleft()[0])
    except BaseException:
        for fd, _ in frontier:
            os.close(fd)
        raise
    return list(frontier)


def fork_worker(work: Callable[[BinaryIO], object], children: dict[int, int]) -> None:
    """Start a process that runs *work* with the pipe it sends on, and leaves; note it in *children* (pid: the
    pipe to read what it sends) before any signal can cut the parent short."""
    found, sent = os.pipe()
    pid = -1
    try:
        with _signals_held():
            pid = os.fork()
            if pid == 0:
                _work_in_child(work, sent)
            children[pid] = found
    finally:
        os.close(sent)
        if pid < 0:
            os.close(found)


def _work_in_child(work: Callable[[BinaryIO], object], sent: int) -> NoReturn:
    """The child: work, send, and leave without running any of the parent's clean-up."""
    code = 1
    try:
        stops = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        for stop in stops:  # not the handlers of the program that embeds turnback: these end the child, and only it
            signal.signal(stop, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)  # held since the fork
        gc.disable()  # a collection would touch, and so copy, every page of the parent's objects
        with os.fdopen(sent, "wb") as out:
            work(out)
        code = 0
    finally:
        os._exit(code)


def end_workers(children: dict[int, int]) -> None:
    """Kill and reap the workers still in *children* (a scan cut short: none outlives it), closing their pipes
    (those not already closed: -1). One already reaped is only forgotten: its process id may be another's now."""
    ours = [pid for pid in children if _unreaped(pid)]
    for pid in ours:
        os.kill(pid, signal.SIGKILL)
    for found in children.values():
        if found >= 0:
            os.close(found)
    for pid in ours:
        os.waitpid(pid, 0)


def _unreaped(pid: int) -> bool:
    """Whether *pid* is still this process's child, running or ended but not reaped (its id is no one else's).

    A worker can be reaped and still be listed: a signal's handler that was due before ``reap_worker`` held the
    signals runs as soon as the wait returns, before the worker is forgotten."""
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def reap_worker(children: dict[int, int], pid: int) -> bool:
    """Wait for the worker *pid* (its pipe closed already), forget it; whether it ended well."""
    with _signals_held():  # a child reaped is a child forgotten, and the other way round (but see _unreaped)
        status = os.waitpid(pid, 0)[1]
        del children[pid]
    return status == 0


def _send_found(finder: _ChangeFinder, queue: int, units: list[tuple[int, str]], out: BinaryIO) -> None:
    finder.unchanged, finder.changed, finder.closed = 0, {}, []
    take_units(queue, units, finder.walk_from)
    out.write(marshal.dumps((finder.known(), finder.changed, finder.closed)))


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Signals wait (their handlers run after the block), so that the block is never cut short halfway."""
    # The mask is read before anything is blocked: a handler that raises in the call that blocks (Python runs
    # the handlers of signals already come right there) leaves through the restoring finally, never with every
    # signal still blocked (a ^C later would then do nothing, in this process and in every one it starts).
    held = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def find_changes(
    root: str, rules: ScanRules, previous: Snapshot, *, now_ns: int, processes: int
) -> dict[str, bool] | None:
    """The paths a full scan of *root* would find changed since *previous*, found by *processes* processes
    that only stat, as ``rescan_tree`` takes them (each ``False``: a folder new to the snapshot is walked whole
    anyway); ``None`` when only a full scan can tell."""
    finder = _ChangeFinder(rules, previous, now_ns, root)
    children: dict[int, int] = {}  # pid: the pipe it sends what it found on
    trim_heap()  # what this process holds counts once more for each page a child comes to hold of its own
    units: list[tuple[int, str]] = []
    queue = -1
    try:
        units = split_units(finder, os.open(root, DIR_FLAGS))
        queued = unit_queue(units)
        if queued is None:
            return None
        queue = queued
        for _ in range(processes - 1):
            try:
                fork_worker(functools.partial(_send_found, finder, queue, units), children)
            except OSError:  # no more processes now: the ones there are walk it all
                break
        take_units(queue, units, finder.walk_from)
        known = finder.known()
        changed = finder.changed
        for pid, found in list(children.items()):
            with os.fdopen(found, "rb", closefd=False) as pipe:
                payload = pipe.read()
            children[pid] = -1
            os.close(found)
            if not reap_worker(children, pid):
                return None
            their_known, their_changed, their_closed = marshal.loads(payload)
            known += their_known
            changed.update(their_changed)
            finder.closed += their_closed
        if known != len(previous):  # some paths have gone (the rescan finds them so), or the count is wrong
            gone = _gone(root, previous, changed, finder.closed, len(previous) - known)
            if gone is None:
                return None
            changed.update(dict.fromkeys(gone, False))
    except NotKnown:
        return None
    finally:
        end_workers(children)
        for fd, _ in units:
            os.close(fd)
        if queue >= 0:
            os.close(queue)
    return changed


def _gone(root: str, previous: Snapshot, changed: dict[str, bool], closed: list[str], missing: int) -> list[str] | None:
    """The *missing* paths of *previous* a walk did not meet, each named once (not what is below a folder gone,
    nor below one it met and did not enter, *closed*); ``None`` when what is found does not account for all.

    They are looked for in the folders the walk found changed (and the top one): adding or removing an entry
    sets a folder's mtime and ctime. The count checks it: were one gone from elsewhere, a full scan is done.
    """
    folders = {path for path in changed if (entry := previous.get(path)) is not None and entry.kind == "dir"}
    folders.difference_update(closed)
    folders.add("")
    were: dict[str, list[str]] = {}
    for path in previous:
        folder, _, name = path.rpartition("/")
        if folder in folders:
            were.setdefault(folder, []).append(name)
    gone: list[str] = []
    root_fd = os.open(root, DIR_FLAGS)
    try:
        for folder, names in were.items():
            fd = open_folder(root_fd, folder)
            try:
                now = set(os.listdir(fd)) if fd is not None else set()  # no folder there now: all of it gone
            finally:
                if fd is not None:
                    os.close(fd)
            gone.extend(f"{folder}/{name}" if folder else name for name in names if name not in now)
    finally:
        os.close(root_fd)
    below = tuple(path + "/" for path in itertools.chain(gone, closed) if previous[path].kind == "dir")
    found = len(gone) + (sum(1 for path in previous if path.startswith(below)) if below else 0)
    return gone if found == missing else None

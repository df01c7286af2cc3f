"""A full scan of a large tree split over processes that only stat (``find_changes``); the paths they find
changed are then recorded by ``rescan_tree``, in the process that forked them, the only one that writes."""

from __future__ import annotations

import collections
import contextlib
import gc
import itertools
import marshal
import os
import signal
import stat
import struct
import threading
from collections.abc import Iterable, Iterator
from typing import NoReturn

from turnback.capture.scan.entries import ScanRules, Snapshot
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

    def take(self, queue: int, units: list[tuple[int, str]]) -> None:
        """Walk the units whose numbers this process reads first from the pipe *queue*."""
        while record := os.read(queue, _UNIT.size):  # a pipe read of 4 bytes is never split between readers
            self.walk_from(*units[_UNIT.unpack(record)[0]])


def _stores_nothing(chunks: Iterable[bytes]) -> tuple[BlobId, int]:
    raise AssertionError("a change finder reads no file")


# The folders near the top are handed out one at a time, so that a process that is done takes the next one.
SPLIT_UNITS = 256
SPLIT_MAX_PROCESSES = 4
_UNIT = struct.Struct("<I")


def scan_processes() -> int:
    """How many processes a full scan of a large tree uses: ``TURNBACK_SCAN_PROCESSES``, or one per CPU this
    process may run on (at most ``SPLIT_MAX_PROCESSES``); one where forking is unsafe (other threads running)."""
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return 1
    wanted = os.environ.get("TURNBACK_SCAN_PROCESSES", "")
    if wanted.isdigit() and int(wanted) > 0:
        return int(wanted)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cpus, SPLIT_MAX_PROCESSES)


def _fork_finder(finder: _ChangeFinder, queue: int, units: list[tuple[int, str]], children: dict[int, int]) -> None:
    """Start a process that walks the units it reads from *queue* and sends what it found; note it in
    *children* (pid: the pipe it sends on) before any signal can cut the parent short."""
    found, sent = os.pipe()
    pid = -1
    try:
        with _signals_held():
            pid = os.fork()
            if pid == 0:
                _find_in_child(finder, queue, units, sent)
            children[pid] = found
    finally:
        os.close(sent)
        if pid < 0:
            os.close(found)


def _find_in_child(finder: _ChangeFinder, queue: int, units: list[tuple[int, str]], sent: int) -> NoReturn:
    """The child: walk, send, and leave without running any of the parent's clean-up."""
    code = 1
    try:
        stops = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        for stop in stops:  # not the handlers of the program that embeds turnback: these end the child, and only it
            signal.signal(stop, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)  # held since the fork
        gc.disable()  # a collection would touch, and so copy, every page of the parent's objects
        finder.unchanged, finder.changed, finder.closed = 0, {}, []
        finder.take(queue, units)
        found = marshal.dumps((finder.known(), finder.changed, finder.closed))
        with os.fdopen(sent, "wb") as out:
            out.write(found)
        code = 0
    finally:
        os._exit(code)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Signals wait (their handlers run after the block), so that the block is never cut short halfway."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def find_changes(
    root: str, rules: ScanRules, previous: Snapshot, *, now_ns: int, processes: int
) -> dict[str, bool] | None:
    """The paths a full scan of *root* would find changed since *previous*, found by *processes* processes
    that only stat, as ``rescan_tree`` takes them (each ``False``: a folder new to the snapshot is walked whole
    anyway); ``None`` when only a full scan can tell."""
    finder = _ChangeFinder(rules, previous, now_ns, root)
    frontier = collections.deque([(os.open(root, DIR_FLAGS), "")])
    children: dict[int, int] = {}  # pid: the pipe it sends what it found on
    queue = -1
    try:
        while frontier and len(frontier) < SPLIT_UNITS:  # breadth first, until there are enough folders
            fd, prefix = frontier[0]
            for name in finder.list_folder(fd, prefix):
                sub = finder.enter_folder(fd, prefix, name)
                if sub is not None:
                    frontier.append((sub, prefix + name + "/"))
            os.close(frontier.popleft()[0])
        units = list(frontier)
        queue, feed = os.pipe()
        with os.fdopen(feed, "wb") as out:  # the pipe holds them all: 4 bytes a unit
            out.write(b"".join(_UNIT.pack(n) for n in range(len(units))))
        for _ in range(processes - 1):
            try:
                _fork_finder(finder, queue, units, children)
            except OSError:  # no more processes now: the ones there are walk it all
                break
        finder.take(queue, units)
        known = finder.known()
        changed = finder.changed
        for pid, found in list(children.items()):
            with os.fdopen(found, "rb", closefd=False) as pipe:
                payload = pipe.read()
            children[pid] = -1
            os.close(found)
            with _signals_held():  # a child reaped is a child forgotten, and the other way round
                status = os.waitpid(pid, 0)[1]
                del children[pid]
            if status != 0:
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
        for pid in children:  # cut short: no child outlives the scan
            os.kill(pid, signal.SIGKILL)
        for pid, found in children.items():
            if found >= 0:
                os.close(found)
            os.waitpid(pid, 0)
        for fd, _ in frontier:
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

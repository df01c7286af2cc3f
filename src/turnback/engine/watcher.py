"""A project's watcher: a detached process that keeps the paths changed since each scan, so a scan visits
only those (``capture/watch.py``).

``turnback watch start`` starts one that runs until stopped. Where commands
are recorded by turnback's own processes (the hook relay, the MCP server,
``turnback exec``: each calls :func:`auto_start_watchers`), the scan before a
command also starts one by itself, without waiting for it, when it found no
watcher for a project of at least ``watch.auto_paths`` paths; that one ends
after ``watch.idle_s`` seconds in which no scan asked it, so it lives on
between a harness's ``exec`` processes, and no longer. One watcher serves every
session of its project (a lock in the store says so). Until it answers, and
after it ended, scans visit everything, as without it.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING

from turnback.catalog import Message
from turnback.errors import RefusedError
from turnback.model import Project, ProjectId
from turnback.procs import process_alive

if TYPE_CHECKING:
    import subprocess

    from turnback.capture.watch import WatcherStatus

    from .facade import Engine

WATCH_START_S = 10.0
AUTO_RETRY_S = 600.0  # an automatic watcher that could not watch every folder is not started again for this long


class _AutoStart:
    """What this process knows of the watchers it starts by itself: whether it may, and which it started."""

    enabled = False
    inotify: bool | None = None  # whether this system offers inotify, once asked
    started: dict[ProjectId, subprocess.Popen[bytes]] = {}  # noqa: RUF012  (one per process)


def auto_start_watchers() -> None:
    """From now on the scan before a command in this process starts the watcher of a big project that has none
    (``watch.auto_paths``): the hook relay, the MCP server and ``turnback exec`` call it. A library caller that
    does not is left as it was (its figures too: ``benchmarks/sidebyside.py`` times scans without a watcher)."""
    _AutoStart.enabled = True


class Watcher:
    """The watcher facet of an :class:`~turnback.engine.Engine`."""

    def __init__(self, engine: Engine):
        self._engine = engine
        self._home = engine.home

    def start(self, project: Project) -> int:
        """Start the project's watcher as a detached process; returns its pid once it answers."""
        import subprocess

        from turnback.capture import commands, watch
        from turnback.capture.inotify import Inotify

        running = watch.watcher_status(self._home, project.id)
        if running is not None:
            raise RefusedError(Message("watcher_already_runs", root=project.root, pid=running.pid))
        Inotify().close()  # refuse here, not in a detached process, where inotify is missing
        os.makedirs(watch.watch_dir(self._home), mode=0o700, exist_ok=True)
        log_path = os.path.join(watch.watch_dir(self._home), f"{project.id}.log")
        with open(log_path, "ab") as log:
            # From "/": a watcher working in the project would keep a deleted project folder alive.
            proc = commands.spawn_helper(self._engine.store, ["_watch-tree", project.id], cwd="/", output=log)
        deadline = time.monotonic() + WATCH_START_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                with open(log_path, "rb") as log:
                    lines = log.read().decode("utf-8", "replace").strip().splitlines()
                last = Message("plain", text=lines[-1]) if lines else Message("no_reason_given")
                raise RefusedError(Message("watcher_did_not_start", root=project.root, why=last))
            status = watch.watcher_status(self._home, project.id)
            if status is not None and status.pid == proc.pid:
                return proc.pid
            time.sleep(0.02)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.terminate()
            proc.wait(1)
        raise RefusedError(Message("watcher_no_answer", root=project.root, seconds=round(WATCH_START_S)))

    def start_if_big(self, project: Project, paths: int) -> None:
        """Start the project's watcher, detached and not waited for, when this process called
        :func:`auto_start_watchers`, the project holds at least ``watch.auto_paths`` paths, none runs, and none
        wrote to the project's watcher log lately (it could not watch every folder); it ends after
        ``watch.idle_s``."""
        if not _AutoStart.enabled:
            return
        config = self._engine.config_for(project)
        if config.watch_auto_paths == 0 or paths < config.watch_auto_paths:
            return
        from turnback.capture import commands, watch

        if watch.watcher_running(self._home, project.id) or not _inotify_offered():
            return
        earlier = _AutoStart.started.get(project.id)
        if earlier is not None and earlier.poll() is None:
            return  # still starting: its pid file comes once it watches every folder
        log_path = os.path.join(watch.watch_dir(self._home), f"{project.id}.log")
        if _failed_lately(log_path):
            return  # a watcher of this project said why it could not run (its log), lately: scans visit everything
        os.makedirs(watch.watch_dir(self._home), mode=0o700, exist_ok=True)
        with open(log_path, "ab") as log:
            proc = commands.spawn_helper(
                self._engine.store,
                ["_watch-tree", project.id, "--idle-s", repr(config.watch_idle_s)],
                cwd="/",  # a watcher working in the project would keep a deleted project folder alive
                output=log,
            )
        _AutoStart.started[project.id] = proc

    def run(self, project_id: ProjectId, idle_s: float | None = None) -> None:
        """Be the project's watcher until stopped, or until no scan asked it for *idle_s* seconds (the
        detached process :meth:`start` and :meth:`start_if_big` begin)."""
        from turnback.capture import watch

        project = self._engine.store.project(project_id)
        rules = self._engine._commands.scan_rules(project)
        watch.run_watcher(self._home, project.id, project.root, rules.skip, idle_s=idle_s)

    def status(self, project: Project) -> WatcherStatus | None:
        """The project's running watcher, if there is one."""
        from turnback.capture import watch

        return watch.watcher_status(self._home, project.id)

    def stop(self, project: Project) -> int | None:
        """Stop the project's watcher; its pid, or ``None`` when none ran."""
        from turnback.capture import watch

        pid = watch.stop_watcher(self._home, project.id)
        if pid is not None:
            deadline = time.monotonic() + WATCH_START_S
            while process_alive(pid, None) and time.monotonic() < deadline:
                time.sleep(0.02)
        return pid


def _failed_lately(log_path: str) -> bool:
    """Whether a watcher wrote to its log (only trouble goes there) in the last ``AUTO_RETRY_S``: then no process
    starts it again before, so that a project it cannot watch whole does not cost each command a watcher's start."""
    try:
        st = os.stat(log_path)
    except OSError:
        return False
    return st.st_size > 0 and time.time() - st.st_mtime < AUTO_RETRY_S


def _inotify_offered() -> bool:
    if _AutoStart.inotify is None:
        from turnback.capture.inotify import Inotify

        try:
            Inotify().close()
            _AutoStart.inotify = True
        except OSError:
            _AutoStart.inotify = False
    return _AutoStart.inotify


__all__ = ["WATCH_START_S", "Watcher", "auto_start_watchers"]

"""A project's watcher: a detached process that keeps the paths changed since each scan, so a scan visits
only those (``capture/watch.py``)."""

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
    from turnback.capture.watch import WatcherStatus

    from .facade import Engine

WATCH_START_S = 10.0


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

    def run(self, project_id: ProjectId) -> None:
        """Be the project's watcher until stopped (the detached process :meth:`start` begins)."""
        from turnback.capture import watch

        project = self._engine.store.project(project_id)
        rules = self._engine._commands.scan_rules(project)
        watch.run_watcher(self._home, project.id, project.root, rules.skip)

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


__all__ = ["WATCH_START_S", "Watcher"]

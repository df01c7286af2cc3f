"""Contract: tree snapshots kept per project, and content kept once, in checked chunks when large."""

from __future__ import annotations

import hashlib

from turnback.model import Project, Turn
from turnback.store.api import StoreBackend


def test_the_latest_stat_cache_is_the_projects_and_older_ones_go(backend: StoreBackend, project: Project) -> None:
    assert backend.latest_snapshot(project.id) is None
    assert backend.cache_content_bytes(project.id) is None
    first = backend.save_snapshot(project.id, b"first cache", 3, content_bytes=10)
    second = backend.save_snapshot(project.id, b"second cache", 4, watch_token="w-7", content_bytes=20)
    assert backend.latest_snapshot(project.id) == (second, b"second cache", "w-7", 20)
    assert backend.latest_snapshot(project.id, data=False) == (second, None, "w-7", 20)
    assert backend.cache_content_bytes(project.id) == 20
    assert backend.snapshot(second) == b"second cache"
    assert backend.snapshot(first) is None  # no running command started from it


def test_a_cache_a_running_command_or_a_delta_needs_is_kept(backend: StoreBackend, turn: Turn) -> None:
    project_id = backend.session(turn.session_id).project_id
    baseline = backend.save_snapshot(project_id, b"before the command", 1)
    command = backend.create_call(turn, "exec", "make", kind="command", baseline_id=baseline)
    full = backend.save_snapshot(project_id, b"full", 1)
    delta = backend.save_snapshot(project_id, b"delta", 1, base_id=full)
    backend.save_snapshot(project_id, b"delta again", 1, base_id=full)
    assert backend.snapshot(baseline) == b"before the command"
    assert backend.snapshot(full) == b"full"
    assert backend.snapshot(delta) is None
    backend.finish_call(command, "done", exit_code=0)
    backend.save_snapshot(project_id, b"after", 1)
    assert backend.snapshot(baseline) is None


def test_content_is_kept_once_and_read_back_whole(backend: StoreBackend) -> None:
    small = backend.blobs.put_bytes(b"hello\n")
    assert backend.blobs.put_bytes(b"hello\n") == small
    assert backend.blobs.has(small) and backend.blobs.read_bytes(small) == b"hello\n"
    assert backend.blobs.verify(small)
    large = b"".join(hashlib.sha256(str(i).encode()).digest() * 4 for i in range(80_000))  # 10 MB: 3 chunks
    with backend.transaction():
        stored = backend.put_content([large[:1000], large[1000:]])
    assert stored.size == len(large)
    assert b"".join(backend.blobs.iter_content(stored.blob)) == large
    assert backend.blobs.chunk_list_ids() == [stored.blob]
    assert len(backend.blobs.chunks_listed([stored.blob])) == 3
    assert backend.blobs.ids() == {small, stored.blob} | backend.blobs.chunks_listed([stored.blob])
    backend.blobs.delete(small)
    assert not backend.blobs.has(small)

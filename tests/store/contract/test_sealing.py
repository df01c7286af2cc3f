"""Contract: nothing a user or agent wrote or read is kept plain; keyed ids find paths without naming them."""

from __future__ import annotations

from pathlib import Path

from tests.store.contract.conftest import Backend, file_state
from turnback.catalog import Message
from turnback.model import FileState, OpId, Plan, PlanRow
from turnback.paths import RelPath
from turnback.store.api import StoreBackend

SECRETS = {
    "root": "project-root-7f3a",
    "actor": "actor-name-91c2",
    "title": "session-title-5d0e",
    "message": "turn-message-a4b8",
    "input": "call-input-c6f1",
    "error": "call-error-0e9d",
    "path": "changed-path-b2a7.txt",
    "target": "link-target-e8c3",
    "not_covered": "not-covered-why-44aa",
    "notice": "notice-text-19fe",
    "busy": "busy-reason-7b7b",
    "reason": "plan-reason-3c3c",
    "ref": "refs/heads/branch-d5d5",
    "content": "file-content-2f2f",
    "snapshot": "snapshot-bytes-6a6a",
}


def test_no_plain_value_reaches_the_database(backend_kind: Backend, home: Path, tmp_path: Path) -> None:
    root = tmp_path / SECRETS["root"]
    root.mkdir()
    with backend_kind.open(home) as store:
        project = store.register_project(str(root)).project
        session = store.create_session(project.id, actor=SECRETS["actor"], title=SECRETS["title"], incognito=False)
        turn = store.create_turn(session.id, SECRETS["message"], holder_pid=None, holder_start=None)
        call_id = store.create_call(turn, "Write", SECRETS["input"])
        link = FileState("symlink", None, None, 0o777, target=SECRETS["target"])
        store.add_change(
            call_id,
            0,
            project.id,
            RelPath(SECRETS["path"]),
            file_state(store, (SECRETS["content"] * 50).encode()),
            link,
            not_covered=Message("plain", text=SECRETS["not_covered"]),
        )
        store.finish_call(call_id, "failed", Message("plain", text=SECRETS["error"]))
        store.add_ref_changes(turn.id, [(SECRETS["ref"], "a", "b")])
        store.add_notices(session.id, [(SECRETS["path"], SECRETS["notice"])])
        store.add_busy_mark(session.id, SECRETS["busy"], None, None)
        row = PlanRow(0, "skip", RelPath(SECRETS["path"]), reason=Message("plain", text=SECRETS["reason"]))
        store.save_plan(Plan(OpId(store.new_id()), "undo", session.id, project.id, (row,)))
        store.save_snapshot(project.id, SECRETS["snapshot"].encode(), 1)
        assert store.call(call_id).changes[0].path == SECRETS["path"]  # all of it is there, and reads back
    kept = backend_kind.kept_bytes(home)
    assert kept
    assert [name for name, value in SECRETS.items() if value.encode() in kept] == []


def test_a_path_id_is_keyed_and_scoped(backend: StoreBackend) -> None:
    assert backend.path_id("p1", "a.txt") == backend.path_id("p1", "a.txt")
    assert backend.path_id("p1", "a.txt") != backend.path_id("p2", "a.txt")
    assert b"a.txt" not in backend.path_id("p1", "a.txt")

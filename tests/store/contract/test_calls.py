"""Contract: calls and their changes, a command's processes and snapshots, other calls on the same path."""

from __future__ import annotations

from tests.store.contract.conftest import file_state
from turnback.catalog import Message
from turnback.model import Change, FileState, Turn
from turnback.paths import RelPath
from turnback.store.api import StoreBackend


def test_a_call_reads_back_with_its_changes(backend: StoreBackend, turn: Turn) -> None:
    project_id = backend.session(turn.session_id).project_id
    call_id = backend.create_call(turn, "Write", '{"path": "notes.txt"}', kind="tool", unasked=True)
    running = backend.call(call_id)
    assert (running.status, running.ended_at, running.input, running.unasked) == (
        "running",
        None,
        '{"path": "notes.txt"}',
        True,
    )
    before = file_state(backend, b"old text\n")
    link = FileState("symlink", None, None, 0o777, target="../elsewhere")
    first = backend.add_change(call_id, 0, project_id, RelPath("notes.txt"), before, None)
    too_large = Message("larger_than_max_file_mib", mib=1)
    second = backend.add_change(
        call_id, 1, project_id, RelPath("link"), FileState("absent"), link, partial=True, not_covered=too_large
    )
    after = file_state(backend, b"new text\n", 0o600)
    backend.set_change_after(first, after, partial=False)
    disk_full = Message("plain", text="disk full")  # a reason and an error come back as the messages they were
    backend.finish_call(call_id, "failed", disk_full, exit_code=3, late=True)
    call = backend.call(call_id)
    assert (call.tool, call.status, call.error, call.exit_code, call.late, call.kind) == (
        "Write",
        "failed",
        disk_full,
        3,
        True,
        "tool",
    )
    assert call.ended_at is not None and call.ended_at >= call.started_at
    assert call.changes == (
        Change(first, call_id, 0, RelPath("notes.txt"), before, after),
        Change(second, call_id, 1, RelPath("link"), FileState("absent"), link, partial=True, not_covered=too_large),
    )
    assert backend.changes_of_call(call_id) == call.changes
    assert backend.calls_of_turn(turn.id) == (call,)
    assert backend.turn(turn.id, with_calls=True).calls == (call,)
    backend.delete_change(second)
    assert [c.id for c in backend.changes_of_call(call_id)] == [first]
    backend.mark_changes_reverted([first])
    assert backend.changes_of_call(call_id)[0].reverted


def test_a_command_names_its_processes_and_snapshots(backend: StoreBackend, turn: Turn) -> None:
    project_id = backend.session(turn.session_id).project_id
    command = backend.create_call(turn, "exec", "make", kind="command", snapshot_id="s1", baseline_id="b1")
    job = backend.create_call(turn, "exec", "sleep 9", kind="job")
    assert backend.call_processes(command) == (None, None, None, None)
    backend.set_call_processes(command, pid=100, pid_start=200)
    backend.set_call_processes(command, watcher_pid=300, watcher_start=400)
    assert backend.call_processes(command) == (100, 200, 300, 400)
    assert backend.call_processes(command).watcher_pid == 300
    assert backend.call_snapshot_ids(command) == ("s1", "b1")
    assert backend.call_snapshot_ids(job) == (None, None)
    running = backend.running_commands(project_id)
    assert [(r.call.id, r.pid_start, r.watcher_pid, r.watcher_start) for r in running] == [
        (command, 200, 300, 400),
        (job, None, None, None),
    ]
    # past its timeout (a watcher of its own) and the job: oldest first
    assert [c.id for c in backend.command_calls(session_id=turn.session_id, project_id=None)] == [command, job]
    backend.finish_call(command, "done", exit_code=0)
    assert [r.call.id for r in backend.running_commands(project_id)] == [job]
    assert [c.id for c in backend.command_calls(session_id=None, project_id=project_id)] == [job]


def test_later_calls_on_a_path_are_found_across_sessions_of_the_project(backend: StoreBackend, turn: Turn) -> None:
    project_id = backend.session(turn.session_id).project_id
    other_session = backend.create_session(project_id, actor=None, title=None, incognito=False)
    other_turn = backend.create_turn(other_session.id, None, holder_pid=None, holder_start=None)
    path = RelPath("shared.txt")
    calls = []
    for owner in (turn, other_turn, turn):
        call_id = backend.create_call(owner, "Edit", None)
        change = backend.add_change(call_id, 0, project_id, path, file_state(backend, b"x"), file_state(backend, b"y"))
        backend.finish_call(call_id, "done")
        calls.append((call_id, change))
    elsewhere = backend.create_call(turn, "Edit", None)
    backend.add_change(elsewhere, 0, project_id, RelPath("other.txt"), FileState("absent"), file_state(backend, b"z"))
    first, second, third = (c for c, _ in calls)
    assert backend.later_calls_on_path(project_id, path, first) == [second, third]
    assert backend.pending_later_call(project_id, path, first, set()) == third
    assert backend.pending_later_call(project_id, path, first, {third}) == second
    backend.mark_changes_reverted([calls[2][1], calls[1][1]])
    assert backend.pending_later_call(project_id, path, first, set()) is None
    # an outside path is its own scope: the same text names another path
    assert backend.later_calls_on_path(project_id, path, first, outside=True) == []


def test_a_running_command_overlaps_every_path(backend: StoreBackend, turn: Turn) -> None:
    project_id = backend.session(turn.session_id).project_id
    job = backend.create_call(turn, "exec", "long", kind="job")
    command = backend.create_call(turn, "exec", "make", kind="command")
    backend.add_change(command, 0, project_id, RelPath("out.o"), FileState("absent"), file_state(backend, b"o"))
    backend.finish_call(command, "done", exit_code=0)
    assert backend.overlapping_calls_on_path(project_id, RelPath("out.o"), command) == [(job, "job", True)]
    backend.finish_call(job, "done", exit_code=0)  # ended later, but changed no such path
    assert backend.overlapping_calls_on_path(project_id, RelPath("out.o"), command) == []


def test_other_calls_on_many_paths_are_found_with_one_question_per_call(backend: StoreBackend, turn: Turn) -> None:
    """A plan asks about all of a call's paths at once: each path gets the answer asking about it alone gives,
    with more paths than one query binds (the paths are asked a few hundred at a time)."""
    project_id = backend.session(turn.session_id).project_id
    paths = [RelPath(f"src/f{i}.c") for i in range(600)]
    command = backend.create_call(turn, "exec", "make", kind="command")
    for seq, path in enumerate(paths):
        backend.add_change(command, seq, project_id, path, file_state(backend, b"x"), file_state(backend, b"y"))
    job = backend.create_call(turn, "exec", "watch", kind="job")  # still runs: it may have made any change
    tool = backend.create_call(turn, "Edit", None)  # ran while the command ran, and ended after it
    backend.add_change(tool, 0, project_id, paths[5], file_state(backend, b"y"), file_state(backend, b"z"))
    backend.finish_call(command, "done", exit_code=0)
    backend.finish_call(tool, "done")
    later = backend.create_call(turn, "Edit", None)
    backend.add_change(later, 0, project_id, paths[599], file_state(backend, b"y"), file_state(backend, b"w"))
    outside = FileState("absent")
    backend.add_change(later, 1, project_id, RelPath("/etc/outside"), outside, file_state(backend, b"o"), outside=True)
    backend.finish_call(later, "done")
    keys = [(str(path), False) for path in paths] + [("/etc/outside", True), ("src/f5.c", True)]
    overlapping = backend.overlapping_calls_on_paths(project_id, command, keys)
    assert overlapping[("src/f5.c", False)] == [(job, "job", True), (tool, "tool", False)]
    assert overlapping[("src/f0.c", False)] == overlapping[("src/f5.c", True)] == [(job, "job", True)]
    for path, outside in keys:
        alone = backend.overlapping_calls_on_path(project_id, RelPath(path), command, outside=outside)
        assert overlapping[(path, outside)] == alone
    pending = backend.pending_later_calls(project_id, command, keys, set())
    assert pending == {("src/f5.c", False): tool, ("src/f599.c", False): later, ("/etc/outside", True): later}
    assert backend.pending_later_calls(project_id, command, keys, {later}) == {("src/f5.c", False): tool}
    for path, outside in keys:
        alone = backend.pending_later_call(project_id, RelPath(path), command, set(), outside=outside)
        assert pending.get((path, outside)) == alone
    assert backend.overlapping_calls_on_paths(project_id, command, []) == {}
    assert backend.pending_later_calls(project_id, command, [], set()) == {}


def test_which_copies_are_kept_is_asked_at_once(backend: StoreBackend) -> None:
    kept = [backend.blobs.put_bytes(f"copy {i}\n".encode()) for i in range(700)]
    never = [backend.crypto.content_id(f"never stored {i}\n".encode()) for i in range(3)]
    assert backend.blobs.present([*kept, *never, kept[0]]) == set(kept)
    assert backend.blobs.present([]) == set()

"""Two hosts (two TURNBACK_HOST_IDs, two store folders) on one PostgreSQL store: every host sees every session;
only the host a project lives on takes its changes back; another host's process ids do not end its turns."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import turnback
from tests.conftest import TEST_KEY, cli_env, tree_state
from tests.shared.conftest import Host

ELSEWHERE = f"turnback: this session's files are on {socket.gethostname()}; run it there"


def _recorded_turn(a: Host, project: Path) -> str:
    assert a("init").rc == 0
    session = a("session", "new", "--title", "fix parser").out.strip()
    assert a("turn", "begin", "--session", session, "--message", "rename the flag").rc == 0
    assert a("edit", "--session", session, "README.md", "--old", "line two", "--new", "line 2").rc == 0
    assert a("turn", "end", "--session", session).rc == 0
    assert (project / "README.md").read_bytes() == b"# project\n\nline 2\n"
    return session


def test_another_host_sees_the_session_and_its_diff(host, project: Path) -> None:  # type: ignore[no-untyped-def]
    a, b = host("a"), host("b")
    session = _recorded_turn(a, project)
    listed = b("sessions", "--json").json()
    assert [item["id"] for item in listed["sessions"]] == [session]  # type: ignore[index]
    assert listed["sessions"][0]["project"]["host"] == socket.gethostname()  # type: ignore[index]
    assert f"{project} (on {socket.gethostname()})  fix parser" in b("sessions").out
    assert f"{project}  fix parser" in a("sessions").out  # on its own host, the folder alone
    shown = b("log", "--session", session)
    assert shown.rc == 0
    assert "rename the flag" in shown.out
    assert "modified README.md +1 -1" in shown.out
    assert "+line 2" in b("diff", "--session", session).out


def test_only_the_projects_host_takes_back(host, project: Path) -> None:  # type: ignore[no-untyped-def]
    a, b = host("a"), host("b")
    session = _recorded_turn(a, project)
    before = tree_state(project)
    for verb in (["undo", "--yes"], ["undo", "--dry-run"], ["rollback", "0", "--confirm"], ["resend", "1", "--keep"]):
        refused = b(*verb, "--session", session)
        assert (refused.rc, refused.err.strip()) == (1, ELSEWHERE), verb
    assert tree_state(project) == before  # nothing changed on disk
    call = a("log", "--session", session, "--json").json()["turns"][0]["calls"][0]["id"]  # type: ignore[index]
    refused = b("revert", str(call), "--yes")
    assert (refused.rc, refused.err.strip()) == (1, ELSEWHERE)
    undone = a("undo", "--yes", "--session", session)
    assert undone.rc == 0, undone.err
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"
    # The trash stays on the host that applied: what the undo displaced is in host a's folder, and only there.
    (displaced,) = (project.parent / "home-a" / "trash").glob("u-*/README.md")
    assert displaced.read_bytes() == b"# project\n\nline 2\n"
    assert not (project.parent / "home-b" / "trash").exists()


def test_a_project_root_on_two_hosts_is_two_projects(host, project: Path) -> None:  # type: ignore[no-untyped-def]
    a, b = host("a"), host("b")
    session_a = _recorded_turn(a, project)
    assert b("init").rc == 0
    session_b = b("session", "new", "--title", "same path, other machine").out.strip()
    projects = {item["id"]: item["project"] for item in b("sessions", "--json").json()["sessions"]}  # type: ignore[index]
    assert projects[session_a] != projects[session_b]


def test_another_hosts_running_turn_is_not_ended_by_this_hosts_pids(host, project: Path) -> None:  # type: ignore[no-untyped-def]
    a, b = host("a"), host("b")
    assert a("init").rc == 0
    session = a("session", "new").out.strip()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a process id that no longer runs here: on host a, the turn's holder has ended
    assert a("turn", "begin", "--session", session, "--pid", str(gone.pid)).rc == 0
    assert "running" in b("log", "--session", session).out  # host b cannot see host a's processes
    assert b("turn", "begin", "--session", session).rc == 3  # so for b the turn still runs
    assert "interrupted" in a("log", "--session", session).out


LEASE_S = 10.0  # host a's lease below: long enough for host b's first look on a loaded machine, short enough to wait


def _turn_held_by(a: Host, project: Path, agent: subprocess.Popen[bytes]) -> str:
    """A session of host a whose running turn *agent* (a process of host a) holds, with one edit in it."""
    assert a("init").rc == 0
    session = a("session", "new").out.strip()
    assert a("turn", "begin", "--session", session, "--pid", str(agent.pid), "--message", "rename").rc == 0
    assert a("edit", "--session", session, "README.md", "--old", "line two", "--new", "line 2").rc == 0
    return session


def test_a_dead_hosts_running_turn_ends_for_other_hosts_once_its_lease_runs_out(host, project: Path) -> None:  # type: ignore[no-untyped-def]
    a = host("a", {"TURNBACK_HOST_LEASE_S": str(LEASE_S)})
    b = host("b")
    agent = subprocess.Popen(["sleep", "600"])  # host a's agent: alive, as far as host a can tell
    try:
        session = _turn_held_by(a, project, agent)
        last_seen = time.monotonic()  # host a opened the store last just before: then it "dies" (runs nothing more)
        first_look = b("log", "--session", session).out
        assert time.monotonic() - last_seen < LEASE_S - 2, "the machine ran too slowly to see host a alive"
        assert "running" in first_look
        time.sleep(max(0.0, last_seen + LEASE_S + 0.5 - time.monotonic()))
        shown = b("log", "--session", session).out
        assert "interrupted" in shown and "running" not in shown, shown
        refused = b("undo", "--yes", "--session", session)  # the files are still on host a
        assert (refused.rc, refused.err.strip()) == (1, ELSEWHERE)
        assert (project / "README.md").read_bytes() == b"# project\n\nline 2\n"
    finally:
        agent.kill()
        agent.wait()
    # Host a, restarted (its agent gone with it), takes its turn back.
    undone = a("undo", "--yes", "--session", session)
    assert undone.rc == 0, undone.err
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"


def test_a_live_host_renews_its_lease_so_its_turn_runs_for_other_hosts(  # type: ignore[no-untyped-def]
    host, store_url: str, project: Path, tmp_path: Path
) -> None:
    lease = {"TURNBACK_HOST_LEASE_S": "3"}  # renewed each second
    a = host("a", lease)
    b = host("b")
    agent = subprocess.Popen(["sleep", "600"])
    try:
        session = _turn_held_by(a, project, agent)
        # A process of host a that keeps the store open (an MCP server, a relay, serve, exec) renews the lease.
        env = {"TURNBACK_STORE": store_url, "TURNBACK_HOST_ID": "host-a", **lease}
        running = subprocess.Popen(
            [sys.executable, "-m", "turnback", "exec", "--session", session, "--", "sleep", "20"],
            cwd=project,
            env=cli_env(tmp_path / "home-a", env),
        )
        try:
            time.sleep(9)  # three times the lease
            assert running.poll() is None
            assert "running" in b("log", "--session", session).out
            assert b("turn", "begin", "--session", session).rc == 3
        finally:
            running.kill()
            running.wait()
    finally:
        agent.kill()
        agent.wait()


def test_another_hosts_gc_spares_what_a_scan_there_holds_until_that_host_can_tell_it_ended(  # type: ignore[no-untyped-def]
    host, project: Path, store_url: str
) -> None:
    """A hold's process runs on the project's host: only there can its end be seen. Another host's gc spares what
    it holds (as it spares that host's running turns) while the project's host removes a hold whose process
    ended, and reclaims."""
    a, b = host("a"), host("b")
    session = _recorded_turn(a, project)
    ended = subprocess.Popen(["true"])
    ended.wait()
    with turnback.Engine.open(
        str(project.parent / "home-a"), key_secret=TEST_KEY, try_keyring=False, store_url=store_url, host_id="host-a"
    ) as engine:
        since = time.time_ns()
        with engine.store.transaction():
            loose = engine.store.blobs.put_bytes(b"stored by a scan on host a, named by nothing yet")
        engine.store.add_blob_hold(engine.session(session).project_id, ended.pid, 1, since)
        elsewhere = b("gc", "--json")
        assert elsewhere.rc == 0 and elsewhere.json()["held"] == 1, elsewhere
        assert engine.store.blobs.has(loose)
        here = a("gc", "--json")
        assert here.rc == 0 and here.json()["held"] == 0 and here.json()["blobs"] >= 1, here
        assert not engine.store.blobs.has(loose) and engine.store.blob_holds() == []

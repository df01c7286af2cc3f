"""Many hosts writing to one PostgreSQL store at once: 10 processes, each its own host (TURNBACK_HOST_ID) with
its own store folder and project, record their sessions' file-tool calls at the same moment. No process fails
(no serialisation, deadlock or lock error reaches it), every call is in the store once, and every session is
undone afterwards byte for byte. ``TURNBACK_SOAK=1``: the issue's 100 sessions of 50 calls each."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg

from tests.conftest import ROOT, TEST_KEY, cli_env, tree_state
from tests.reliability.helpers import SOAK

PROCESSES = 10
SESSIONS = 10 if SOAK else 2  # per process
CALLS = 50 if SOAK else 10  # per session

HOST = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, {src!r})
    import turnback

    url, home, project, host, sessions, calls, gate = sys.argv[1:8]
    with turnback.Engine.open(home, key_secret={key!r}, try_keyring=False, store_url=url, host_id=host) as engine:
        while not os.path.exists(gate):  # every host starts at once
            time.sleep(0.001)
        made = []
        for number in range(int(sessions)):
            session = engine.new_session(project, title=f"{{host}} session {{number}}")
            engine.begin_turn(session.id, "writes")
            for i in range(int(calls)):
                engine.write(session.id, f"s{{number}}/f{{i:03d}}.txt", f"{{host}} {{number}} {{i}}\\n".encode())
                engine.edit(session.id, "shared.txt", f"line {{number}}:", f"line {{number}}: {{i}}")
            engine.end_turn(session.id)
            made.append(session.id)
        for session_id in reversed(made):  # and each of them undone, newest first (they share a file)
            engine.apply(engine.plan_undo(session_id))
        print(" ".join(made))
    """
)


def test_ten_hosts_write_at_once_and_every_session_undoes(store_url: str, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    script = HOST.format(src=str(ROOT / "src"), key=TEST_KEY)
    projects, before, hosts = [], [], []
    for index in range(PROCESSES):
        project = tmp_path / f"project-{index}"
        project.mkdir()
        (project / "shared.txt").write_text("".join(f"line {n}:\n" for n in range(SESSIONS)))
        projects.append(project)
        before.append(tree_state(project))
        args = (f"host-{index}", str(SESSIONS), str(CALLS), str(gate))
        hosts.append(
            subprocess.Popen(
                [sys.executable, "-c", script, store_url, str(tmp_path / f"home-{index}"), str(project), *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=cli_env(tmp_path / f"home-{index}"),
            )
        )
    gate.touch()
    sessions: list[str] = []
    for process in hosts:
        out, err = process.communicate(timeout=1200)
        assert process.returncode == 0, err
        assert err == ""
        sessions += out.split()
    assert len(sessions) == len(set(sessions)) == PROCESSES * SESSIONS
    with psycopg.connect(store_url) as conn:
        per_session = dict(conn.execute("SELECT session_id, count(*) FROM calls GROUP BY session_id").fetchall())
        changes = conn.execute("SELECT count(*), count(DISTINCT (call_id, seq)) FROM changes").fetchone()
        undone = conn.execute("SELECT count(*) FROM turns WHERE undone = 'yes'").fetchone()
    assert per_session == dict.fromkeys(sessions, 2 * CALLS)  # no call lost, none twice
    assert changes == (PROCESSES * SESSIONS * (1 + 2 * CALLS),) * 2  # each session's folder, write and edit, once
    assert undone == (PROCESSES * SESSIONS,)
    assert [tree_state(project) for project in projects] == before  # every file as it was, byte for byte

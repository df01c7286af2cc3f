"""The HTTP API of ``turnback serve``, through a real server subprocess and a plain HTTP client: who may ask
(token, Host, Origin), that each route answers with the CLI's ``--json`` object, that nothing is applied
without the plan that was shown, the refusals' statuses, and the bytes on disk after each apply."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import turnback
from tests.conftest import ROOT, Result, cli_env, run_cli
from tests.web.serving import START_LINE, Served, serve
from turnback.catalog import Message, word

pytest.importorskip("uvicorn", reason="turnback serve needs the web extra (in dev): make test")

API = "/api/v1"


@dataclass
class Project:
    """A project recorded through the engine (in this process, on the server's store): turn 1 edits a.txt and
    writes new.txt, turn 2 edits b.txt. What the CLI prints for it comes from the CLI itself."""

    root: Path
    engine: turnback.Engine
    session: str
    calls: list[str] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return Path(self.engine.home)

    def cli(self, *args: str, stdin: bytes = b"") -> Result:
        return run_cli(self.home, *args, cwd=self.root, stdin=stdin)

    def json(self, *args: str) -> dict[str, Any]:
        return self.cli("--json", *args).json()

    def turn(self, message: str, *steps: tuple[str, ...]) -> list[str]:
        """A turn of *steps*: ``("edit", PATH, OLD, NEW)`` or ``("write", PATH, TEXT)``; each call's id."""
        self.engine.begin_turn(self.session, message)
        made = []
        for verb, path, *rest in steps:
            if verb == "edit":
                call = self.engine.edit(self.session, path, rest[0], rest[1], cwd=str(self.root))
            else:
                call = self.engine.write(self.session, path, rest[0].encode(), cwd=str(self.root))
            made.append(call.id)
        self.engine.end_turn(self.session)
        self.calls += made
        return made

    def read(self, name: str) -> bytes:
        return (self.root / name).read_bytes()


def make_project(engine: turnback.Engine, root: Path, title: str = "fix parser") -> Project:
    root.mkdir(parents=True)
    (root / "a.txt").write_bytes(b"one\ntwo\nthree\n")
    (root / "b.txt").write_bytes(b"bee\n")
    project = Project(root, engine, engine.new_session(str(root), title=title).id)
    project.turn("rename two", ("edit", "a.txt", "two", "TWO"), ("write", "new.txt", "created by the agent\n"))
    project.turn("shout bee", ("edit", "b.txt", "bee", "BEE"))
    return project


@pytest.fixture
def project(engine: turnback.Engine, tmp_path: Path) -> Project:
    return make_project(engine, tmp_path / "project")


@pytest.fixture
def served(home: Path) -> Iterator[Served]:
    server = serve(home)
    yield server
    assert server.stop() == 0, server.stderr.decode(errors="replace")


def session_path(project: Project, rest: str = "") -> str:
    return f"{API}/sessions/{project.session}{rest}"


def plan_id(reply: Any) -> str:
    body = reply.json()
    assert reply.status == 200, body
    return str(body["plan"]["id"])


# -- the start line, the token, and stopping ------------------------------------------------------


def test_serve_prints_its_address_with_the_token_and_json_gives_the_same(home: Path) -> None:
    server = serve(home)
    try:
        assert server.url == f"http://127.0.0.1:{server.port}/?token={server.token}"
        assert len(server.token) >= 32
    finally:
        assert server.stop() == 0
    process = subprocess.Popen(
        [sys.executable, "-m", "turnback", "serve", "--port", "0", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(home),
        cwd=ROOT,
    )
    assert process.stdout is not None
    started = json.loads(process.stdout.readline())
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=15)
    assert process.returncode == 0, err
    assert set(started) == {"schema", "url", "port", "token"}
    assert started["schema"] == 1
    assert started["url"] == f"http://127.0.0.1:{started['port']}/?token={started['token']}"
    assert started["token"] != server.token  # a new token each start


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_exits_0_on_sigint_and_sigterm_even_with_an_event_stream_open(home: Path, sig: int) -> None:
    server = serve(home)
    stream = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    stream.sendall(
        f"GET {API}/events HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Authorization: Bearer {server.token}\r\n\r\n".encode()
    )
    assert b"200 OK" in stream.recv(4096)
    began = time.monotonic()
    assert server.stop(sig) == 0, server.stderr
    assert time.monotonic() - began < 5
    stream.close()


def test_the_token_comes_from_turnback_web_token_and_never_appears_in_what_serve_writes(
    home: Path, project: Project
) -> None:
    token = "a-token-the-user-chose-0123456789"
    server = serve(home, env={"TURNBACK_WEB_TOKEN": token})
    assert server.token == token
    assert server.get(f"{API}/sessions").status == 200
    assert server.get(f"{API}/sessions", token="wrong").status == 401
    assert server.get(f"/?token={token}", token=None).status == 303
    assert server.stop() == 0
    assert token not in server.stderr.decode()
    log = home / "turnback.log"
    assert not log.exists() or token not in log.read_text()


def test_every_api_route_without_the_token_is_401_with_the_error_object(served: Served, project: Project) -> None:
    call = project.calls[0]
    routes = [
        ("GET", f"{API}/sessions"),
        ("GET", f"{API}/messages"),
        ("GET", session_path(project, "/history")),
        ("GET", session_path(project, "/status")),
        ("GET", session_path(project, "/files")),
        ("GET", session_path(project, f"/calls/{call}")),
        ("POST", session_path(project, f"/calls/{call}/revert")),
        ("POST", session_path(project, "/undo")),
        ("POST", session_path(project, "/redo")),
        ("POST", session_path(project, "/rollback")),
        ("POST", session_path(project, "/resend")),
        ("GET", f"{API}/events"),
        ("GET", f"{API}/openapi.json"),
    ]
    for method, path in routes:
        for token in (None, "not-the-token", served.token[:-1]):
            reply = served.request(method, path, {} if method == "POST" else None, token=token)
            assert reply.status == 401, (method, path, token)
            assert reply.json()["error"]["code"] == "serve_token_missing"
    assert served.get(f"{API}/sessions").status == 200


def test_the_token_address_sets_an_httponly_strict_cookie_and_leaves_the_address_bar(
    served: Served, project: Project
) -> None:
    reply = served.get(f"/?token={served.token}", token=None)
    assert reply.status == 303
    assert reply.headers["location"] == "/"
    cookie = reply.headers["set-cookie"]
    name_value, *attributes = [part.strip() for part in cookie.split(";")]
    assert name_value == f"turnback_token_{served.port}={served.token}"
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(attributes)
    with_cookie = served.get(f"{API}/sessions", token=None, headers={"Cookie": name_value})
    assert with_cookie.status == 200
    assert served.get(f"{API}/sessions", token=None, headers={"Cookie": name_value + "x"}).status == 401
    wrong = served.get("/?token=an-old-token", token=None)
    assert wrong.status == 401
    assert wrong.code == "serve_token_wrong"
    assert "set-cookie" not in wrong.headers


# -- Host, Origin, headers -------------------------------------------------------------------------


def test_a_foreign_host_is_refused_with_403_and_the_loopback_names_are_answered(served: Served) -> None:
    port = served.port
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", f"127.0.0.1:{port + 1}", ""):
        for path in ("/", f"{API}/sessions", f"/?token={served.token}"):
            reply = served.get(path, headers={"Host": host})
            assert reply.status == 403, (host, path)
            assert reply.code == "serve_host_refused"
    for host in (f"127.0.0.1:{port}", "127.0.0.1", f"localhost:{port}", "localhost", f"[::1]:{port}", "[::1]"):
        assert served.get(f"{API}/sessions", headers={"Host": host}).status == 200, host


def test_a_change_sent_from_another_origin_is_refused_with_403_and_changes_nothing(
    served: Served, project: Project
) -> None:
    call = project.calls[0]
    path = session_path(project, f"/calls/{call}/revert")
    plan = plan_id(served.post(path, {"apply": False}))
    for headers in (
        {"Origin": "http://evil.example"},
        {"Origin": f"http://localhost.evil.example:{served.port}"},
        {"Origin": f"http://127.0.0.1:{served.port + 1}"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
    ):
        reply = served.post(path, {"apply": True, "plan": plan}, headers=headers)
        assert reply.status == 403, headers
        assert reply.code == "serve_origin_refused"
        assert project.read("a.txt") == b"one\nTWO\nthree\n"
    reply = served.post(path, {"apply": True, "plan": plan}, headers={"Origin": served.origin})
    assert reply.status == 200, reply.json()
    assert project.read("a.txt") == b"one\ntwo\nthree\n"


def test_every_response_forbids_framing_and_inline_script(served: Served) -> None:
    for path, token in (("/", None), (f"{API}/sessions", ""), (f"{API}/sessions", None), ("/static/nope.js", None)):
        headers = served.get(path, token=token).headers
        assert headers["x-frame-options"] == "DENY"
        policy = headers["content-security-policy"]
        assert "default-src 'self'" in policy
        assert "script-src 'self';" in policy
        assert "'unsafe-inline'" not in policy
        assert "frame-ancestors 'none'" in policy
        assert headers["referrer-policy"] == "no-referrer"
        assert headers["x-content-type-options"] == "nosniff"


def test_the_page_and_its_files_are_served_from_the_package(served: Served) -> None:
    page = served.get("/", token=None)
    assert page.status == 200
    assert page.headers["content-type"].startswith("text/html")
    static = ROOT / "src" / "turnback" / "web" / "static"
    assert page.body == (static / "index.html").read_bytes()
    for name in sorted(path.name for path in static.iterdir() if path.is_file() and path.name != "index.html"):
        assert served.get(f"/static/{name}", token=None).body == (static / name).read_bytes(), name
    assert served.get("/static/../app.py", token=None).status == 404


def test_an_unknown_route_and_a_wrong_method_are_error_objects(served: Served, project: Project) -> None:
    missing = served.get(f"{API}/nothing-here?lang=ja")
    assert missing.status == 404
    assert missing.json()["error"]["message"] == word(Message("serve_not_found"), "ja")
    wrong = served.get(session_path(project, "/undo"))
    assert wrong.status == 405
    assert wrong.code == "serve_method_not_allowed"


# -- reading: the CLI's objects ----------------------------------------------------------------


def test_sessions_is_the_cli_sessions_json_and_project_narrows_it(
    served: Served, project: Project, engine: turnback.Engine, tmp_path: Path
) -> None:
    other = make_project(engine, tmp_path / "other", title="other work")
    reply = served.get(f"{API}/sessions")
    assert reply.status == 200
    assert reply.json() == project.json("sessions")
    assert [s["id"] for s in reply.json()["sessions"]] == [other.session, project.session]
    narrowed = served.get(f"{API}/sessions?project={project.root}").json()
    assert narrowed == project.json("sessions", "--project", str(project.root))
    assert [s["id"] for s in narrowed["sessions"]] == [project.session]


def test_a_project_with_a_nul_is_400_not_a_bug(served: Served, project: Project) -> None:
    reply = served.get(f"{API}/sessions?project={project.root}%00x")
    assert (reply.status, reply.code) == (400, "path_has_nul")


def _without(data: Any, extra: dict[str, set[str]]) -> Any:
    """*data* with the page's extra keys of each kind of object taken out (what the CLI's object has)."""
    if isinstance(data, dict):
        kind = "call" if "tool" in data else "change" if "kind" in data and "path" in data else ""
        return {key: _without(value, extra) for key, value in data.items() if key not in extra.get(kind, set())}
    if isinstance(data, list):
        return [_without(item, extra) for item in data]
    return data


def test_history_is_the_cli_log_json_with_each_blocks_title_counts_and_states(served: Served, project: Project) -> None:
    assert project.cli("revert", project.calls[1], "--yes").rc == 0
    reply = served.get(session_path(project, "/history"))
    assert reply.status == 200
    history = reply.json()
    page_keys = {
        "call": {"title", "kind", "added", "removed", "states", "denied"},
        "change": {"reverted", "evicted", "not_covered", "binary", "added", "removed"},
    }
    assert _without(history, page_keys) == project.json("log", "--session", project.session)
    by_id = {call["id"]: call for turn in history["turns"] for call in turn["calls"]}
    edit, write, shout = (by_id[call] for call in project.calls)
    assert (edit["title"], edit["kind"], edit["added"], edit["removed"]) == ("edit a.txt", "tool", 1, 1)
    assert (write["title"], write["added"], write["removed"]) == ("write new.txt", 1, 0)
    assert [state["code"] for state in write["states"]] == ["call_status_reverted"]
    assert [state["code"] for state in edit["states"] + shout["states"]] == []
    assert write["changes"] == [
        {
            "path": "new.txt",
            "kind": "new",
            "reverted": True,
            "evicted": False,
            "not_covered": None,
            "binary": False,
            "added": 1,
            "removed": 0,
        }
    ]


def test_a_call_the_user_denied_is_marked_denied_in_the_history(served: Served, project: Project) -> None:
    engine = project.engine
    engine.begin_turn(project.session, "try a write")
    denied = engine.begin_call(project.session, "Write", {"file_path": "x.txt"}, cwd=str(project.root))
    denied.end(failed=Message("call_denied_because", why="the user said no"))  # as hooks/claude.py records it
    engine.begin_call(project.session, "Write", {"file_path": "y.txt"}, cwd=str(project.root)).end(failed="disk full")
    engine.end_turn(project.session)
    calls = {
        call["id"]: call
        for turn in served.get(session_path(project, "/history")).json()["turns"]
        for call in turn["calls"]
    }
    assert calls[denied.id]["denied"] is True
    assert [calls[call]["denied"] for call in project.calls] == [False, False, False]
    failed = [call for call in calls.values() if call["status"] == "failed" and call["id"] != denied.id]
    assert [call["denied"] for call in failed] == [False]  # failed for another reason
    assert not (project.root / "x.txt").exists()


def test_a_call_is_the_cli_show_json_with_its_input_and_its_diff(served: Served, project: Project) -> None:
    call = project.calls[0]
    reply = served.get(session_path(project, f"/calls/{call[:-4]}"))
    assert reply.status == 200
    shown = reply.json()["call"]
    cli_show = project.json("show", call)["call"]
    assert {key: shown[key] for key in cli_show} == cli_show
    assert shown["input"] == project.json("show", call, "--input")["call"]["input"]
    assert shown["turn"]["number"] == 1
    assert shown["diffs"] == [
        {
            "path": "a.txt",
            "kind": "modified",
            "hidden": False,
            "reverted": False,
            "not_covered": False,
            "binary": False,
            "too_large": False,
            "added": 1,
            "removed": 1,
            "note": None,
            "lines": ["--- a/a.txt", "+++ b/a.txt", "@@ -1,3 +1,3 @@", " one", "-two", "+TWO", " three"],
        }
    ]


def test_a_file_gitignore_ignores_shows_neither_its_diff_nor_its_contents_in_the_input(
    served: Served, project: Project
) -> None:
    (project.root / ".gitignore").write_bytes(b"secret.env\n")
    subprocess.run(["git", "init", "-q", str(project.root)], check=True)
    [call] = project.turn("keep a secret", ("write", "secret.env", "TOKEN=hunter2\n"))
    reply = served.get(session_path(project, f"/calls/{call}"))
    assert reply.status == 200
    assert b"hunter2" not in reply.body
    [diff] = reply.json()["call"]["diffs"]
    assert (diff["hidden"], diff["lines"]) == (True, [])
    assert b"hunter2" not in served.get(session_path(project, "/history")).body


def test_status_and_files_are_the_cli_objects(served: Served, project: Project) -> None:
    assert served.get(session_path(project, "/status")).json() == project.json("status", "--session", project.session)
    files = served.get(session_path(project, "/files")).json()
    assert files == project.json("files", "--session", project.session)
    assert [item["path"] for item in files["files"]] == ["a.txt", "new.txt", "b.txt"]


def test_a_call_or_a_session_that_is_not_there_is_404(served: Served, project: Project) -> None:
    assert served.get(f"{API}/sessions/0123abcd/history").status == 404
    assert served.get(f"{API}/sessions/not-hex/history").status == 404
    assert served.get(session_path(project, "/calls/0123abcd")).status == 404


def test_a_store_whose_database_is_deleted_under_the_server_is_503_and_a_plan_shown_before_is_not_applied(
    served: Served, project: Project, home: Path, tmp_path: Path
) -> None:
    """The server keeps the store open between requests and opens it again when a new opening would give
    another: once its database is deleted, every request is refused as opening it is (503), and a revert planned
    before is not applied (nor recorded into the deleted file, where no undo would find it); once the folder is
    moved away, as the refusal advises, the server answers from the new, empty store."""
    call = project.calls[0]
    path = session_path(project, f"/calls/{call}/revert")
    plan = plan_id(served.post(path, {"apply": False}))
    (home / "turnback.db").unlink()
    for reply in (served.get(f"{API}/sessions"), served.post(path, {"apply": True, "plan": plan})):
        assert (reply.status, reply.code) == (503, "store_database_missing"), reply.json()
        assert reply.json()["error"]["message"].startswith(f"the database of the store at {home} is gone")
    assert project.read("a.txt") == b"one\nTWO\nthree\n"
    home.rename(tmp_path / "old-store")
    reply = served.get(f"{API}/sessions")
    assert (reply.status, reply.json()["sessions"]) == (200, [])
    assert (home / "turnback.db").is_file()


# -- taking back: plan, then apply the plan shown -----------------------------------------------------


def test_revert_plans_first_and_applies_only_the_plan_shown(served: Served, project: Project) -> None:
    call = project.calls[0]
    path = session_path(project, f"/calls/{call}/revert")
    preview = served.post(path, {"apply": False})
    body = preview.json()
    assert preview.status == 200
    assert body["applied"] is False
    assert body["host"] == socket.gethostname()
    assert body["action"]["code"] == "label_revert"
    [row] = body["rows"]
    assert (row["action"], row["path"], row["conflict"], row["created"]) == ("restore", "a.txt", False, False)
    assert row["diff"] == ["--- a/a.txt", "+++ b/a.txt", "@@ -1,3 +1,3 @@", " one", "-TWO", "+two", " three"]
    assert project.read("a.txt") == b"one\nTWO\nthree\n"  # a preview changes nothing
    assert served.post(path, {}).json()["applied"] is False  # neither does an empty body
    refused = served.post(path, {"apply": True})
    assert (refused.status, refused.code) == (400, "serve_plan_required")
    assert project.read("a.txt") == b"one\nTWO\nthree\n"
    done = served.post(path, {"apply": True, "plan": body["plan"]["id"]})
    assert done.status == 200, done.json()
    assert done.json()["applied"] is True
    assert done.json()["message"].startswith("reverted: 1 file restored")
    assert project.read("a.txt") == b"one\ntwo\nthree\n"
    again = served.post(path, {"apply": True, "plan": body["plan"]["id"]})
    assert (again.status, again.code) == (409, "already_applied")


def test_a_file_the_call_created_is_deleted_by_its_revert(served: Served, project: Project) -> None:
    path = session_path(project, f"/calls/{project.calls[1]}/revert")
    preview = served.post(path, {"apply": False}).json()
    assert preview["action"]["code"] == "label_delete"
    assert preview["rows"][0]["created"] is True
    assert served.post(path, {"apply": True, "plan": preview["plan"]["id"]}).status == 200
    assert not (project.root / "new.txt").exists()


def test_a_file_changed_since_the_plan_is_409_and_keeps_its_bytes(served: Served, project: Project) -> None:
    path = session_path(project, f"/calls/{project.calls[0]}/revert")
    plan = plan_id(served.post(path, {"apply": False}))
    (project.root / "a.txt").write_bytes(b"edited after the preview\n")
    reply = served.post(path, {"apply": True, "plan": plan})
    assert reply.status == 409
    assert reply.code == "changed_since_preview"
    assert reply.json()["rows"][0]["status"] == "skipped"
    assert project.read("a.txt") == b"edited after the preview\n"


def test_restore_anyway_with_the_plan_that_showed_the_conflict(served: Served, project: Project) -> None:
    path = session_path(project, f"/calls/{project.calls[0]}/revert")
    (project.root / "a.txt").write_bytes(b"the user's line\n")
    shown = served.post(path, {"apply": False}).json()
    [row] = shown["rows"]
    assert (row["action"], row["conflict"]) == ("skip", True)
    assert row["diff"] == ["--- a/a.txt", "+++ b/a.txt", "@@ -1 +1,3 @@", "-the user's line", "+one", "+two", "+three"]
    plain = served.post(path, {"apply": True, "plan": shown["plan"]["id"]})
    assert (plain.status, plain.code) == (409, "force_only_changed_nothing")
    assert project.read("a.txt") == b"the user's line\n"
    done = served.post(path, {"apply": True, "plan": shown["plan"]["id"], "anyway": True})
    assert done.status == 200, done.json()
    assert project.read("a.txt") == b"one\ntwo\nthree\n"
    trash = Path(done.json()["trash"])
    assert (trash / "a.txt").read_bytes() == b"the user's line\n"


def test_restore_anyway_refuses_when_the_file_changed_again_since_that_plan(served: Served, project: Project) -> None:
    path = session_path(project, f"/calls/{project.calls[0]}/revert")
    (project.root / "a.txt").write_bytes(b"the user's line\n")
    shown = served.post(path, {"apply": False}).json()
    (project.root / "a.txt").write_bytes(b"written again after the dialog opened\n")
    reply = served.post(path, {"apply": True, "plan": shown["plan"]["id"], "anyway": True})
    assert reply.status == 409
    assert reply.code == "changed_since_shown"
    assert project.read("a.txt") == b"written again after the dialog opened\n"


def test_a_later_call_that_wrote_the_file_is_named_on_the_conflict_row(served: Served, project: Project) -> None:
    [later] = project.turn("edit again", ("edit", "a.txt", "one", "ONE"))
    row = served.post(session_path(project, f"/calls/{project.calls[0]}/revert"), {}).json()["rows"][0]
    assert row["conflict"] is True
    assert row["later_call"] is not None and later.startswith(row["later_call"])


def test_another_sessions_call_node_and_plan_are_404_and_change_nothing(
    served: Served, project: Project, engine: turnback.Engine, tmp_path: Path
) -> None:
    other = make_project(engine, tmp_path / "other", title="other")
    theirs = other.calls[0]
    reply = served.post(session_path(project, f"/calls/{theirs}/revert"), {"apply": False})
    assert (reply.status, reply.code) == (404, "serve_call_of_another_session")
    assert served.get(session_path(project, f"/calls/{theirs}")).status == 404
    their_turn = other.json("log", "--session", other.session)["turns"][0]["id"]
    head = project.json("log", "--session", project.session)["head"]
    node = served.post(session_path(project, "/rollback"), {"node": their_turn, "expect_head": head})
    assert (node.status, node.code) == (404, "turn_of_another_session_refused")
    their_plan = plan_id(served.post(f"{API}/sessions/{other.session}/calls/{theirs}/revert", {"apply": False}))
    ours = session_path(project, f"/calls/{project.calls[0]}/revert")
    crossed = served.post(ours, {"apply": True, "plan": their_plan})
    assert (crossed.status, crossed.code) == (404, "serve_plan_of_another_session")
    assert project.read("a.txt") == b"one\nTWO\nthree\n"
    assert other.read("a.txt") == b"one\nTWO\nthree\n"


def test_a_plan_of_another_verb_or_call_is_400(served: Served, project: Project) -> None:
    undo_plan = plan_id(served.post(session_path(project, "/undo"), {"apply": False}))
    revert = served.post(session_path(project, f"/calls/{project.calls[0]}/revert"), {"apply": True, "plan": undo_plan})
    assert (revert.status, revert.code) == (400, "serve_plan_other_operation")
    plan_of_first = plan_id(served.post(session_path(project, f"/calls/{project.calls[0]}/revert"), {}))
    crossed = served.post(
        session_path(project, f"/calls/{project.calls[2]}/revert"), {"apply": True, "plan": plan_of_first}
    )
    assert (crossed.status, crossed.code) == (400, "serve_plan_of_another_call")
    assert project.read("a.txt") == b"one\nTWO\nthree\n"
    assert project.read("b.txt") == b"BEE\n"


def test_undo_then_redo_with_their_plans_and_the_bytes_after_each(served: Served, project: Project) -> None:
    undo = session_path(project, "/undo")
    preview = served.post(undo, {"apply": False}).json()
    assert preview["plan"]["kind"] == "undo"
    assert project.read("b.txt") == b"BEE\n"
    assert served.post(undo, {"apply": True, "plan": preview["plan"]["id"]}).status == 200
    assert project.read("b.txt") == b"bee\n"
    both = served.post(undo, {"apply": False, "from": 1}).json()
    assert served.post(undo, {"apply": True, "plan": both["plan"]["id"]}).status == 200
    assert project.read("a.txt") == b"one\ntwo\nthree\n"
    assert not (project.root / "new.txt").exists()
    redo = session_path(project, "/redo")
    redo_plan = plan_id(served.post(redo, {"apply": False}))
    assert served.post(redo, {"apply": True, "plan": redo_plan}).status == 200
    assert project.read("a.txt") == b"one\nTWO\nthree\n"
    assert project.read("new.txt") == b"created by the agent\n"
    assert project.read("b.txt") == b"bee\n"


def test_undo_force_with_the_plan_that_showed_a_skip(served: Served, project: Project) -> None:
    (project.root / "b.txt").write_bytes(b"mine\n")
    undo = session_path(project, "/undo")
    shown = served.post(undo, {"apply": False}).json()
    assert shown["rows"][0]["action"] == "skip"
    assert served.post(undo, {"apply": True, "plan": shown["plan"]["id"]}).status == 409
    assert project.read("b.txt") == b"mine\n"
    forced = served.post(undo, {"apply": True, "plan": shown["plan"]["id"], "force": True})
    assert forced.status == 200, forced.json()
    assert project.read("b.txt") == b"bee\n"


def test_423_while_a_turn_runs_naming_it_and_nothing_changes(served: Served, project: Project) -> None:
    holder = subprocess.Popen(["sleep", "60"])
    try:
        assert project.cli("turn", "begin", "--session", project.session, "--pid", str(holder.pid)).rc == 0
        for path, body in (
            (session_path(project, "/undo"), {"apply": False}),
            (session_path(project, f"/calls/{project.calls[0]}/revert"), {"apply": False}),
            (session_path(project, "/rollback"), {"node": 1}),
            (session_path(project, "/redo"), {}),
            (session_path(project, "/resend"), {"message": 1}),
        ):
            reply = served.post(path + "?lang=ja", body)
            assert reply.status == 423, (path, reply.json())
            error = reply.json()["error"]
            assert error["type"] == "BusyError"
            assert str(holder.pid) in json.dumps(error["params"], ensure_ascii=False)
        assert project.read("b.txt") == b"BEE\n"
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("holds", ["compaction", "approval waiting", "a background job"])
def test_423_while_a_compaction_an_approval_or_a_job_runs_naming_it(
    served: Served, project: Project, holds: str
) -> None:
    holder = subprocess.Popen(["sleep", "60"])
    try:
        if holds == "a background job":
            assert project.cli("turn", "begin", "--session", project.session).rc == 0
            started = project.cli("--json", "exec", "--session", project.session, "--background", "--", "sleep", "60")
            assert started.rc == 0, started.err
            assert project.cli("turn", "end", "--session", project.session).rc == 0
            code, named = "busy_job", "sleep 60"
        else:
            marked = project.cli("busy", "start", "--session", project.session, "--pid", str(holder.pid), holds)
            assert marked.rc == 0, marked.err
            code, named = "busy_mark_held", holds
        for path, body in (
            (session_path(project, "/undo"), {"apply": False}),
            (session_path(project, f"/calls/{project.calls[0]}/revert"), {"apply": False}),
            (session_path(project, "/rollback"), {"node": 1}),
        ):
            reply = served.post(path, body)
            assert (reply.status, reply.code) == (423, code), reply.json()
            assert named in reply.json()["error"]["message"]
        assert project.read("a.txt") == b"one\nTWO\nthree\n"
        assert project.read("b.txt") == b"BEE\n"
    finally:
        holder.kill()
        holder.wait()
        for job in project.json("jobs", "--session", project.session)["jobs"]:
            if job["status"] == "running":
                assert project.cli("jobs", "--session", project.session, "stop", job["id"]).rc == 0


def test_rollback_with_the_head_seen_then_a_stale_head_is_409(served: Served, project: Project) -> None:
    rollback = session_path(project, "/rollback")
    log = project.json("log", "--session", project.session)
    head = log["head"]
    preview = served.post(rollback, {"node": 0, "expect_head": 2}).json()
    assert preview["head"] == head
    assert preview["turn_numbers"] == [2, 1]
    assert [f["path"] for f in preview["files"]] == ["a.txt", "b.txt", "new.txt"]
    stale = served.post(rollback, {"node": 0, "expect_head": 1})
    assert (stale.status, stale.code) == (409, "rollback_stale_head")
    assert project.read("b.txt") == b"BEE\n"
    not_seen = served.post(rollback, {"node": 0, "expect_head": 1, "apply": True, "plan": preview["plan"]["id"]})
    assert (not_seen.status, not_seen.code) == (409, "serve_expect_head_not_plans")
    assert project.read("b.txt") == b"BEE\n"
    done = served.post(rollback, {"node": 1, "expect_head": head, "apply": False}).json()
    applied = served.post(rollback, {"node": 1, "expect_head": head, "apply": True, "plan": done["plan"]["id"]})
    assert applied.status == 200, applied.json()
    assert project.read("b.txt") == b"bee\n"
    assert project.read("a.txt") == b"one\nTWO\nthree\n"
    history = served.get(session_path(project, "/history")).json()
    assert {t["number"]: t["branch"] for t in history["turns"]} == {1: "active", 2: "abandoned"}


def test_a_rollback_whose_head_moved_since_the_preview_is_409(served: Served, project: Project) -> None:
    rollback = session_path(project, "/rollback")
    preview = served.post(rollback, {"node": 1, "expect_head": 2}).json()
    project.turn("one more", ("edit", "a.txt", "three", "THREE"))
    reply = served.post(rollback, {"node": 1, "apply": True, "plan": preview["plan"]["id"]})
    assert (reply.status, reply.code) == (409, "head_moved_since_preview")
    assert project.read("a.txt") == b"one\nTWO\nTHREE\n"
    assert project.read("b.txt") == b"BEE\n"


def test_resend_lists_files_then_each_choice(served: Served, project: Project) -> None:
    resend = session_path(project, "/resend")
    listed = served.post(resend, {"message": 2, "choice": None}).json()
    assert listed["files"] == [{"path": "b.txt", "calls": 1, "added": 1, "removed": 1}]
    assert listed["resent"] is False
    cancel = served.post(resend, {"message": 2, "choice": "cancel", "plan": listed["plan"]["id"]})
    assert cancel.status == 200
    assert project.read("b.txt") == b"BEE\n"
    no_apply = served.post(resend, {"message": 2, "choice": "revert", "plan": listed["plan"]["id"]})
    assert (no_apply.status, no_apply.code) == (400, "serve_apply_required")
    no_plan = served.post(resend, {"message": 2, "choice": "revert", "apply": True})
    assert (no_plan.status, no_plan.code) == (400, "serve_plan_required")
    assert project.read("b.txt") == b"BEE\n"
    sent = served.post(resend, {"message": 2, "choice": "revert", "apply": True, "plan": listed["plan"]["id"]})
    assert sent.status == 200, sent.json()
    assert sent.json()["resent"] is True
    assert project.read("b.txt") == b"bee\n"
    kept = served.post(resend, {"message": 1, "choice": None}).json()
    done = served.post(resend, {"message": 1, "choice": "keep", "apply": True, "plan": kept["plan"]["id"]})
    assert done.status == 200 and done.json()["resent"] is True
    assert project.read("a.txt") == b"one\nTWO\nthree\n"
    assert project.read("new.txt") == b"created by the agent\n"


def test_send_anyway_when_a_file_cannot_be_reverted(served: Served, project: Project) -> None:
    resend = session_path(project, "/resend")
    (project.root / "b.txt").write_bytes(b"mine\n")
    listed = served.post(resend, {"message": 2, "choice": None}).json()
    refused = served.post(resend, {"message": 2, "choice": "revert", "apply": True, "plan": listed["plan"]["id"]})
    assert refused.json()["resent"] is False
    assert project.read("b.txt") == b"mine\n"
    listed = served.post(resend, {"message": 2, "choice": None}).json()
    anyway = served.post(resend, {"message": 2, "choice": "anyway", "apply": True, "plan": listed["plan"]["id"]})
    assert anyway.status == 200, anyway.json()
    assert anyway.json()["resent"] is True
    assert project.read("b.txt") == b"mine\n"


def test_resend_lists_a_file_whose_copy_the_cap_dropped_as_not_covered(served: Served, project: Project) -> None:
    assert project.cli("config", "set", "store.max_mib", "1").rc == 0
    for number in range(4):  # 1.6 MB of copies past a 1 MiB cap, by the CLI (it reads the cap): turn 1's go
        assert project.cli("turn", "begin", "--session", project.session).rc == 0
        big = os.urandom(200_000).hex().encode()
        assert project.cli("write", "--session", project.session, f"big{number}.bin", stdin=big).rc == 0
        assert project.cli("turn", "end", "--session", project.session).rc == 0
    listed = served.post(session_path(project, "/resend"), {"message": 1, "choice": None})
    assert listed.status == 200, listed.json()
    rows = {row["path"]: row for row in listed.json()["rows"]}
    assert (rows["a.txt"]["action"], rows["a.txt"]["code"]) == ("not covered", "copy_evicted")
    files = {item["path"]: item for item in listed.json()["files"]}
    assert files["a.txt"] == {"path": "a.txt", "calls": 1, "added": 0, "removed": 0}  # nothing to write back
    assert project.cli("resend", "1").rc == 0  # the CLI's preview too


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"{not json", "serve_body_not_json"),
        (b"[1, 2]", "serve_body_not_object"),
        (b'"apply"', "serve_body_not_object"),
        (b'{"apply": "yes"}', "serve_field_type"),
        (b'{"apply": true, "plan": 7}', "serve_field_type"),
        (b'{"turn": -1}', "serve_field_type"),
        (b'{"turn": true}', "serve_field_type"),
        (b'{"everything": true}', "serve_field_unknown"),
        (b"\xff\xfe", "serve_body_not_json"),
        (b"[" * 100_000, "serve_body_too_large"),
    ],
)
def test_a_malformed_body_is_400_and_changes_nothing(served: Served, project: Project, raw: bytes, code: str) -> None:
    reply = served.request("POST", session_path(project, "/undo"), raw=raw)
    assert (reply.status, reply.code) == (400, code)
    assert project.read("b.txt") == b"BEE\n"


def test_rollback_needs_its_node_and_resend_a_known_choice(served: Served, project: Project) -> None:
    missing = served.post(session_path(project, "/rollback"), {})
    assert (missing.status, missing.code) == (400, "serve_field_required")
    choice = served.post(session_path(project, "/resend"), {"message": 1, "choice": "maybe"})
    assert (choice.status, choice.code) == (400, "serve_field_type")


# -- languages ---------------------------------------------------------------------------------------


def test_refusals_are_worded_in_the_requests_language(served: Served, project: Project) -> None:
    path = session_path(project, "/rollback")
    for lang, headers, query in (
        ("ja", {}, "?lang=ja"),
        ("zh-CN", {"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.5"}, ""),
        ("ja", {"Accept-Language": "fr-FR, ja;q=0.8"}, ""),
        ("en", {"Accept-Language": "zh-CN"}, "?lang=en"),
        ("en", {}, ""),
    ):
        error = served.post(path + query, {"node": 0, "expect_head": 1}, headers=headers).json()["error"]
        assert error["code"] == "rollback_stale_head"
        message = Message("rollback_stale_head", head=2, given="1")
        assert error["message"] == word(message, lang), lang
    bad = served.get(f"{API}/sessions?lang=fr", headers={"Accept-Language": "ja"})
    assert (bad.status, bad.code) == (400, "unknown_language")
    assert bad.json()["error"]["message"].startswith(word(bad_language_message("fr"), "ja")[:8])
    unauthorized = served.get(f"{API}/sessions?lang=zh-CN", token=None)
    assert unauthorized.json()["error"]["message"] == word(Message("serve_token_missing"), "zh-CN")


def bad_language_message(value: str) -> Message:
    return Message(
        "unknown_language", value=value, source="lang", known=Message("comma_list", items=("en", "zh-CN", "ja"))
    )


# The issue's labels in its order; Delete (None here) is the action of a plan that deletes what a call created.
LABEL_CODES = (
    "label_revert",
    "label_reverted",
    None,
    "label_revert_and_send",
    "label_keep_files_and_send",
    "label_send_anyway",
    "label_restore_anyway",
    "label_delete_anyway",
)


@pytest.mark.parametrize(
    ("lang", "labels"),
    [
        (
            "en",
            [
                "Revert",
                "Reverted",
                "Delete",
                "Revert and Send",
                "Keep Files and Send",
                "Send Anyway",
                "Restore Anyway",
                "Delete Anyway",
            ],
        ),
        ("zh-CN", ["撤销修改", "已撤销", "删除", "撤销并发送", "保留文件并发送", "仍然发送", "仍然恢复", "仍然删除"]),
        (
            "ja",
            [
                "元に戻す",
                "元に戻し済み",
                "削除",
                "元に戻して送信",
                "ファイルはそのままで送信",
                "このまま送信",
                "このまま復元",
                "このまま削除",
            ],
        ),
    ],
)
def test_the_page_labels_come_in_each_language_exactly(
    served: Served, project: Project, lang: str, labels: list[str]
) -> None:
    """The page's labels (GET messages), and Delete, which a plan deleting what a call created carries."""
    by_query = served.get(f"{API}/messages?lang={lang}").json()
    by_header = served.get(f"{API}/messages", headers={"Accept-Language": f"{lang};q=0.9"}).json()
    assert by_query == by_header
    assert by_query["lang"] == lang
    deleting = served.post(session_path(project, f"/calls/{project.calls[1]}/revert?lang={lang}"), {}).json()
    assert deleting["action"]["code"] == "label_delete"
    words = [by_query["messages"][code] if code else deleting["action"]["message"] for code in LABEL_CODES]
    assert words == labels
    assert [item["code"] for item in by_query["languages"]] == ["en", "zh-CN", "ja"]


def test_the_servers_language_without_a_header_is_turnback_lang(home: Path) -> None:
    server = serve(home, env={"TURNBACK_LANG": "ja"})
    try:
        assert server.get(f"{API}/messages").json()["lang"] == "ja"
        assert server.get(f"{API}/messages", headers={"Accept-Language": "zh"}).json()["lang"] == "zh-CN"
    finally:
        assert server.stop() == 0


# -- events ------------------------------------------------------------------------------------------


def test_events_announce_a_new_turn_and_call_and_an_apply(served: Served, project: Project) -> None:
    stream = socket.create_connection(("127.0.0.1", served.port), timeout=10)
    stream.sendall(
        f"GET {API}/events HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
        f"Authorization: Bearer {served.token}\r\n\r\n".encode()
    )
    received = b""

    def events_until(check: Any, seconds: float = 10.0) -> list[dict[str, Any]]:
        nonlocal received
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = [json.loads(line[len(b"data: ") :]) for line in received.split(b"\n") if line.startswith(b"data: ")]
            if check(found):
                return found
            stream.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                received += stream.recv(65536)
            except TimeoutError:
                pass
        raise AssertionError(f"no such event in {received!r}")

    events_until(lambda found: b": connected" in received)
    [call] = project.turn("a live turn", ("edit", "a.txt", "one", "uno"))
    found = events_until(lambda found: any(event.get("call") == call for event in found))
    event = next(event for event in found if event.get("call") == call)
    assert event["session"] == project.session
    turns = project.json("log", "--session", project.session)["turns"]
    assert event["turn"] == turns[-1]["id"]
    assert set(event) == {"schema", "session", "turn", "call", "operation"}
    plan = plan_id(served.post(session_path(project, f"/calls/{call}/revert"), {}))
    assert served.post(session_path(project, f"/calls/{call}/revert"), {"apply": True, "plan": plan}).status == 200
    events_until(lambda found: any(event.get("operation") == plan for event in found))
    stream.close()


# -- listening elsewhere ---------------------------------------------------------------------------


def test_a_host_other_than_loopback_needs_allow_remote(home: Path) -> None:
    refused = run_cli(home, "serve", "--host", "0.0.0.0", "--port", "0")
    assert refused.rc == 2
    assert "--allow-remote" in refused.err
    out_of_range = run_cli(home, "serve", "--port", "70000")
    assert out_of_range.rc == 2


def test_allow_remote_warns_on_start_and_still_checks_token_and_host(home: Path, project: Project) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "turnback", "serve", "--host", "0.0.0.0", "--port", "0", "--allow-remote"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(home),
        cwd=ROOT,
    )
    assert process.stdout is not None and process.stderr is not None
    line = process.stdout.readline().decode().strip()
    match = START_LINE.match(line)
    assert match is not None, line
    server = Served(match.group(1), int(match.group(2)), match.group(3), process)
    try:
        assert server.get(f"{API}/sessions").status == 200
        assert server.get(f"{API}/sessions", token=None).status == 401
        assert server.get(f"{API}/sessions", headers={"Host": f"evil.example:{server.port}"}).status == 403
        assert server.get(f"{API}/sessions", headers={"Host": f"192.0.2.7:{server.port}"}).status == 200
    finally:
        assert server.stop() == 0
    warning = server.stderr.decode()
    assert "anyone who can reach this port and holds the token can revert files" in warning
    assert server.token not in warning


def test_a_port_in_use_is_a_usage_error(home: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        result = run_cli(home, "serve", "--port", str(taken.getsockname()[1]))
        assert result.rc == 2
        assert "cannot listen on 127.0.0.1:" in result.err
    finally:
        taken.close()


def test_open_hands_the_token_address_to_the_browser(home: Path, tmp_path: Path) -> None:
    opened = tmp_path / "opened"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" > {opened}\n')
    browser.chmod(0o755)
    server = serve(home, "--open", env={"BROWSER": str(browser)})
    try:
        deadline = time.monotonic() + 10
        while not opened.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert opened.read_text().strip() == server.url
    finally:
        assert server.stop() == 0

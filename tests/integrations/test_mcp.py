"""``turnback mcp --root DIR`` driven by the official MCP SDK client over stdio, as an MCP host would."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.conftest import TEST_KEY, cli_env, run_cli, tree_state

mcp = pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

T = TypeVar("T")

TOOLS = {
    "read_file",
    "read_text_file",
    "read_media_file",
    "read_multiple_files",
    "list_directory_with_sizes",
    "write_file",
    "edit_file",
    "create_directory",
    "list_directory",
    "directory_tree",
    "move_file",
    "search_files",
    "get_file_info",
    "list_allowed_directories",
    "delete_file",
    "run_command",
}


def serve(
    home: Path,
    project: Path,
    errlog: Path,
    body: Callable[[ClientSession], Awaitable[T]],
    env: dict[str, str] | None = None,
) -> T:
    """Start ``turnback mcp --root PROJECT`` (in *env*, else the tests' own), initialize a client session, run
    *body*, and shut it down."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "turnback", "mcp", "--root", str(project)],
        env=env or cli_env(home),
        cwd=str(project),
    )
    return drive(params, errlog, body)


def drive(params: StdioServerParameters, errlog: Path, body: Callable[[ClientSession], Awaitable[T]]) -> T:
    """Start the stdio server *params* name, initialize a client session, run *body*, and shut it down."""

    async def main() -> T:
        with errlog.open("a") as log:
            async with stdio_client(params, errlog=log) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await asyncio.wait_for(body(session), timeout=120)

    return asyncio.run(main())


def is_error(result: Any) -> bool:
    flag = getattr(result, "is_error", None)
    if flag is None:
        flag = getattr(result, "isError", None)
    return bool(flag)


async def ok(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    assert not is_error(result), (tool, text)
    assert isinstance(text, str)
    return text


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    assert is_error(result), (tool, text)
    assert isinstance(text, str)
    return text


def test_the_tools_are_exactly_the_filesystem_servers_plus_delete_and_run(
    home: Path, project: Path, tmp_path: Path
) -> None:
    async def body(session: ClientSession) -> set[str]:
        listed = await session.list_tools()
        return {tool.name for tool in listed.tools}

    assert serve(home, project, tmp_path / "server.err", body) == TOOLS


def test_changes_through_the_tools_are_undone_byte_for_byte(home: Path, project: Path, tmp_path: Path) -> None:
    start = tree_state(project)
    main_py = project / "src" / "main.py"

    async def body(session: ClientSession) -> None:
        assert (await ok(session, "list_allowed_directories")).splitlines()[-1] == str(project)
        wrote = await ok(session, "write_file", path="notes/todo.txt", content="one\ntwo\n")
        assert wrote.startswith("Successfully wrote to notes/todo.txt")
        assert (project / "notes" / "todo.txt").read_bytes() == b"one\ntwo\n"

        edits = [{"oldText": "print('hi')", "newText": "print('hello')"}]
        preview = await ok(session, "edit_file", path="src/main.py", edits=edits, dryRun=True)
        assert preview.splitlines()[:2] == ["--- a/src/main.py", "+++ b/src/main.py"]
        assert "-print('hi')" in preview.splitlines() and "+print('hello')" in preview.splitlines()
        assert main_py.read_bytes() == b"import pkg\n\nprint('hi')\n"
        edited = await ok(session, "edit_file", path="src/main.py", edits=edits)
        assert edited == preview
        assert main_py.read_bytes() == b"import pkg\n\nprint('hello')\n"

        assert (await ok(session, "move_file", source="docs/guide.md", destination="docs/moved.md")).startswith(
            "Successfully moved"
        )
        assert not (project / "docs" / "guide.md").exists()
        assert (project / "docs" / "moved.md").read_bytes() == b"no final newline"
        await ok(session, "create_directory", path="build/out")
        assert (project / "build" / "out").is_dir()
        await ok(session, "delete_file", path="run.sh")
        assert not (project / "run.sh").exists()

        ran = await ok(
            session, "run_command", command="echo ran; printf 'three\\n' >> notes/todo.txt; printf 'x\\n' > made.txt"
        )
        lines = ran.splitlines()
        assert lines[0] == "ran", ran
        assert "(exit status 0)" in lines, ran
        assert lines[-1].startswith("changed notes/todo.txt +1 -0"), ran
        assert "new made.txt" in lines[-1], ran

        # the server is idle between calls: the user's undo is not refused as busy
        preview_undo = run_cli(home, "undo", "--dry-run", cwd=project)
        assert preview_undo.rc == 0, preview_undo
        assert "busy" not in preview_undo.err and "running" not in preview_undo.err
        applied = run_cli(home, "undo", "--yes", cwd=project)
        assert applied.rc == 0, applied
        assert tree_state(project) == start

        # the next call starts a new turn (the undone one is not reopened); while a call runs, undo waits
        running = asyncio.create_task(
            ok(session, "run_command", command="printf 'later\\n' > later.txt; sleep 2.5; echo done")
        )
        await asyncio.sleep(0.5)
        during = await asyncio.to_thread(run_cli, home, "undo", "--dry-run", cwd=project)
        assert during.rc == 3, during
        assert "later.txt" in (await running).splitlines()[-1]
        after = run_cli(home, "undo", "--yes", cwd=project)
        assert after.rc == 0, after
        assert tree_state(project) == start

    serve(home, project, tmp_path / "server.err", body)
    assert tree_state(project) == start


def test_between_calls_each_file_call_is_recorded_done_and_its_turn_ended(
    home: Path, project: Path, tmp_path: Path
) -> None:
    """A tool turn marks its calls done in the write that ends it: once a call has answered, nothing of it
    shows as running or "may be cut short", and the calls before it in the turn stay done too."""

    def recorded() -> list[tuple[str, list[tuple[str, str]]]]:
        log = run_cli(home, "log", "--json", cwd=project)
        assert log.rc == 0, log
        return [
            (turn["status"], [(call["tool"], call["status"]) for call in turn["calls"]])
            for turn in log.json()["turns"]  # type: ignore[attr-defined]
        ]

    async def body(session: ClientSession) -> list[list[tuple[str, list[tuple[str, str]]]]]:
        seen = []
        await ok(session, "write_file", path="a.txt", content="one\n")
        seen.append(await asyncio.to_thread(recorded))
        await ok(session, "edit_file", path="a.txt", edits=[{"oldText": "one", "newText": "two"}])
        await ok(session, "create_directory", path="made")
        await ok(session, "move_file", source="a.txt", destination="made/a.txt")
        await ok(session, "delete_file", path="made/a.txt")
        seen.append(await asyncio.to_thread(recorded))
        return seen

    first, last = serve(home, project, tmp_path / "server.err", body)
    assert first == [("ended", [("write_file", "done")])]
    tools = ["write_file", "edit_file", "mkdir", "move", "delete"]
    assert last == [("ended", [(tool, "done") for tool in tools])]


def test_paths_outside_the_root_and_the_store_are_refused(home: Path, project: Path, tmp_path: Path) -> None:
    start = tree_state(project)
    outside = tmp_path / "outside.txt"
    store_file = home / "planted.txt"

    async def body(session: ClientSession) -> None:
        await ok(session, "list_directory", path=".")  # the store exists once the server runs
        assert "outside the allowed folder" in await refused(session, "write_file", path=str(outside), content="x")
        assert "outside the allowed folder" in await refused(session, "write_file", path="../x", content="x")
        assert "outside the allowed folder" in await refused(
            session, "move_file", source="README.md", destination="../moved.md"
        )
        assert "outside the allowed folder" in await refused(session, "create_directory", path="../newdir")
        assert "turnback's store" in await refused(session, "write_file", path=str(store_file), content="x")
        assert "turnback's store" in await refused(session, "create_directory", path=str(home / "sub"))
        assert "turnback's store" in await refused(session, "delete_file", path=str(home / "turnback.db"))
        missing = await refused(session, "edit_file", path="README.md", edits=[{"oldText": "absent", "newText": "x"}])
        assert "not in README.md" in missing

    serve(home, project, tmp_path / "server.err", body)
    assert not outside.exists()
    assert not (tmp_path / "x").exists() and not (tmp_path / "moved.md").exists() and not (tmp_path / "newdir").exists()
    assert not store_file.exists() and not (home / "sub").exists() and (home / "turnback.db").exists()
    assert tree_state(project) == start
    log = run_cli(home, "log", "--json", cwd=project)
    assert log.rc == 0, log
    assert all(not turn["calls"] for turn in log.json()["turns"])  # type: ignore[attr-defined]


def test_a_store_inside_the_root_is_refused_too(project: Path, tmp_path: Path) -> None:
    home = project / ".turnback-store"

    async def body(session: ClientSession) -> None:
        for tool, arguments in (
            ("write_file", {"path": ".turnback-store/planted", "content": "x"}),
            ("write_file", {"path": ".turnback-store/turnback.db", "content": "x"}),
            ("create_directory", {"path": ".turnback-store/sub"}),
            ("move_file", {"source": "README.md", "destination": ".turnback-store/README.md"}),
            ("delete_file", {"path": ".turnback-store/turnback.db"}),
            ("read_text_file", {"path": ".turnback-store/turnback.db"}),
        ):
            assert "turnback's store" in await refused(session, tool, **arguments)

    before = sorted(p.name for p in project.iterdir())
    serve(home, project, tmp_path / "server.err", body)
    assert not (home / "planted").exists() and not (home / "sub").exists() and not (home / "README.md").exists()
    assert (project / "README.md").exists()
    assert sorted(p.name for p in project.iterdir()) == sorted([*before, ".turnback-store"])


def test_listings_do_not_walk_into_a_store_inside_the_root(project: Path, tmp_path: Path) -> None:
    home = project / ".turnback-store"

    async def body(session: ClientSession) -> tuple[str, str, str]:
        listed = await session.call_tool("list_directory", {"path": ".turnback-store"})
        assert is_error(listed)
        tree = await ok(session, "directory_tree", path=".")
        found = await ok(session, "search_files", path=".", pattern="turnback")
        return listed.content[0].text, tree, found  # type: ignore[union-attr]

    _, tree, found = serve(home, project, tmp_path / "server.err", body)
    assert "turnback.db" not in tree, tree
    assert "turnback.db" not in found, found


def test_the_diff_of_an_edit_by_absolute_path_names_the_file_in_the_root(
    home: Path, project: Path, tmp_path: Path
) -> None:
    main_py = project / "src" / "main.py"

    async def body(session: ClientSession) -> str:
        edits = [{"oldText": "print('hi')", "newText": "print('hello')"}]
        return await ok(session, "edit_file", path=str(main_py), edits=edits, dryRun=True)

    preview = serve(home, project, tmp_path / "server.err", body)
    assert main_py.read_bytes() == b"import pkg\n\nprint('hi')\n"
    assert preview.splitlines()[:2] == ["--- a/src/main.py", "+++ b/src/main.py"], preview


def test_run_command_gets_no_key_store_or_relay_setting(home: Path, project: Path, tmp_path: Path) -> None:
    async def body(session: ClientSession) -> str:
        return await ok(session, "run_command", command="env")

    environment = serve(home, project, tmp_path / "server.err", body)
    names = [line.split("=", 1)[0] for line in environment.splitlines() if "=" in line]
    assert "PATH" in names, environment
    assert [name for name in names if name.startswith("TURNBACK_")] == [], environment
    assert TEST_KEY not in environment and str(home) not in environment, environment


def test_the_first_run_command_on_a_large_plain_folder_is_split_over_processes(home: Path, tmp_path: Path) -> None:
    """The server runs its tools in threads, so it forks no scan workers itself: the first snapshot of a plain
    folder of 20,000 paths is taken by a helper process, split over two workers (they keep their copies in
    packs, which a scan in one process never makes), and the command's change is recorded as usual."""
    project = tmp_path / "large"
    for n in range(300):  # more folders than the 256 units a first snapshot hands out to its workers
        folder = project / f"part{n:03}"
        folder.mkdir(parents=True)
        for m in range(67):
            (folder / f"f{m}.txt").write_bytes(f"{n}/{m}\n".encode())

    async def body(session: ClientSession) -> str:
        return await ok(session, "run_command", command="echo made > part000/new.txt")

    env = cli_env(home, {"TURNBACK_SCAN_PROCESSES": "2"})
    serve(home, project, tmp_path / "server.err", body, env=env)
    assert (project / "part000" / "new.txt").read_bytes() == b"made\n"
    packs = home / "packs"
    assert packs.is_dir() and any(packs.iterdir()), "the first snapshot was read in one process"
    log = run_cli(home, "log", "--json", cwd=project)
    assert log.rc == 0 and "part000/new.txt" in log.out, log


def test_run_command_refuses_a_cwd_that_is_a_link_out_of_the_root(home: Path, project: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / "out").symlink_to(elsewhere)
    (project / "to-store").symlink_to(home)

    async def body(session: ClientSession) -> tuple[str, str]:
        await ok(session, "list_directory", path=".")  # the store exists once the server runs
        out = await refused(session, "run_command", command="touch made-here", cwd="out")
        store = await refused(session, "run_command", command="touch made-here", cwd="to-store")
        return out, store

    out, store = serve(home, project, tmp_path / "server.err", body)
    assert f"leads outside the allowed folder {project}" in out, out
    assert "turnback's store" in store, store
    assert list(elsewhere.iterdir()) == [] and not (home / "made-here").exists()


def test_a_request_with_a_lone_surrogate_gets_an_error_reply_and_the_server_goes_on(
    home: Path, project: Path, tmp_path: Path
) -> None:
    """Raw JSON-RPC over stdio: ``"\\ud800"`` is valid JSON but no Unicode; the SDK used to drop it unanswered."""
    server = subprocess.Popen(
        [sys.executable, "-m", "turnback", "mcp", "--root", str(project)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "server.err").open("wb"),
        env=cli_env(home),
        cwd=project,
    )
    assert server.stdin is not None and server.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert server.stdin is not None
        server.stdin.write(json.dumps(message).encode() + b"\n")  # json.dumps writes "\ud800" as that escape
        server.stdin.flush()

    def reply(timeout: float = 20.0) -> dict[str, Any]:
        assert server.stdout is not None
        ready, _, _ = select.select([server.stdout], [], [], timeout)
        assert ready, f"no reply within {timeout} s"
        answer = json.loads(server.stdout.readline())
        assert isinstance(answer, dict)
        return answer

    def call(request_id: int, path: str) -> dict[str, Any]:
        arguments = {"name": "read_text_file", "arguments": {"path": path}}
        send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": arguments})
        return reply()

    try:
        client = {"name": "raw", "version": "1"}
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        assert reply()["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        answer = call(2, "\ud800")
        assert answer["id"] == 2 and "result" not in answer, answer
        assert "not Unicode" in answer["error"]["message"], answer
        served = call(3, "README.md")
        assert served["id"] == 3 and served["result"]["content"][0]["text"] == "# project\n\nline two\n", served
    finally:
        server.stdin.close()
        server.wait(20)


def test_other_calls_are_served_while_a_command_runs_and_a_cancel_stops_its_process_group(
    home: Path, project: Path, tmp_path: Path
) -> None:
    group_file = project / "group.txt"

    async def body(session: ClientSession) -> None:
        command = "echo $$ > group.txt; sleep 30; echo late > late.txt"
        running = asyncio.create_task(session.call_tool("run_command", {"command": command}))
        for _ in range(200):
            if group_file.exists() and group_file.read_text().strip():
                break
            await asyncio.sleep(0.05)
        group = int(group_file.read_text())
        started = time.monotonic()
        assert (await ok(session, "read_text_file", path="README.md")).startswith("#")
        assert time.monotonic() - started < 1.0
        running.cancel()  # the client sends notifications/cancelled for it
        with contextlib.suppress(asyncio.CancelledError):
            await running
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _group_alive(group):
            await asyncio.sleep(0.05)
        assert not _group_alive(group), "the command's process group outlived the cancel"
        assert (await ok(session, "list_allowed_directories")).splitlines()[-1] == str(project)

    serve(home, project, tmp_path / "server.err", body)
    assert not (project / "late.txt").exists()
    log = run_cli(home, "log", "--json", cwd=project)
    assert log.rc == 0, log
    calls = [call for turn in log.json()["turns"] for call in turn["calls"]]  # type: ignore[attr-defined]
    assert [call["status"] for call in calls] != ["running"] and calls, calls


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_link_leading_outside_the_root_is_not_followed_and_its_info_says_it_is_a_link(
    home: Path, project: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside\n")
    (project / "out.txt").symlink_to(secret)

    async def body(session: ClientSession) -> tuple[str, str]:
        info = await ok(session, "get_file_info", path="out.txt")
        read = await refused(session, "read_text_file", path="out.txt")
        await refused(session, "write_file", path="out.txt", content="x")
        return info, read

    info, read = serve(home, project, tmp_path / "server.err", body)
    assert "isSymbolicLink: true" in info.splitlines(), info
    assert "isFile: false" in info.splitlines(), info
    assert "outside" not in read
    assert secret.read_text() == "outside\n"


def test_a_store_whose_database_is_deleted_under_the_server_refuses_its_writes_and_a_new_one_takes_them(
    home: Path, project: Path, tmp_path: Path
) -> None:
    """The server keeps the store open between calls; it is opened again at each call when a new opening would
    give another: a write after the database was deleted is refused as opening it is (and not made), never
    recorded into the deleted file; once the folder is moved away, as the refusal advises, the next writes go
    into the new store, in a session of their own, and the user takes them back there."""
    todo = project / "notes" / "todo.txt"

    async def body(session: ClientSession) -> tuple[str, str]:
        await ok(session, "write_file", path="notes/todo.txt", content="one\n")
        (home / "turnback.db").unlink()
        refusal = await refused(session, "write_file", path="notes/todo.txt", content="lost?\n")
        command_refusal = await refused(session, "run_command", command="printf 'lost?\\n' > notes/todo.txt")
        assert todo.read_bytes() == b"one\n"  # neither the write nor the command was made
        home.rename(tmp_path / "old-store")
        await ok(session, "write_file", path="notes/todo.txt", content="two\n")
        ran = await ok(session, "run_command", command="printf 'three\\n' >> notes/todo.txt")
        assert ran.splitlines()[-1].startswith("changed notes/todo.txt +1 -0"), ran
        return refusal, command_refusal

    refusal, command_refusal = serve(home, project, tmp_path / "server.err", body)
    gone = (
        f"the database of the store at {home} is gone ({home / 'turnback.db'} does not exist): turnback will not"
        " start a new, empty store in its place."
    )
    assert refusal.startswith("Error executing tool write_file: " + gone), refusal
    assert command_refusal.startswith("Error executing tool run_command: " + gone), command_refusal
    assert todo.read_bytes() == b"two\nthree\n"
    sessions = run_cli(home, "sessions", "--json", cwd=project)
    assert sessions.rc == 0, sessions
    assert [item["title"] for item in sessions.json()["sessions"]] == ["MCP client"]  # type: ignore[index]
    undone = run_cli(home, "undo", "--yes", cwd=project)  # the write and the command: one turn
    assert undone.rc == 0, undone
    assert todo.read_bytes() == b"one\n"  # what the file held when the new store first saw it

"""The real Claude Code CLI (npm ``@anthropic-ai/claude-code``, its native binary) with turnback's hooks, offline.

Each test scripts the model's replies (fakeapi on 127.0.0.1), lets Claude
Code run its real tools in a temp project, then runs the real
``turnback undo`` and asserts on the bytes on disk. The hook payloads
Claude Code sent are kept in payloads/ (``TURNBACK_RECORD_PAYLOADS=1``).
Cases turnback gets wrong today are ``xfail(strict=True)`` with what breaks.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.conftest import Result, run_cli, tree_state
from tests.realclients.conftest import RealClaude, Stream
from tests.realclients.fakeapi import ApiError, Held, Text, Tool, Tools

PAYLOADS = Path(__file__).resolve().parent / "payloads"
SKIP = "--dangerously-skip-permissions"
ASK = ("--permission-prompt-tool", "stdio")  # permission prompts come to us as can_use_tool control requests


def undo(claude: RealClaude, *args: str) -> Result:
    return run_cli(claude.home, "undo", "--yes", *args, cwd=claude.project)


def wait_until(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def record(claude: RealClaude, name: str) -> list[dict[str, Any]]:
    """The hook payloads of this run; written to payloads/NAME.json, temp paths and ids scrubbed, when asked."""
    events = claude.events()
    if os.environ.get("TURNBACK_RECORD_PAYLOADS") == "1":
        PAYLOADS.mkdir(exist_ok=True)
        (PAYLOADS / f"{name}.json").write_text(scrub(json.dumps(events, indent=2), claude, events) + "\n")
    return events


def scrub(text: str, claude: RealClaude, events: list[dict[str, Any]]) -> str:
    """*text* without what differs from run to run: temp paths, the port, session, prompt and task ids."""
    project = str(claude.project)
    text = text.replace(re.sub(r"[^A-Za-z0-9]", "-", project), "$PROJECT_KEY")  # Claude Code's folder names
    text = text.replace(project, "$PROJECT").replace(str(claude.project.parent), "$HOME")
    text = re.sub(r"/tmp/claude-\d+/", "$CLAUDE_TMP/", text)
    text = text.replace(claude.api.url.removeprefix("http://"), "127.0.0.1:$PORT")
    found: dict[str, str] = {}
    tasks = [task.get("id") for event in events for task in event.get("background_tasks") or []]
    tasks += [(event.get("tool_response") or {}).get("backgroundTaskId") for event in events]
    for label, values in (
        ("SESSION", [event.get("session_id") for event in events]),
        ("PROMPT", [event.get("prompt_id") for event in events]),
        ("TASK", tasks),
    ):
        for value in values:
            if isinstance(value, str) and value and value not in found:
                found[value] = f"${label}_{sum(v.startswith(f'${label}_') for v in found.values()) + 1}"
    for value, placeholder in found.items():
        text = text.replace(value, placeholder)
    return re.sub(r'"duration_ms": \d+', '"duration_ms": 1', text)


def of(events: list[dict[str, Any]], name: str, **fields: Any) -> list[dict[str, Any]]:
    return [
        e for e in events if e["hook_event_name"] == name and all(e.get(key) == value for key, value in fields.items())
    ]


def turn(stream: Stream, prompt: str) -> dict[str, Any]:
    stream.user(prompt)
    return stream.result()


# -- a: two turns, every kind of change, undone byte for byte -------------------------------------------


def test_two_turns_of_write_edit_and_bash_are_undone_byte_for_byte(claude: RealClaude, project: Path) -> None:
    (project / "b.txt").write_bytes(b"b1\nb2\nb3\n")
    (project / "d.txt").write_bytes(b"doomed\n")
    start = tree_state(project)
    a, b = str(project / "a.txt"), str(project / "b.txt")
    claude.api.script[:] = [
        Tools(
            (
                Tool("Write", {"file_path": a, "content": "alpha\nbeta\n"}),
                Tool("Edit", {"file_path": b, "old_string": "b2\n", "new_string": "B2\nB2b\n"}),
            )
        ),
        Tools((Tool("Bash", {"command": "printf 'c\\n' > c.txt && rm d.txt", "description": "make c, drop d"}),)),
        Text("Turn one done."),
        Tools((Tool("Edit", {"file_path": a, "old_string": "beta", "new_string": "gamma"}),)),
        Text("Turn two done."),
    ]
    stream = claude.stream(SKIP)
    assert turn(stream, "first")["subtype"] == "success"
    after_one = tree_state(project)
    assert (project / "a.txt").read_bytes() == b"alpha\nbeta\n"
    assert (project / "b.txt").read_bytes() == b"b1\nB2\nB2b\nb3\n"
    assert (project / "c.txt").read_bytes() == b"c\n" and not (project / "d.txt").exists()
    assert turn(stream, "second")["subtype"] == "success"
    assert (project / "a.txt").read_bytes() == b"alpha\ngamma\n"
    assert stream.close() == 0
    events = record(claude, "happy_path")
    assert [e["hook_event_name"] for e in events if e["hook_event_name"] in ("UserPromptSubmit", "Stop")] == [
        "UserPromptSubmit",
        "Stop",
        "UserPromptSubmit",
        "Stop",
    ]

    log = run_cli(claude.home, "log", cwd=project)
    assert log.rc == 0 and sum(" turn " in f" {line}" for line in log.lines) == 2, log

    first = undo(claude)
    assert first.rc == 0, first
    assert tree_state(project) == after_one
    second = undo(claude)
    assert second.rc == 0, second
    assert tree_state(project) == start


# -- b: the cases of issue 13 ------------------------------------------------------------------------------


def test_a_user_edit_made_while_a_permission_prompt_waits_is_not_undone(claude: RealClaude, project: Path) -> None:
    start = tree_state(project)
    claude.api.script[:] = [
        Tools((Tool("Bash", {"command": "printf 'c\\n' > c.txt", "description": "make c"}),)),
        Text("Made c."),
    ]
    stream = claude.stream(*ASK)
    stream.user("make c")
    asked = stream.can_use_tool()
    assert asked["request"]["tool_name"] == "Bash"
    assert asked["request"]["input"]["command"] == "printf 'c\\n' > c.txt", "the user is asked the model's command"
    assert of(claude.events(), "PreToolUse", tool_name="Bash"), "PreToolUse comes before the prompt"
    with open(project / "README.md", "ab") as readme:  # the user, while Claude Code waits for an answer
        readme.write(b"the user's line\n")
    users = (project / "README.md").read_bytes()
    stream.answer(asked["request_id"], {"behavior": "allow", "updatedInput": asked["request"]["input"]})
    assert stream.result()["subtype"] == "success"
    assert stream.close() == 0
    events = record(claude, "permission_prompt")
    assert [e["hook_event_name"] for e in events if "Tool" in e["hook_event_name"] or "Perm" in e["hook_event_name"]][
        :3
    ] == ["PreToolUse", "PermissionRequest", "PostToolUse"]
    assert of(events, "PostToolUse")[0]["tool_input"] == asked["request"]["input"]
    assert (project / "c.txt").read_bytes() == b"c\n"

    done = undo(claude)
    assert done.rc == 0, done
    assert (project / "README.md").read_bytes() == users, "the user's edit was taken back"
    assert not (project / "c.txt").exists()
    expected = dict(start)
    expected["README.md"] = ("file", users, start["README.md"][2])
    assert tree_state(project) == expected


def test_the_start_mark_changes_nothing_a_command_prints_returns_or_where_it_runs(
    claude: RealClaude, project: Path
) -> None:
    (project / "sub").mkdir()
    printing = "printf 'status %s\\n' \"$?\"; printf 'err\\n' >&2; pwd; exit 3"
    shell = claude.claude_tmp / "shell.txt"  # the very string Claude Code gave the shell, NUL-separated argv
    third = f"cat /proc/$$/cmdline > {shell}"
    claude.api.script[:] = [
        Tools((Tool("Bash", {"command": "cd sub", "description": "go to sub"}),)),
        Tools((Tool("Bash", {"command": printing, "description": "print, fail"}, id="toolu_printing"),)),
        Tools((Tool("Bash", {"command": third, "description": "keep argv"}),)),
        Text("Done."),
    ]
    stream = claude.stream(SKIP)
    assert turn(stream, "print")["subtype"] == "success"
    assert stream.close() == 0
    results = [
        (block["content"], block["is_error"])
        for request in claude.api.requests
        if request.main
        for block in request.body["messages"][-1]["content"]
        if isinstance(block, dict) and block.get("tool_use_id") == "toolu_printing"
    ]
    assert results[:1] == [(f"Exit code 3\nstatus 0\nerr\n{project / 'sub'}", True)]
    argv = shell.read_bytes().decode().split("\0")[:-1]
    assert argv[:2] == ["/bin/bash", "-c"] and len(argv) == 3, argv
    ours = [path.read_text().strip() for path in (project.parent / ".claude" / "session-env").glob("*/*.sh")]
    assert len(ours) == 1 and "/command-starts/" in ours[0], ours  # what turnback's SessionStart hook wrote
    assert argv[2].index(ours[0]) < argv[2].index(" && eval "), "the mark comes ahead of the command"
    if os.environ.get("TURNBACK_RECORD_PAYLOADS") == "1":  # for tests/integrations/test_claude_code.py
        template = argv[2].replace(ours[0], "$ENV_FILE_TEXT").replace(shlex.quote(third), "$COMMAND")
        template = re.sub(r"snapshot-bash-[\w-]+\.sh", "snapshot-bash-$SNAPSHOT.sh", template)
        template = re.sub(r"claude-[0-9a-f]+-cwd", "claude-$CWD-cwd", template)
        (PAYLOADS / "bash_shell.txt").write_text(scrub(template, claude, claude.events()) + "\n")


def test_a_denied_call_changes_nothing_and_a_later_user_edit_is_not_undone(claude: RealClaude, project: Path) -> None:
    release = threading.Event()
    claude.api.script[:] = [
        Tools((Tool("Bash", {"command": "printf 'c\\n' > c.txt", "description": "make c"}),)),
        Held(Text("Understood, I will not."), release),
    ]
    stream = claude.stream(*ASK)
    stream.user("make c")
    asked = stream.can_use_tool()
    stream.answer(asked["request_id"], {"behavior": "deny", "message": "no, not that"})
    assert claude.api.wait_arrived(2)  # Claude Code took the denial and asks the model again
    with open(project / "README.md", "ab") as readme:  # the user, after the denial, in the same turn
        readme.write(b"the user's line\n")
    after_user = tree_state(project)
    release.set()
    assert stream.result()["subtype"] == "success"
    assert stream.close() == 0
    events = record(claude, "denied")
    assert not (project / "c.txt").exists()
    assert of(events, "PreToolUse", tool_name="Bash") and not of(events, "PostToolUse")
    assert not of(events, "PostToolUseFailure")
    batch = of(events, "PostToolBatch")
    assert batch and "no, not that" in json.dumps(batch[0]["tool_calls"])

    undo(claude)  # nothing of the agent's to take back: either answer is fine, the bytes are what count
    assert tree_state(project) == after_user


def test_after_an_interrupt_undo_is_not_refused_and_takes_the_call_back(claude: RealClaude, project: Path) -> None:
    start = tree_state(project)
    claude.api.script[:] = [
        Tools((Tool("Bash", {"command": "printf 'c\\n' > c.txt; sleep 60", "description": "make c, then wait"}),)),
        Text("(after the interrupt)"),
    ]
    stream = claude.stream(SKIP)
    stream.user("make c and wait")
    wait_until(lambda: (project / "c.txt").exists())
    request = stream.control("interrupt")
    stream.wait_for(lambda m: m.get("type") == "control_response" and m["response"].get("request_id") == request)
    stream.result()
    time.sleep(1)  # let any hook of the interrupt finish
    events = record(claude, "interrupt")
    assert of(events, "PreToolUse", tool_name="Bash")
    assert not of(events, "PostToolUse") and not of(events, "PostToolUseFailure") and not of(events, "Stop")

    done = undo(claude)  # Claude Code is still open, waiting for the user's next prompt
    assert done.rc != 3, done
    assert done.rc == 0, done
    assert tree_state(project) == start
    stream.close()


def test_after_an_api_error_undo_is_not_refused_and_takes_the_turn_back(claude: RealClaude, project: Path) -> None:
    start = tree_state(project)
    claude.api.script[:] = [
        Tools((Tool("Write", {"file_path": str(project / "a.txt"), "content": "alpha\n"}),)),
        *[ApiError(500, "api_error", "scripted failure")] * 5,
    ]
    stream = claude.stream(SKIP)
    stream.user("write a")
    result = stream.result()
    assert result["is_error"] is True, result
    time.sleep(1)
    events = record(claude, "api_error")
    assert of(events, "StopFailure") and not of(events, "Stop")
    assert (project / "a.txt").read_bytes() == b"alpha\n"

    done = undo(claude)  # Claude Code is still open
    assert done.rc != 3, done
    assert done.rc == 0, done
    assert tree_state(project) == start
    stream.close()


def test_a_background_bash_job_that_outlives_its_turn_is_taken_back(claude: RealClaude, project: Path) -> None:
    start = tree_state(project)
    claude.api.script[:] = [
        Tools(
            (
                Tool(
                    "Bash",
                    {"command": "sleep 2; printf 'bg\\n' > c.txt", "description": "later", "run_in_background": True},
                ),
            )
        ),
        Text("Started it."),
        Text("The job is done."),  # the reply to the <task-notification> prompt Claude Code sends itself
    ]
    stream = claude.stream(SKIP)
    stream.user("start the job")
    stream.result()
    assert not (project / "c.txt").exists(), "the job outlives its turn"
    stop = of(claude.events(), "Stop")
    assert stop and stop[0]["background_tasks"], stop
    wait_until(lambda: len(of(claude.events(), "Stop")) >= 2, timeout=60)
    assert (project / "c.txt").read_bytes() == b"bg\n"
    assert stream.close() == 0
    events = record(claude, "background_job")
    notification = of(events, "UserPromptSubmit")[-1]
    assert "<task-notification>" in notification["prompt"]

    # The job wrote after its turn ended, a window the user's own edits may share: plain undo leaves it and
    # says so; --force takes it back.
    plain = undo(claude)
    assert plain.rc == 1 and "c.txt (background job" in plain.out and "--force" in plain.out, plain
    forced = undo(claude, "--force")
    assert forced.rc == 0, forced
    assert tree_state(project) == start


def test_after_a_kill_undo_is_not_refused_and_takes_the_turn_back(claude: RealClaude, project: Path) -> None:
    start = tree_state(project)
    claude.api.script[:] = [
        Tools((Tool("Bash", {"command": "printf 'c\\n' > c.txt; sleep 60", "description": "make c, then wait"}),)),
    ]
    stream = claude.stream(SKIP)
    stream.user("make c and wait")
    wait_until(lambda: (project / "c.txt").exists())
    stream.kill()  # SIGKILL: Claude Code has no chance to send a hook
    assert claude.kill_commands(), "the command outlived Claude Code"  # ended so it writes nothing later
    record(claude, "kill")

    done = undo(claude)
    assert done.rc == 0, done
    assert tree_state(project) == start


# -- c: what turnback's own tools refuse, Claude Code's are refused too --------------------------------------


def test_a_write_into_the_store_is_denied_and_the_model_is_told_why(claude: RealClaude, project: Path) -> None:
    """Even with every permission skipped: the hook's "deny" stands, the file is never written, and the
    reason reaches the model as the tool's result."""
    planted = claude.home / "planted.txt"
    claude.api.script[:] = [
        Tools((Tool("Write", {"file_path": str(planted), "content": "history, rewritten\n"}),)),
        Text("I could not write there."),
    ]
    stream = claude.stream(SKIP)
    assert turn(stream, "write into the store")["subtype"] == "success"
    assert stream.close() == 0
    events = record(claude, "store_write_denied")
    assert of(events, "PreToolUse", tool_name="Write") and not of(events, "PostToolUse", tool_name="Write")
    assert not planted.exists()
    said = json.dumps([r.body for r in claude.api.requests if r.main][-1]["messages"])
    assert "inside turnback's store, which the agent's tools never touch" in said, said
    (only,) = run_cli(claude.home, "log", "--json", cwd=project).json()["turns"]
    assert only["calls"] == []


# -- d: a store that lost its database --------------------------------------------------------------------


def test_a_store_whose_database_was_deleted_is_not_replaced_and_claude_code_goes_on(
    claude: RealClaude, project: Path
) -> None:
    """The database deleted between two turns (the hook relay still holding it open): the next turn's hooks
    record nothing and make no new, empty store in its place, Claude Code's turn and its write go on, and the
    command line says what is gone."""
    a = str(project / "a.txt")
    claude.api.script[:] = [
        Tools((Tool("Write", {"file_path": a, "content": "one\n"}),)),
        Text("Turn one done."),
        Tools((Tool("Write", {"file_path": a, "content": "two\n"}),)),
        Text("Turn two done."),
    ]
    stream = claude.stream(SKIP)
    assert turn(stream, "first")["subtype"] == "success"
    for suffix in ("", "-wal", "-shm"):
        (claude.home / f"turnback.db{suffix}").unlink(missing_ok=True)
    assert turn(stream, "second")["subtype"] == "success"
    assert stream.close() == 0
    assert (project / "a.txt").read_bytes() == b"two\n"
    assert not any(claude.home.glob("turnback.db*"))
    log = run_cli(claude.home, "log", cwd=project)
    assert (log.rc, log.out) == (1, ""), log
    assert log.err.startswith(f"turnback: the database of the store at {claude.home} is gone ("), log
    assert not any(claude.home.glob("turnback.db*"))


def test_turnback_mcp_under_claude_code_refuses_a_write_once_its_database_is_deleted_and_the_model_is_told(
    claude: RealClaude, project: Path
) -> None:
    """The real Claude Code as the MCP client of ``turnback mcp``: the server keeps its store open across the
    calls; with the database deleted between two turns, the next ``write_file`` is refused with what is gone
    (the model reads it), the file keeps its bytes, and nothing is recorded into the deleted file. Once the
    store's folder is moved away, as the refusal advises, the next write goes through again."""
    servers = {
        "mcpServers": {
            "turnback": {"command": sys.executable, "args": ["-m", "turnback", "mcp", "--root", str(project)]}
        }
    }
    write = "mcp__turnback__write_file"
    claude.api.script[:] = [
        Tools((Tool(write, {"path": "m.txt", "content": "one\n"}),)),
        Text("Turn one done."),
        Tools((Tool(write, {"path": "m.txt", "content": "two\n"}),)),
        Text("Turn two refused."),
        Tools((Tool(write, {"path": "m.txt", "content": "three\n"}),)),
        Text("Turn three done."),
    ]
    stream = claude.stream(SKIP, "--strict-mcp-config", "--mcp-config", json.dumps(servers))
    assert turn(stream, "first")["subtype"] == "success"
    assert (project / "m.txt").read_bytes() == b"one\n"
    for suffix in ("", "-wal", "-shm"):
        (claude.home / f"turnback.db{suffix}").unlink(missing_ok=True)
    assert turn(stream, "second")["subtype"] == "success"
    assert (project / "m.txt").read_bytes() == b"one\n"
    told = json.dumps([r.body for r in claude.api.requests if r.main][-1]["messages"])
    assert f"the database of the store at {claude.home} is gone" in told, told
    claude.home.rename(claude.home.with_name("old-store"))
    assert turn(stream, "third")["subtype"] == "success"
    assert stream.close() == 0
    assert (project / "m.txt").read_bytes() == b"three\n"
    log = run_cli(claude.home, "log", "--json", cwd=project)
    assert log.rc == 0, log
    written = [call["tool"] for turn in log.json()["turns"] for call in turn["calls"]]  # type: ignore[attr-defined]
    assert "write_file" in written, log.out

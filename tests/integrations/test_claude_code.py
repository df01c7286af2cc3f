"""Claude Code's hooks end to end: each event is one ``turnback hook claude-code`` process, as Claude Code runs it.

The tests play Claude Code's part exactly: PreToolUse, then the tool's own
effect (the file written, the command run) done by the test itself, then
PostToolUse. Everything the user does afterwards goes through the real CLI.
"""

from __future__ import annotations

import itertools
import json
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import Result, cli_env, run_cli, tree_state
from turnback.hooks.install import hook_command

SESSION_ID = "6f1c2a52-8a0b-4c4e-9a52-claude-session"


class Claude:
    """Claude Code's side of the hook protocol: one hook process per event, exit code always 0."""

    _ids = itertools.count(1)

    def __init__(
        self,
        home: Path,
        project: Path,
        session_id: str = SESSION_ID,
        env: dict[str, str] | None = None,
        command: str | None = None,
    ):
        self.home = home
        self.project = project
        self.session_id = session_id
        self.env = env
        self.command = command  # a hook command as settings.json holds it, run through sh; else python -m turnback

    def payload(self, event: str, **fields: Any) -> bytes:
        data = {
            "session_id": self.session_id,
            "transcript_path": str(self.project.parent / "transcript.jsonl"),
            "cwd": str(self.project),
            "permission_mode": "default",
            "hook_event_name": event,
            **fields,
        }
        return json.dumps(data).encode()

    def raw(self, stdin: bytes, env: dict[str, str] | None = None) -> Result:
        extra = {**(self.env or {}), **(env or {})}
        if self.command is None:
            result = run_cli(self.home, "hook", "claude-code", stdin=stdin, cwd=self.project, env=extra)
        else:
            ran = subprocess.run(
                ["sh", "-c", self.command],
                input=stdin,
                capture_output=True,
                cwd=self.project,
                env=cli_env(self.home, extra),
                timeout=120,
            )
            out, err = (stream.decode("utf-8", "replace") for stream in (ran.stdout, ran.stderr))
            result = Result(ran.returncode, out, err)
        assert result.rc == 0, result
        return result

    def send(self, event: str, **fields: Any) -> Result:
        return self.raw(self.payload(event, **fields))

    def quiet(self, event: str, **fields: Any) -> None:
        """An event that must print nothing at all."""
        result = self.send(event, **fields)
        assert (result.out, result.err) == ("", ""), (event, result)

    def prompt(self, text: str) -> Result:
        result = self.send("UserPromptSubmit", prompt=text, prompt_id=f"prompt-{next(self._ids)}")
        assert result.err == "", result
        return result

    def stop(self) -> Result:
        result = self.send("Stop", stop_hook_active=False)
        assert result.err == "", result
        return result

    def pre(self, tool: str, tool_input: dict[str, Any]) -> str:
        use_id = f"toolu_{next(self._ids):04d}"
        self.quiet("PreToolUse", tool_name=tool, tool_input=tool_input, tool_use_id=use_id)
        return use_id

    def post(self, tool: str, tool_input: dict[str, Any], use_id: str, response: dict[str, Any]) -> None:
        self.quiet("PostToolUse", tool_name=tool, tool_input=tool_input, tool_use_id=use_id, tool_response=response)

    def tool(
        self, tool: str, tool_input: dict[str, Any], effect: Callable[[], object], response: dict[str, Any]
    ) -> str:
        """PreToolUse, the tool's effect (done here, as Claude Code does it), PostToolUse."""
        use_id = self.pre(tool, tool_input)
        effect()
        self.post(tool, tool_input, use_id, response)
        return use_id

    # -- Claude Code's tools, effect included -------------------------------------------

    def write(self, rel: str, content: str) -> str:
        path = self.project / rel

        def effect() -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content.encode())

        tool_input = {"file_path": str(path), "content": content}
        return self.tool("Write", tool_input, effect, {"type": "create", "filePath": str(path), "content": content})

    def edit(self, rel: str, old: str, new: str) -> str:
        path = self.project / rel
        original = path.read_bytes().decode()
        assert original.count(old) == 1

        def effect() -> None:
            path.write_bytes(original.replace(old, new).encode())

        tool_input = {"file_path": str(path), "old_string": old, "new_string": new, "replace_all": False}
        response = {"filePath": str(path), "oldString": old, "newString": new, "originalFile": original}
        return self.tool("Edit", tool_input, effect, response)

    def bash(self, command: str, *, background: bool = False) -> str:
        tool_input: dict[str, Any] = {"command": command, "description": "run it", "timeout": 120000}
        if background:
            tool_input["run_in_background"] = True
        outcome: dict[str, Any] = {}

        def effect() -> None:
            if background:  # Claude Code starts the job and goes on; here we wait for it to finish
                job = subprocess.Popen(["sh", "-c", command], cwd=self.project)
                outcome["rc"] = job.wait(timeout=30)
            else:
                done = subprocess.run(["bash", "-c", command], cwd=self.project, capture_output=True, timeout=30)
                outcome["rc"] = done.returncode
                outcome["stdout"] = done.stdout.decode()

        use_id = self.pre("Bash", tool_input)
        effect()
        assert outcome["rc"] == 0, outcome
        response = {"stdout": outcome.get("stdout", ""), "stderr": "", "interrupted": False, "isImage": False}
        if background:
            response = {"backgroundTaskId": "bash_1", **response}
        self.post("Bash", tool_input, use_id, response)
        return use_id


def cli(home: Path, project: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return run_cli(home, *args, cwd=project, env=env)


def log_json(home: Path, project: Path) -> dict[str, Any]:
    result = cli(home, project, "log", "--json")
    assert result.rc == 0, result
    return result.json()


def log_body(log: Result) -> list[str]:
    """``turnback log``'s lines without the graph's lanes and indentation."""
    return [line.lstrip("|* ") for line in log.lines]


def stop_message(result: Result) -> str:
    """The Stop hook's output: exactly one JSON object ``{"systemMessage": ...}`` on one line."""
    assert len(result.lines) == 1, result.out
    data = json.loads(result.out)
    assert isinstance(data, dict) and set(data) == {"systemMessage"}, data
    message = data["systemMessage"]
    assert isinstance(message, str)
    return message


def add_files(project: Path) -> None:
    (project / "a.txt").write_bytes(b"x1\nx2\nkeep\n")
    (project / "b.txt").write_bytes(b"b1\nb2\nb3\n")


# -- a whole session ----------------------------------------------------------------------


def test_a_session_of_two_prompts_is_recorded_and_undone_byte_for_byte(home: Path, project: Path) -> None:
    add_files(project)
    start = tree_state(project)
    claude = Claude(home, project)

    claude.quiet("SessionStart", source="startup", model="claude-sonnet")
    assert claude.prompt("first").out == ""
    claude.write("src/gen/new_mod.py", "a = 1\nb = 2\n")
    claude.edit("src/main.py", "print('hi')\n", "print('hello')\nprint('bye')\n")
    claude.bash("sed -i 's/x/y/' a.txt && rm b.txt")
    assert (project / "a.txt").read_bytes() == b"y1\ny2\nkeep\n" and not (project / "b.txt").exists()
    # new_mod.py +2, main.py +2 -1, a.txt +2 -2, b.txt -3
    assert stop_message(claude.stop()) == "4 files changed, +6 -6"

    assert claude.prompt("second").out == ""
    claude.write("c.txt", "c\n")
    assert stop_message(claude.stop()) == "1 file changed, +1 -0"

    log = cli(home, project, "log")
    assert log.rc == 0, log
    heads = [line for line in log.lines if " turn " in f" {line}"]
    assert len(heads) == 2, log.out
    assert heads[0].startswith("* turn 2 ") and heads[0].split()[4:] == ["second", "[head]"], heads
    assert heads[1].startswith("* turn 1 ") and heads[1].split()[4:] == ["first"], heads
    shown = log_body(log)
    for line in (
        "new c.txt +1 -0",
        "new src/gen/new_mod.py +2 -0",
        "modified src/main.py +2 -1",
        "modified a.txt +2 -2",
        "deleted b.txt +0 -3",
    ):
        assert line in shown, log.out
    turns = sorted(log_json(home, project)["turns"], key=lambda t: t["number"])
    assert [(t["number"], t["message"], t["status"]) for t in turns] == [(1, "first", "ended"), (2, "second", "ended")]
    assert [c["tool"] for c in turns[0]["calls"]][:2] == ["Write", "Edit"]
    assert all(not c["cut_short"] for t in turns for c in t["calls"])

    first = cli(home, project, "undo", "--yes")
    assert first.rc == 0, first
    assert not (project / "c.txt").exists()
    second = cli(home, project, "undo", "--yes")
    assert second.rc == 0, second
    assert tree_state(project) == start


def test_a_write_whose_post_never_came_is_cut_short_and_still_undone(home: Path, project: Path) -> None:
    add_files(project)
    start = tree_state(project)
    claude = Claude(home, project)
    claude.prompt("overwrite a.txt and add fresh.txt")
    a_input = {"file_path": str(project / "a.txt"), "content": "overwritten\n"}
    claude.pre("Write", a_input)
    (project / "a.txt").write_bytes(b"overwritten\n")  # the write happened; the PostToolUse never came
    fresh_input = {"file_path": str(project / "fresh.txt"), "content": "fresh\n"}
    claude.pre("Write", fresh_input)
    (project / "fresh.txt").write_bytes(b"fresh\n")
    claude.stop()

    log = cli(home, project, "log")
    calls = [line for line in log.lines if "Write " in line]
    assert len(calls) == 2 and all(line.endswith("(may be cut short)") for line in calls), log.out
    assert all(c["cut_short"] for c in log_json(home, project)["turns"][0]["calls"])

    preview = cli(home, project, "undo", "--dry-run")
    assert preview.rc == 0, preview
    reason = "the call may be cut short, so what it wrote is unknown; --force overwrites it"
    assert f"skip        a.txt ({reason})" in preview.lines, preview.out
    refused = cli(home, project, "undo", "--yes")
    assert refused.rc == 1, refused
    assert "turnback undo --force" in refused.out
    assert (project / "a.txt").read_bytes() == b"overwritten\n"

    forced = cli(home, project, "undo", "--yes", "--force")
    assert forced.rc == 0, forced
    assert tree_state(project) == start


def test_a_revert_is_told_to_the_model_once_on_the_next_prompt(home: Path, project: Path) -> None:
    claude = Claude(home, project)
    claude.prompt("say hello")
    claude.edit("src/main.py", "'hi'", "'hello'")
    claude.stop()
    call = log_json(home, project)["turns"][0]["calls"][0]
    assert call["tool"] == "Edit"

    reverted = cli(home, project, "revert", call["id"], "--yes")
    assert reverted.rc == 0, reverted
    assert (project / "src/main.py").read_bytes() == b"import pkg\n\nprint('hi')\n"

    told = claude.prompt("go on")
    assert len(told.lines) == 1, told.out
    data = json.loads(told.out)
    assert data["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    context = data["hookSpecificOutput"]["additionalContext"]
    assert context.count("Reverted the change to src/main.py") == 1, context
    claude.stop()
    assert claude.prompt("and then").out == ""
    claude.stop()


# -- input turnback ignores, and its own trouble ------------------------------------------


def test_malformed_and_unknown_events_do_nothing(home: Path, project: Path) -> None:
    claude = Claude(home, project)
    claude.prompt("look around")
    before = (cli(home, project, "sessions", "--json").out, log_json(home, project))
    stranger = Claude(home, project, session_id="another-session")

    for stdin in (b"{not json", b"\xff\xfe garbage", b'[{"hook_event_name": "Stop"}]', b'"Stop"'):
        result = claude.raw(stdin)
        assert result.out == "", result
        assert len(result.err.splitlines()) == 1 and result.err.startswith("turnback: "), result
    for who in (claude, stranger):
        who.quiet("Notification", message="Claude needs your permission")
        who.quiet("SubagentStop", agent_id="agent-1", stop_hook_active=False)
        who.quiet("NoSuchEvent")
        for tool, tool_input in (
            ("Read", {"file_path": str(project / "README.md")}),
            ("WebFetch", {"url": "https://example.com", "prompt": "read it"}),
            ("Glob", {"pattern": "**/*.py"}),
        ):
            who.quiet("PreToolUse", tool_name=tool, tool_input=tool_input, tool_use_id=f"toolu_{tool}")
            who.quiet(
                "PostToolUse", tool_name=tool, tool_input=tool_input, tool_use_id=f"toolu_{tool}", tool_response={}
            )
    claude.quiet(
        "PreToolUse", tool_name="Write", tool_input="not an object", tool_use_id="toolu_odd"
    )  # a shape turnback does not know

    after = (cli(home, project, "sessions", "--json").out, log_json(home, project))
    assert after == before


def test_a_store_turnback_cannot_use_warns_once_and_lets_the_agent_go_on(home: Path, project: Path) -> None:
    claude = Claude(home, project)
    claude.prompt("make the store")
    claude.stop()
    before = log_json(home, project)

    not_a_folder = project.parent / "store-file"
    not_a_folder.write_bytes(b"a file, not a store\n")
    wrong_key = {"TURNBACK_KEY": "another-key-0123456789-zz"}
    for env in ({"TURNBACK_HOME": str(not_a_folder)}, wrong_key):
        for event in (
            claude.payload("UserPromptSubmit", prompt="next"),
            claude.payload("PreToolUse", tool_name="Write", tool_input={"file_path": str(project / "w.txt")}),
        ):
            result = claude.raw(event, env=env)
            assert result.out == "", result
            assert len(result.err.splitlines()) == 1, result
            assert result.err.startswith("turnback: "), result
    assert not_a_folder.read_bytes() == b"a file, not a store\n"
    assert log_json(home, project) == before
    assert "KeyUnavailableError" in (home / "turnback.log").read_text()


def test_a_write_into_the_store_or_a_git_folder_is_denied_saying_why_and_leaves_no_call(
    home: Path, project: Path
) -> None:
    """What turnback's own file tools refuse, an agent's file tool is refused too: a write there could not be
    recorded, and one in the store would let the agent change the history it is undone by."""
    (project / ".git").mkdir()
    claude = Claude(home, project)
    claude.prompt("write where you should not")
    store_file = home / "turnback.db"
    reasons = {
        str(store_file): f"{store_file} is inside turnback's store, which the agent's tools never touch",
        str(project / ".git" / "config"): ".git/config is inside a .git folder, which turnback never writes",
    }
    for path, why in reasons.items():
        for tool, tool_input in (
            ("Write", {"file_path": path, "content": "x\n"}),
            ("Edit", {"file_path": path, "old_string": "a", "new_string": "b", "replace_all": False}),
        ):
            result = claude.send("PreToolUse", tool_name=tool, tool_input=tool_input, tool_use_id="toolu_bad")
            assert result.err == "", result
            assert json.loads(result.out) == {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": (
                        f"turnback refused this call: {why}. Nothing was changed. "
                        "turnback could not record this write or take it back."
                    ),
                }
            }, result.out
    claude.stop()
    assert not (project / ".git" / "config").exists()
    (turn,) = log_json(home, project)["turns"]
    assert turn["calls"] == []


# -- background jobs and compaction ----------------------------------------------------------


def test_a_background_bash_job_joins_the_turn_and_is_undone(home: Path, project: Path) -> None:
    start = tree_state(project)
    claude = Claude(home, project)
    claude.prompt("build in the background")
    claude.bash("sleep 0.2; echo bg > bg.txt", background=True)
    assert (project / "bg.txt").read_bytes() == b"bg\n"
    assert stop_message(claude.stop()) == "1 file changed, +1 -0"

    log = cli(home, project, "log")
    assert "new bg.txt +1 -0" in log_body(log), log.out
    assert "may be cut short" not in log.out
    undone = cli(home, project, "undo", "--yes")
    assert undone.rc == 0, undone
    assert tree_state(project) == start


def test_compaction_makes_the_session_busy_until_the_next_prompt(home: Path, project: Path) -> None:
    start = tree_state(project)
    claude = Claude(home, project)
    claude.prompt("write one file")
    claude.write("one.txt", "one\n")
    claude.stop()

    claude.quiet("PreCompact", trigger="auto", custom_instructions="")
    busy = cli(home, project, "undo", "--yes")
    assert busy.rc == 3, busy
    assert "compaction" in busy.err, busy
    assert (project / "one.txt").exists()
    assert any(line.startswith("busy: compaction") for line in cli(home, project, "status").lines)

    claude.prompt("after compaction")
    status = cli(home, project, "status")
    assert not any(line.startswith("busy:") for line in status.lines), status.out
    claude.stop()
    undone = cli(home, project, "undo", "--yes", "--from", "1")
    assert undone.rc == 0, undone
    assert tree_state(project) == start


# -- install and uninstall ---------------------------------------------------------------------


USER_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)"], "deny": ["Read(./.env)"]},
    "env": {"FOO": "bar"},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/usr/local/bin/check-bash"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send claude"}]}],
    },
}


def ours(settings: dict[str, Any]) -> dict[str, list[str]]:
    """turnback's hook commands in *settings*, by event."""
    found: dict[str, list[str]] = {}
    for event, groups in settings.get("hooks", {}).items():
        for group in groups:
            for hook in group["hooks"]:
                if "turnback" in hook["command"]:
                    found.setdefault(event, []).append(hook["command"])
    return found


def test_install_merges_and_uninstall_takes_exactly_its_entries_away(home: Path, project: Path) -> None:
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(USER_SETTINGS, indent=4) + "\n")

    installed = cli(home, project.parent, "install", "claude-code", "--project", str(project))
    assert installed.rc == 0, installed
    merged = json.loads(settings.read_text())
    assert {k: v for k, v in merged.items() if k != "hooks"} == {k: v for k, v in USER_SETTINGS.items() if k != "hooks"}
    assert merged["hooks"]["PreToolUse"][0] == USER_SETTINGS["hooks"]["PreToolUse"][0]
    assert merged["hooks"]["Notification"] == USER_SETTINGS["hooks"]["Notification"]
    commands = ours(merged)
    entries = [hook for groups in merged["hooks"].values() for group in groups for hook in group["hooks"]]
    timeouts = [hook.get("timeout") for hook in entries if "turnback" in hook["command"]]
    assert timeouts == [60] * 10, timeouts  # seconds, on each of its 10 events: the relay's answer comes in 55 s
    for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PreCompact", "Stop", "SessionEnd"):
        assert len(commands.get(event, [])) == 1, (event, commands)
    assert all(command.endswith("hook claude-code") for found in commands.values() for command in found)
    tool_groups = [g for g in merged["hooks"]["PreToolUse"] if ours({"hooks": {"x": [g]}})]
    assert set(tool_groups[0]["matcher"].split("|")) >= {"Write", "Edit", "MultiEdit", "NotebookEdit", "Bash"}

    # the command as written runs the hook (Claude Code runs it through a shell)
    command = commands["Stop"][0]
    ran = subprocess.run(
        ["sh", "-c", command],
        input=Claude(home, project).payload("Notification", message="x"),
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "TURNBACK_HOME": str(home), "TURNBACK_NO_KEYRING": "1"},
        timeout=60,
    )
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, b"", b""), ran
    assert shlex.split(command)[-2:] == ["hook", "claude-code"]

    again = cli(home, project, "install", "claude-code", "--project", str(project))
    assert again.rc == 0, again
    assert json.loads(settings.read_text()) == merged

    removed = cli(home, project, "uninstall", "claude-code", "--project", str(project))
    assert removed.rc == 0, removed
    assert json.loads(settings.read_text()) == USER_SETTINGS
    nothing = cli(home, project, "uninstall", "claude-code", "--project", str(project))
    assert nothing.rc == 1, nothing
    assert json.loads(settings.read_text()) == USER_SETTINGS


def test_install_over_an_older_install_replaces_its_hook_command(home: Path, project: Path) -> None:
    # Older versions wrote the console script (`.../bin/turnback hook claude-code`); that command still runs the
    # hook, and `turnback install` replaces it by today's (which starts without site) rather than adding one.
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    old = {"type": "command", "command": "/opt/old-venv/bin/turnback hook claude-code", "timeout": 60}
    older = json.loads(json.dumps(USER_SETTINGS))
    older["hooks"]["PreToolUse"].append({"matcher": "Write|Edit|MultiEdit|NotebookEdit|Bash", "hooks": [old]})
    older["hooks"]["Stop"] = [{"hooks": [old]}]
    settings.write_text(json.dumps(older, indent=2) + "\n")

    installed = cli(home, project, "install", "claude-code", "--project", str(project))
    assert installed.rc == 0, installed
    commands = ours(json.loads(settings.read_text()))
    assert all(len(found) == 1 for found in commands.values()), commands
    assert {command for found in commands.values() for command in found} == {hook_command()}
    assert shlex.split(hook_command())[1:3] == ["-S", "-I"]
    assert json.loads(settings.read_text())["hooks"]["PreToolUse"][0] == USER_SETTINGS["hooks"]["PreToolUse"][0]


def test_install_refuses_settings_that_are_not_json(home: Path, project: Path) -> None:
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    broken = b'{"model": "opus",,\n'
    settings.write_bytes(broken)
    for verb in ("install", "uninstall"):
        result = cli(home, project, verb, "claude-code", "--project", str(project))
        assert result.rc == 2, result
        assert "not valid JSON" in result.err, result
        assert settings.read_bytes() == broken
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]


def test_install_user_writes_the_home_settings(home: Path, project: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "user-home"
    user_home.mkdir()
    env = {"HOME": str(user_home)}
    result = cli(home, project, "install", "claude-code", "--user", env=env)
    assert result.rc == 0, result
    settings = user_home / ".claude" / "settings.json"
    commands = ours(json.loads(settings.read_text()))
    assert "PreToolUse" in commands and "Stop" in commands
    assert not (project / ".claude").exists()
    removed = cli(home, project, "uninstall", "claude-code", "--user", env=env)
    assert removed.rc == 0, removed
    assert json.loads(settings.read_text()) == {}


# -- the other file tools, symlinks, and events that arrive together -------------------------------


def test_multiedit_notebookedit_and_replace_all_are_recorded_and_undone(home: Path, project: Path) -> None:
    notebook = project / "nb.ipynb"
    notebook.write_bytes(b'{"cells": [{"cell_type": "code", "source": ["x = 1"]}], "nbformat": 4}\n')
    (project / "many.txt").write_bytes(b"a\na\nb\n")
    start = tree_state(project)
    claude = Claude(home, project)
    claude.prompt("use every file tool")

    readme = project / "README.md"
    multi = {"file_path": str(readme), "edits": [{"old_string": "# project", "new_string": "# Project"}]}
    claude.tool("MultiEdit", multi, lambda: readme.write_bytes(b"# Project\n\nline two\n"), {"filePath": str(readme)})
    nb_input = {"notebook_path": str(notebook), "cell_id": "0", "new_source": "x = 2", "edit_mode": "replace"}
    new_nb = b'{"cells": [{"cell_type": "code", "source": ["x = 2"]}], "nbformat": 4}\n'
    claude.tool("NotebookEdit", nb_input, lambda: notebook.write_bytes(new_nb), {"new_source": "x = 2"})
    many = project / "many.txt"
    every = {"file_path": str(many), "old_string": "a", "new_string": "c", "replace_all": True}
    claude.tool("Edit", every, lambda: many.write_bytes(b"c\nc\nb\n"), {"filePath": str(many)})
    assert stop_message(claude.stop()) == "3 files changed, +4 -4 (docs +1 -1)"

    titles = [c["tool"] for c in log_json(home, project)["turns"][0]["calls"]]
    assert titles == ["MultiEdit", "NotebookEdit", "Edit"]
    undone = cli(home, project, "undo", "--yes")
    assert undone.rc == 0, undone
    assert tree_state(project) == start


def test_a_write_that_replaces_a_symlink_with_a_file_is_undone(home: Path, project: Path) -> None:
    """Claude Code versions that write by temp file and rename turn a link into a regular file."""
    start = tree_state(project)
    claude = Claude(home, project)
    claude.prompt("write the link")
    link = project / "link-to-readme"

    def replace() -> None:
        temp = project / ".link-to-readme.tmp"
        temp.write_bytes(b"replaced\n")
        temp.replace(link)

    claude.tool("Write", {"file_path": str(link), "content": "replaced\n"}, replace, {"filePath": str(link)})
    claude.stop()
    assert not link.is_symlink()
    undone = cli(home, project, "undo", "--yes")
    assert undone.rc == 0, undone
    assert tree_state(project) == start


def test_an_edit_written_through_a_symlink_is_undone(home: Path, project: Path) -> None:
    start = tree_state(project)
    claude = Claude(home, project)
    claude.prompt("edit the readme by its link")
    claude.edit("link-to-readme", "line two", "line 2")  # read and written through the link, as fs.writeFile does
    assert (project / "README.md").read_bytes() == b"# project\n\nline 2\n"
    assert (project / "link-to-readme").is_symlink()
    claude.stop()
    undone = cli(home, project, "undo", "--yes")
    assert undone.rc == 0, undone
    assert tree_state(project) == start


def test_tool_events_arriving_together_without_a_running_turn_are_all_recorded(home: Path, project: Path) -> None:
    # a git repository, as most projects are: a turn reads its refs between the check and the create
    subprocess.run(["git", "init", "-q"], cwd=project, check=True, capture_output=True)
    problems: list[str] = []
    for round_ in range(6):  # a race: nearly every round shows it; stop at the first sign
        claude = Claude(home, project, session_id=f"parallel-{round_}")
        claude.quiet("SessionStart", source="resume")  # e.g. hooks installed mid-session: no prompt event yet
        paths = [project / f"p{round_}-{i}.txt" for i in range(6)]
        hooks = [
            subprocess.Popen(
                [sys.executable, "-m", "turnback", "hook", "claude-code"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=project,
                env=cli_env(home),
            )
            for _ in paths
        ]
        for i, (hook, path) in enumerate(zip(hooks, paths, strict=True)):
            event = claude.payload(
                "PreToolUse", tool_name="Write", tool_input={"file_path": str(path)}, tool_use_id=f"p{round_}-{i}"
            )
            assert hook.stdin is not None
            hook.stdin.write(event)
            hook.stdin.close()
        for hook in hooks:
            assert hook.stdout is not None and hook.stderr is not None
            out, err = hook.stdout.read(), hook.stderr.read()
            assert (hook.wait(timeout=60), out) == (0, b"")
            if err:
                problems.append(f"round {round_}: {err.decode().strip()}")
        for i, path in enumerate(paths):
            path.write_bytes(b"parallel\n")
            claude.post("Write", {"file_path": str(path)}, f"p{round_}-{i}", {"filePath": str(path)})
        message = stop_message(claude.stop())
        if message != "6 files changed, +6 -0":
            problems.append(f"round {round_}: Stop said {message!r}")
        status = cli(home, project, "status")  # this session: the project's most recently active
        problems += [f"round {round_}: after Stop, {line}" for line in status.lines if line.startswith("running:")]
        if problems:
            break
    assert problems == []


def test_an_ignored_event_does_not_import_the_engine(home: Path, project: Path) -> None:
    probe = (
        "import sys\n"
        "sys.argv = ['turnback', 'hook', 'claude-code']\n"
        "from turnback.cli import entry\n"  # what the console script and python -m turnback do
        "rc = entry()\n"
        "heavy = ('turnback.engine', 'turnback.store', 'sqlite3', 'cryptography')\n"
        "print(rc, *[name for name in heavy if name in sys.modules])\n"
    )
    event = Claude(home, project).payload("PreToolUse", tool_name="Read", tool_input={"file_path": "x"})
    ran = subprocess.run(
        [sys.executable, "-c", probe], input=event, capture_output=True, cwd=project, env=cli_env(home), timeout=60
    )
    assert ran.stderr == b"", ran.stderr
    assert ran.stdout.decode().split() == ["0"]


# -- what the real Claude Code 2.1.332 sent (tests/realclients/payloads), replayed ------------------------

PAYLOADS = Path(__file__).resolve().parents[1] / "realclients" / "payloads"


def replay(claude: Claude, case: str, effects: dict[int, Callable[[], object]] | None = None) -> list[str]:
    """Send each recorded event of *case* as Claude Code did, its placeholders made this test's; *effects*
    runs before the event of that index (the tool's own work, the user's edit). The events' names."""
    text = (PAYLOADS / f"{case}.json").read_text()
    text = text.replace("$PROJECT_KEY", "project-key").replace("$PROJECT", str(claude.project))
    text = text.replace("$HOME", str(claude.project.parent)).replace("$SESSION_1", claude.session_id)
    names = []
    for index, event in enumerate(json.loads(text)):
        if effects and index in effects:
            effects[index]()
        claude.raw(json.dumps(event).encode())
        names.append(str(event["hook_event_name"]))
    return names


def test_replayed_denied_bash_changes_nothing_and_a_later_user_edit_is_not_undone(home: Path, project: Path) -> None:
    claude = Claude(home, project, session_id="replay-denied")

    def users_edit() -> None:
        with open(project / "README.md", "ab") as readme:
            readme.write(b"the user's line\n")

    names = replay(claude, "denied", {3: users_edit})  # after PreToolUse: the user, once the call was denied
    assert names[2:4] == ["PreToolUse", "PostToolBatch"]
    after_user = tree_state(project)
    log = cli(home, project, "log")
    assert "README.md" not in log.out, log
    cli(home, project, "undo", "--yes")
    assert tree_state(project) == after_user


def test_replayed_stop_failure_ends_the_turn_so_undo_is_not_refused(home: Path, project: Path) -> None:
    claude = Claude(home, project, session_id="replay-api-error")
    start = tree_state(project)
    names = replay(claude, "api_error", {3: lambda: (project / "a.txt").write_bytes(b"alpha\n")})
    assert names[-1] == "StopFailure"
    done = cli(home, project, "undo", "--yes")
    assert done.rc == 0, done
    assert tree_state(project) == start


def test_replayed_background_job_stays_open_past_stop_until_its_notification(home: Path, project: Path) -> None:
    claude = Claude(home, project, session_id="replay-background")
    start = tree_state(project)
    replay(claude, "background_job", {6: lambda: (project / "c.txt").write_bytes(b"bg\n")})  # before the notice
    log = cli(home, project, "log")
    assert "new c.txt" in log.out and sum(" turn " in f" {line}" for line in log.lines) == 1, log
    plain = cli(home, project, "undo", "--yes")
    assert plain.rc == 1 and "c.txt (background job" in plain.out, plain
    forced = cli(home, project, "undo", "--yes", "--force")
    assert forced.rc == 0, forced
    assert tree_state(project) == start


def test_replayed_interrupt_ends_the_turn_at_undo_and_takes_the_cut_short_call_back(home: Path, project: Path) -> None:
    claude = Claude(home, project, session_id="replay-interrupt")
    start = tree_state(project)
    # PreToolUse and nothing after it; Claude Code (here: this test process) lives on, the command is gone.
    names = replay(claude, "interrupt")
    assert names[-1] == "PreToolUse"
    (project / "c.txt").write_bytes(b"c\n")  # what the command wrote before the interrupt ended it
    done = cli(home, project, "undo", "--yes")
    assert done.rc == 0, done
    assert tree_state(project) == start


# Claude Code is a process that ends after each event, as if killed: its turn's holder is gone.
SHORT_LIVED = [sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"]


def test_replayed_kill_records_what_the_command_wrote_and_undoes_it(home: Path, project: Path) -> None:
    claude = Claude(home, project, session_id="replay-kill")
    start = tree_state(project)
    text = (PAYLOADS / "kill.json").read_text().replace("$PROJECT_KEY", "key").replace("$PROJECT", str(project))
    text = text.replace("$HOME", str(project.parent)).replace("$SESSION_1", claude.session_id)
    for event in json.loads(text):
        sent = run_cli(home, "hook", "claude-code", stdin=json.dumps(event).encode(), cwd=project, prefix=SHORT_LIVED)
        assert sent.rc == 0 and sent.err == "", sent
    (project / "c.txt").write_bytes(b"c\n")  # what the command wrote before Claude Code was killed
    done = cli(home, project, "undo", "--yes")
    assert done.rc == 0, done
    assert tree_state(project) == start


def test_a_user_edit_made_while_a_permission_prompt_waits_is_left_out_of_the_bash_call(
    home: Path, project: Path
) -> None:
    claude = Claude(home, project, session_id="permission-prompt")
    claude.prompt("make c")
    tool_input = {"command": "printf 'c\\n' > c.txt", "description": "make c"}
    use_id = claude.pre("Bash", tool_input)  # before Claude Code asks the user
    claude.send("PermissionRequest", tool_name="Bash", tool_input=tool_input)
    with open(project / "README.md", "ab") as readme:  # the user, while the prompt is shown
        readme.write(b"the user's line\n")
    users = (project / "README.md").read_bytes()
    time.sleep(2.2)  # the user answers; the command runs for 10 ms
    subprocess.run(["sh", "-c", tool_input["command"]], cwd=project, check=True)
    claude.quiet(
        "PostToolUse",
        tool_name="Bash",
        tool_input=tool_input,
        tool_use_id=use_id,
        tool_response={"stdout": "", "stderr": "", "interrupted": False},
        duration_ms=10,
    )
    claude.stop()
    done = cli(home, project, "undo", "--yes")
    assert done.rc == 0, done
    assert (project / "README.md").read_bytes() == users, done
    assert not (project / "c.txt").exists()


def claude_code_shell(shell: str, env_file: Path, command: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """Run *command* as Claude Code 2.1.332 runs a Bash command: the ``bash -c`` string it gave the shell
    (recorded, payloads/bash_shell.txt), with what SessionStart hooks wrote to ``$CLAUDE_ENV_FILE`` in it."""
    home = env_file.parent
    (home / "claude-tmp").mkdir(exist_ok=True)  # where Claude Code keeps the command's last folder
    script = (PAYLOADS / "bash_shell.txt").read_text().strip().replace("$HOME", str(home))
    script = script.replace("$ENV_FILE_TEXT", env_file.read_text().strip()).replace("$COMMAND", shlex.quote(command))
    return subprocess.run([shell, "-c", script], cwd=cwd, capture_output=True, timeout=30)


def test_a_user_edit_just_before_the_command_starts_is_left_out_by_the_commands_own_mark(
    home: Path, project: Path, tmp_path: Path
) -> None:
    claude = Claude(home, project, session_id="permission-mark")
    env_file = tmp_path / "session-env" / "sessionstart-hook-0.sh"
    env_file.parent.mkdir()
    started = claude.raw(claude.payload("SessionStart", source="startup"), env={"CLAUDE_ENV_FILE": str(env_file)})
    assert (started.out, started.err) == ("", "")
    claude.prompt("make c")
    tool_input = {"command": "printf 'c\\n' > c.txt", "description": "make c"}
    use_id = claude.pre("Bash", tool_input)
    with open(project / "README.md", "ab") as readme:  # the user, as they answer the prompt
        readme.write(b"the user's line\n")
    users = (project / "README.md").read_bytes()
    time.sleep(0.02)  # past the file system's clock tick, which the edit and the command's shell could share
    ran = claude_code_shell("bash", env_file, tool_input["command"], project)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, b"", b"")
    claude.quiet(
        "PostToolUse",
        tool_name="Bash",
        tool_input=tool_input,
        tool_use_id=use_id,
        tool_response={"stdout": "", "stderr": "", "interrupted": False},
        duration_ms=5,
    )
    claude.stop()
    shown = cli(home, project, "log")
    assert "README.md" not in shown.out and "new c.txt" in shown.out, shown
    done = cli(home, project, "undo", "--yes")
    assert done.rc == 0, done
    assert (project / "README.md").read_bytes() == users, done
    assert not (project / "c.txt").exists()


def test_the_start_mark_is_written_once_and_changes_nothing_a_command_sees(
    home: Path, project: Path, tmp_path: Path
) -> None:
    claude = Claude(home, project, session_id="mark-is-silent")
    env_file = tmp_path / "sessionstart-hook-0.sh"
    env_file.write_text("export THEIRS=1\n")  # what another SessionStart hook of the user's wrote
    for source in ("startup", "compact"):
        claude.raw(claude.payload("SessionStart", source=source), env={"CLAUDE_ENV_FILE": str(env_file)})
    lines = env_file.read_text().splitlines()
    assert lines[0] == "export THEIRS=1" and len(lines) == 2, lines
    (project / "sub").mkdir()
    command = "cd sub; printf 'status %s\\n' \"$?\"; printf 'err\\n' >&2; pwd; printf '%s\\n' \"${THEIRS-}\"; exit 3"
    expected = (3, f"status 0\n{project / 'sub'}\n1\n".encode(), b"err\n")
    for shell in ("bash", "sh"):
        ran = claude_code_shell(shell, env_file, command, project)
        assert (ran.returncode, ran.stdout, ran.stderr) == expected, shell
    marks = home / "command-starts"
    shutil.rmtree(marks)  # where the mark goes is gone: the command still sees nothing of it
    for shell in ("bash", "sh"):
        ran = claude_code_shell(shell, env_file, command, project)
        assert (ran.returncode, ran.stdout, ran.stderr) == expected, shell

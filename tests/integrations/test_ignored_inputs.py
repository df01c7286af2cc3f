"""A Claude Code call about a file .gitignore ignores never shows that file's text, whatever became of the call.

Claude Code's events go through ``turnback hook claude-code`` as in
test_claude_code.py; the user then reads everything the CLI shows about
the calls. Which file a call is about is read from its arguments: a call that
failed, or never finished, changed nothing, and its arguments still carry
the text the agent meant for the ignored file.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from tests.conftest import Result
from tests.integrations.test_claude_code import Claude, cli, log_json

HIDDEN = "(ignored by .gitignore: contents not shown)"
UNREADABLE = "(not shown: a file .gitignore ignores may be named after the part of these arguments that was kept)"


def _input(home: Path, project: Path, call: str) -> Any:
    shown = cli(home, project, "show", call, "--input")
    assert shown.rc == 0, shown
    as_json = cli(home, project, "show", call, "--input", "--json")
    assert as_json.rc == 0, as_json
    raw = as_json.json()["call"]["input"]
    assert json.loads(shown.out) == json.loads(raw) if raw.startswith("{") else shown.out == raw + "\n"
    return json.loads(raw) if raw.startswith("{") else raw


def test_the_arguments_of_calls_on_ignored_files_show_only_paths_and_flags(home: Path, project: Path) -> None:
    marker = "tbsecret" + uuid.uuid4().hex
    (project / ".gitignore").write_bytes(b".env\nprivate.ipynb\nbuild/\n")
    (project / ".env").write_bytes(f"API_KEY={marker}-old\n".encode())
    notebook = project / "private.ipynb"
    notebook.write_bytes(b'{"cells": [{"cell_type": "code", "source": ["x = 1"]}], "nbformat": 4}\n')
    env = project / ".env"
    claude = Claude(home, project)
    outputs: list[Result] = []
    claude.prompt("change the secrets")

    # A NotebookEdit on an ignored notebook: it changes the notebook.
    nb_input = {
        "notebook_path": str(notebook),
        "cell_id": "0",
        "new_source": f"key = '{marker}'",
        "edit_mode": "replace",
    }
    new_nb = b'{"cells": [{"cell_type": "code", "source": ["key = 1"]}], "nbformat": 4}\n'
    claude.tool("NotebookEdit", nb_input, lambda: notebook.write_bytes(new_nb), {"new_source": "key = 1"})

    # An Edit on .env that fails: nothing changes, so no recorded change says the call was about .env.
    edit_input = {"file_path": str(env), "old_string": f"{marker}-absent", "new_string": marker, "replace_all": False}
    use_id = claude.pre("Edit", edit_input)
    failure = claude.send(
        "PostToolUseFailure",
        tool_name="Edit",
        tool_input=edit_input,
        tool_use_id=use_id,
        error=f"String to replace not found in file.\nString: {marker}-absent",
    )
    assert (failure.out, failure.err) == ("", "")

    # A MultiEdit on .env whose PostToolUse never comes (cut short, no change seen), by a path relative to the project.
    multi = {"file_path": ".env", "edits": [{"old_string": marker, "new_string": marker + "2", "replace_all": True}]}
    claude.pre("MultiEdit", multi)

    # A Write into an ignored folder with more than the 4 KiB kept of its arguments, and one whose path comes after
    # the kept part: neither shows what was kept of its content.
    big = (marker + "\n") * 200
    (project / "build").mkdir()
    long_write = {"file_path": str(project / "build" / "out.txt"), "content": big}
    claude.tool("Write", long_write, lambda: (project / "build" / "out.txt").write_text(big), {"type": "create"})
    after_path = {"content": big, "file_path": str(project / "build" / "late.txt")}
    claude.tool("Write", after_path, lambda: (project / "build" / "late.txt").write_text(big), {"type": "create"})

    # A file that is not ignored keeps its whole arguments.
    claude.edit("README.md", "line two", "line 2")
    outputs.append(claude.stop())

    calls = [call for turn in log_json(home, project)["turns"] for call in turn["calls"]]
    assert [call["tool"] for call in calls] == ["NotebookEdit", "Edit", "MultiEdit", "Write", "Write", "Edit"]
    ids = [call["id"] for call in calls]
    assert _input(home, project, ids[0]) == {
        "notebook_path": str(notebook),
        "cell_id": HIDDEN,
        "new_source": HIDDEN,
        "edit_mode": HIDDEN,
    }
    assert _input(home, project, ids[1]) == {
        "file_path": str(env),
        "old_string": HIDDEN,
        "new_string": HIDDEN,
        "replace_all": False,
    }
    assert _input(home, project, ids[2]) == {
        "file_path": ".env",
        "edits": [{"old_string": HIDDEN, "new_string": HIDDEN, "replace_all": True}],
    }
    assert _input(home, project, ids[3]) == HIDDEN
    assert _input(home, project, ids[4]) == UNREADABLE
    assert _input(home, project, ids[5]) == {
        "file_path": str(project / "README.md"),
        "old_string": "line two",
        "new_string": "line 2",
        "replace_all": False,
    }

    failed = cli(home, project, "show", ids[1])
    assert failed.lines[1:] == [f"the call failed {HIDDEN}"]  # Claude Code's message quotes old_string
    outputs += [cli(home, project, "log"), cli(home, project, "log", "--json")]
    for call in ids:
        for args in (["--input"], ["--input", "--json"], [], ["--json"]):
            outputs.append(cli(home, project, "show", call, *args))
    for args in ([], ["--json"], ["--stat"], ["--stat", "--json"]):
        outputs.append(cli(home, project, "diff", *args))
    outputs += [cli(home, project, "undo", "--dry-run"), cli(home, project, "undo", "--dry-run", "--json")]
    for result in outputs:
        assert result.rc == 0, result
        assert marker not in result.out and marker not in result.err, result

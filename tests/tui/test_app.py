"""The TUI driven as a user drives it (Textual's pilot): what it shows, and the bytes on disk after each step."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, Static

import turnback
from tests.conftest import TEST_KEY, Result, run_cli, tree_state
from tests.history.helpers import lib_turn
from tests.tui.conftest import SIZE, Story
from turnback import short_id
from turnback.render.terminal import display_width
from turnback.tui.app import TurnbackApp
from turnback.tui.commands import HELP

pytestmark = pytest.mark.anyio  # the app runs in an event loop (anyio's plugin, which mcp brings, drives it)


def shown(app: TurnbackApp, selector: str) -> str:
    """What a part of the screen says, as plain text."""
    return str(app.query_one(selector, Static).content)


def screen_lines(app: TurnbackApp, selector: str) -> list[str]:
    """The lines a part of the screen shows, as drawn (wrapped to its width), without trailing blanks."""
    widget = app.query_one(selector)
    lines = [widget.render_line(y).text.rstrip() for y in range(widget.size.height)]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def call_list(app: TurnbackApp) -> str:
    """The node's calls as the screen draws them (wrapped to its width), as one line: runs of spaces made one."""
    return " ".join(" ".join(screen_lines(app, "#calls")).split())


def output(app: TurnbackApp) -> list[str]:
    """What the last command printed, in place of the node (which it hides while it is on screen)."""
    assert app.query_one("#output").display and not app.query_one("#node").display, "the node is shown instead"
    return shown(app, "#output").splitlines()


async def command(pilot: Pilot[int], line: str) -> None:
    """Type ``/`` (which focuses the command line), the rest of *line*, and Enter."""
    await pilot.press("slash", *line.removeprefix("/"), "enter")
    await pilot.pause()


def cli_turn_elsewhere(home: Path, project: Path, session: str, path: str, data: bytes) -> None:
    """A turn recorded by another process: the real ``turnback`` CLI, as a harness records one."""
    for args, stdin in (
        (("turn", "begin", "--session", session, "--message", "from elsewhere"), b""),
        (("write", "--session", session, path), data),
        (("turn", "end", "--session", session), b""),
    ):
        done = run_cli(home, *args, cwd=project, stdin=stdin)
        assert done.rc == 0, done.err


def cli_preview(home: Path, project: Path, *args: str) -> list[str]:
    """The lines the CLI's preview of *args* prints (on a pipe it asks nothing: exit 1, nothing changed)."""
    done = run_cli(home, *args, cwd=project)
    assert done.rc == 1 and "nothing changed" in done.err, done.err
    return done.out.splitlines()


async def test_history_a_node_its_preview_then_rollback_confirm(app: TurnbackApp, story: Story, project: Path) -> None:
    _, t2, t3 = story.turns
    async with app.run_test(size=SIZE) as pilot:
        await command(pilot, "/history")
        assert app.query_one("#tree").has_focus  # Enter left the command line
        await pilot.press("slash", "escape")  # / focuses the command line, Escape leaves it
        assert app.query_one("#tree").has_focus
        await pilot.press("down")  # from the head (turn 3) to turn 2
        await pilot.pause()
        assert shown(app, "#node").splitlines() == [
            f"turn 2  {short_id(t2)}  say goodbye too",
            "modified README.md +1 -0",
        ]
        assert "+goodbye" in shown(app, "#diff").splitlines()

        await command(pilot, "/rollback 2")
        assert output(app) == [
            f"roll back to turn 2 ({short_id(t2)})",
            f"rewind turn 3 ({short_id(t3)}): drop the guide",
            "restore     notes.txt",
            "restore     docs/guide.md",
            "what the files go back to: +1 -1 (--diff shows the whole diff)",
            "  docs/guide.md  +1",
            "  notes.txt      -1",
        ]
        assert shown(app, "#prompt") == "this changes nothing yet: /rollback 2 confirm applies it"
        assert tree_state(project) == story.states[3]  # a preview changes nothing
        assert app.engine.session(story.session.id).head == t3

        await command(pilot, "/rollback 2 confirm")
        assert output(app)[-1].startswith("rolled back: 2 files restored")
        assert tree_state(project) == story.states[2]  # turn 2's end state, byte for byte
        assert app.engine.session(story.session.id).head == t2
        assert shown(app, "#prompt") == "" or not app.query_one("#confirm").has_class("shown")


async def test_enter_on_a_node_previews_rolling_back_to_it_and_y_applies(
    app: TurnbackApp, story: Story, project: Path
) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "down", "enter")  # turn 1
        await pilot.pause()
        assert output(app)[0] == f"roll back to turn 1 ({short_id(story.turns[0])})"
        assert tree_state(project) == story.states[3]
        await pilot.press("y")
        await pilot.pause()
        assert tree_state(project) == story.states[1]
        assert app.engine.session(story.session.id).head == story.turns[0]


async def test_a_confirm_after_another_process_added_a_turn_is_refused_as_the_cli_refuses_it(
    app: TurnbackApp, story: Story, project: Path, home: Path
) -> None:
    t3 = story.turns[2]
    async with app.run_test(size=SIZE) as pilot:
        await command(pilot, "/rollback 1")
        cli_turn_elsewhere(home, project, story.session.id, "notes.txt", b"four\n")
        after_four = tree_state(project)
        await pilot.pause(0.5)  # the live view shows turn 4 meanwhile
        await command(pilot, "/rollback 1 confirm")
        refusal = output(app)
        assert tree_state(project) == after_four  # nothing changed
        head = app.engine.session(story.session.id).head
        assert head is not None and head not in story.turns
    cli = run_cli(home, "rollback", "1", "--session", story.session.id, "--confirm", "--expect-head", short_id(t3))
    assert (cli.rc, cli.err.splitlines()) == (1, ["turnback: " + refusal[0]])
    assert refusal == [
        f"stale head: the session's head is turn 4, not the one given ({short_id(t3)}); another turn or rollback"
        " happened since. Nothing was changed: look again"
    ]


async def test_a_turn_recorded_elsewhere_shows_within_a_second(
    app: TurnbackApp, story: Story, project: Path, home: Path
) -> None:
    async with app.run_test(size=SIZE) as pilot:
        cli_turn_elsewhere(home, project, story.session.id, "new.txt", b"new\n")
        await pilot.pause(1.0)
        rows = [str(option.prompt) for option in app.query_one("#tree").options]  # type: ignore[attr-defined]
        assert rows[0].startswith("* turn 4  ") and rows[0].endswith("from elsewhere  [head]")


async def test_a_conflicting_revert_changes_nothing_then_anyway_restores_over_what_it_showed(
    app: TurnbackApp, story: Story, project: Path, home: Path
) -> None:
    [edit] = app.engine.log(story.session.id)[1].calls
    (project / "README.md").write_bytes(b"# project\n\nhello\ngoodbye\nmine\n")  # the user's own edit, since
    mine = tree_state(project)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down")
        await pilot.pause()
        await pilot.press("r")  # the selected call of turn 2: its preview first
        await pilot.pause()
        shown_rows = output(app)
        assert shown_rows[1].startswith("skip        README.md (")
        assert shown_rows[-1] == (
            f"revert changed nothing: 1 path acts only with --anyway; turnback revert {short_id(edit.id)} --anyway"
            " acts on it"
        )
        assert not app.query_one("#confirm").has_class("shown")  # nothing to confirm
        await pilot.press("y")
        await pilot.pause()
        assert tree_state(project) == mine

        await command(pilot, f"/revert {short_id(edit.id)} --anyway")
        assert output(app) == cli_preview(home, project, "revert", short_id(edit.id), "--anyway")
        assert tree_state(project) == mine
        assert shown(app, "#prompt") == (
            f"Restore Anyway? y = yes, n = no  (or type /revert {short_id(edit.id)} --anyway confirm)"
        )
        await pilot.press("y")
        await pilot.pause()
    assert (project / "README.md").read_bytes() == b"# project\n\nhello\n"  # what the call found
    [trashed] = [path for path in (Path(app.engine.home) / "trash").rglob("README.md")]
    assert trashed.read_bytes() == b"# project\n\nhello\ngoodbye\nmine\n"  # the user's edit, kept


async def test_undo_is_refused_with_the_reason_while_the_session_is_busy(
    app: TurnbackApp, story: Story, project: Path, home: Path
) -> None:
    busy = run_cli(home, "busy", "start", "--session", story.session.id, "compaction", "--pid", str(os.getpid()))
    assert busy.rc == 0, busy.err
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert shown(app, "#busy") == "busy: compaction"
        await pilot.press("u")
        await pilot.pause()
        cli: Result = run_cli(home, "undo", "--session", story.session.id, "--yes", cwd=project)
        assert (cli.rc, cli.err.splitlines()) == (3, ["turnback: " + output(app)[0]])
        assert tree_state(project) == story.states[3]


async def test_an_undo_shown_before_the_database_was_deleted_is_refused_as_opening_the_store_is(
    story: Story, project: Path, home: Path
) -> None:
    """The TUI keeps the store open and opens it again, at each poll and before each command, when a new opening
    would give another: confirmed after the database was deleted, the undo shown before is refused with the
    reason opening it gives, and nothing changes (its record would have gone into the deleted file)."""
    kept = turnback.KeptStore(lambda: turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False))
    app = TurnbackApp(kept, story.session, lang="en", poll_s=60)  # the command, not a poll, notices it
    try:
        async with app.run_test(size=SIZE) as pilot:
            await command(pilot, "/undo")
            assert shown(app, "#prompt") == "undo? y = yes, n = no  (or type /undo confirm)"
            (home / "turnback.db").unlink()
            await pilot.press("y")
            await pilot.pause()
            assert output(app)[0].startswith(f"the database of the store at {home} is gone"), output(app)
            assert tree_state(project) == story.states[3]
    finally:
        kept.close()


async def test_the_poll_after_the_database_was_deleted_shows_why_the_store_cannot_be_read(
    story: Story, home: Path
) -> None:
    kept = turnback.KeptStore(lambda: turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False))
    app = TurnbackApp(kept, story.session, lang="en", poll_s=0.1)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            (home / "turnback.db").unlink()
            await pilot.pause(0.5)
            assert output(app)[0].startswith(f"the database of the store at {home} is gone"), output(app)
    finally:
        kept.close()


async def test_lang_ja_words_every_label_in_japanese(app: TurnbackApp, story: Story) -> None:
    async with app.run_test(size=SIZE) as pilot:
        assert "r Revert" in shown(app, "#keys")
        await command(pilot, "/lang ja")
        assert "r 元に戻す" in shown(app, "#keys")
        assert output(app) == ["言語：ja"]
        await pilot.press("r")
        await pilot.pause()
        assert shown(app, "#prompt").startswith("元に戻す？")
        rows = [str(option.prompt) for option in app.query_one("#tree").options]  # type: ignore[attr-defined]
        assert rows[0].startswith("* ターン 3  ")


async def test_undo_redo_and_the_views_of_the_command_line(app: TurnbackApp, story: Story, project: Path) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await command(pilot, "/undo")
        assert tree_state(project) == story.states[3]
        await command(pilot, "/undo confirm")
        assert tree_state(project) == story.states[2]
        await command(pilot, "/redo")
        await pilot.press("y")
        await pilot.pause()
        assert tree_state(project) == story.states[3]
        await command(pilot, "/files")
        assert output(app) == [
            "README.md      as of turn 2",
            "notes.txt      as of turn 3",
            "docs/guide.md  deleted in turn 3",
        ]
        await command(pilot, "/diff 2")
        assert "+goodbye" in output(app)
        await command(pilot, "/status")
        assert output(app)[0] == f"session {short_id(story.session.id)}  head: turn 3 ({short_id(story.turns[2])})"
        await command(pilot, "/rollback")
        assert output(app) == ["usage: /rollback N [--diff] [confirm]"]
        await command(pilot, "/frobnicate")
        assert output(app) == ["unknown command /frobnicate: /help lists the commands"]
        await command(pilot, "/quit")
    assert app.return_code == 0


def test_turnback_tui_needs_a_session_and_a_terminal(cli, engine, project: Path) -> None:  # type: ignore[no-untyped-def]
    nothing = cli("tui")
    assert (nothing.rc, nothing.err) == (
        2,
        f"turnback: {project} is in no turnback project; give --session, or run turnback init in the project\n",
    )
    session = engine.new_session(str(project), title="t")
    lib_turn(engine, session.id, "one", ("write", "a.txt", b"a\n"))
    piped = cli("tui")  # stdin and stdout are pipes here
    assert (piped.rc, piped.out) == (2, "")
    assert piped.err == (
        "turnback: turnback tui needs a terminal (stdin and stdout both); in a script use turnback log, rollback,"
        " undo\n"
    )


def test_turnback_tui_without_the_tui_extra_says_how_to_install_it(
    engine: turnback.Engine, home: Path, project: Path, tmp_path: Path
) -> None:
    session = engine.new_session(str(project), title="t")
    hide = tmp_path / "no-textual"  # a Python whose Textual cannot be imported, as without the extra
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['textual'] = None\n")
    src = Path(turnback.__file__).parents[1]
    done = run_cli(home, "tui", "--session", session.id, cwd=project, env={"PYTHONPATH": f"{hide}:{src}"})
    assert (done.rc, done.out) == (2, "")
    assert done.err == "turnback: turnback tui needs the tui extra (Textual): pip install 'turnback[tui]'\n"


async def test_sessions_switches_and_a_turn_of_another_session_is_refused(
    app: TurnbackApp, story: Story, project: Path
) -> None:
    engine = app.engine
    other = engine.new_session(str(project), title="other")
    other_turn = lib_turn(engine, other.id, "elsewhere", ("write", "other.txt", b"other\n"))
    before = tree_state(project)
    async with app.run_test(size=SIZE) as pilot:
        await command(pilot, f"/rollback {short_id(other_turn.id)}")
        assert output(app) == [
            f"turn {short_id(other_turn.id)} belongs to another session, not {short_id(story.session.id)}; nothing"
            " was changed"
        ]
        assert tree_state(project) == before

        await command(pilot, "/sessions")
        picker = app.screen.query_one("#sessions", OptionList)
        assert [option.id for option in picker.options] == [other.id, story.session.id]  # the latest first
        assert picker.highlighted == 1  # the session shown
        await pilot.press("k", "enter")
        await pilot.pause()
        assert shown(app, "#title") == f"turnback: session {short_id(other.id)}"
        assert shown(app, "#node").splitlines()[0] == f"turn 1  {short_id(other_turn.id)}  elsewhere  [head]"


async def test_the_command_line_completes_recalls_and_the_mouse_confirms(
    app: TurnbackApp, story: Story, project: Path
) -> None:
    async with app.run_test(size=SIZE) as pilot:
        line = app.query_one("#command", Input)
        await pilot.press("slash", "r", "o", "l", "tab")
        assert line.value == "/rollback"
        await pilot.press("escape")
        await command(pilot, "/undo")
        await pilot.press("slash", "up")
        assert line.value == "/undo"
        await pilot.press("escape")
        assert tree_state(project) == story.states[3]
        await pilot.click("#yes")
        await pilot.pause()
        assert tree_state(project) == story.states[2]


async def test_an_ignored_file_is_listed_but_its_contents_never_shown(
    fixed_engine: turnback.Engine, story: Story, project: Path
) -> None:
    (project / ".gitignore").write_bytes(b"secret.env\n")
    lib_turn(fixed_engine, story.session.id, "keys", ("write", "secret.env", b"TOKEN=hunter2\n"))
    app = TurnbackApp(turnback.KeptStore(lambda: fixed_engine), fixed_engine.session(story.session.id), lang="en")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screens = [shown(app, "#node"), shown(app, "#diff")]
        await command(pilot, "/diff")
        screens.append(shown(app, "#output"))
        await command(pilot, "/undo")
        screens.append(shown(app, "#output"))
        await command(pilot, "/rollback 3 --diff")
        screens.append(shown(app, "#output"))
        await command(pilot, "/rollback 3")
        screens.append(shown(app, "#output"))
        await command(pilot, "/history")
        await pilot.press("r")  # the selected call: the one that wrote secret.env
        await pilot.pause()
        screens.append(shown(app, "#output"))
    assert all("hunter2" not in screen for screen in screens), screens
    assert all("secret.env" in screen for screen in screens[2:]), screens  # named, its contents not shown
    assert screens[1].splitlines() == ["new secret.env (ignored by .gitignore: contents not shown)"]


@pytest.mark.parametrize("no_color", [False, True])
async def test_diffs_are_coloured_unless_no_color(
    fixed_engine: turnback.Engine, story: Story, monkeypatch: pytest.MonkeyPatch, no_color: bool
) -> None:
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    app = TurnbackApp(turnback.KeptStore(lambda: fixed_engine), story.session, lang="en")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        diff = app.query_one("#diff", Static).content
        assert isinstance(diff, Text) and "-no final newline" in diff.plain
        assert bool(diff.spans) is not no_color
        assert bool(screen_hues(app)) is not no_color  # NO_COLOR: the whole screen in shades of grey


def screen_hues(app: TurnbackApp) -> set[str]:
    """The colours the screen shows (its screenshot's backgrounds and visible text) that are not a grey."""
    svg = app.export_screenshot()
    screen = re.split(r'clip-path="url\(#terminal-[\w-]*clip-terminal\)">', svg, maxsplit=1)[1]  # not the frame
    fill = dict(re.findall(r"\.terminal-[\w-]*?(r\d+) \{ fill: #([0-9a-f]{6})", svg))
    texts = re.findall(r'<text class="terminal-[\w-]*?(r\d+)"[^>]*>([^<]*)</text>', screen)
    colours = {fill[style] for style, shown in texts if shown.strip()}
    colours |= set(re.findall(r'<rect fill="#([0-9a-f]{6})"', screen))
    assert colours, "no colour found in the screenshot"
    return {colour for colour in colours if len({colour[0:2], colour[2:4], colour[4:6]}) > 1}


async def test_a_turns_whole_message_shows_under_its_node_each_line_escaped(
    fixed_engine: turnback.Engine, story: Story
) -> None:
    lib_turn(fixed_engine, story.session.id, "fix the parser\nthen the \x1b[2Jdocs", ("write", "a.txt", b"a\n"))
    app = TurnbackApp(turnback.KeptStore(lambda: fixed_engine), fixed_engine.session(story.session.id), lang="en")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert shown(app, "#node").splitlines()[1:3] == ["message: fix the parser", "  then the \\033[2Jdocs"]


async def test_a_session_with_no_turns_yet_shows_each_refusal_as_the_cli_words_it(
    cli: Callable[..., Result], fixed_engine: turnback.Engine, project: Path
) -> None:
    empty = fixed_engine.new_session(str(project), title="empty")
    app = TurnbackApp(turnback.KeptStore(lambda: fixed_engine), empty, lang="en")
    async with app.run_test(size=SIZE) as pilot:
        assert shown(app, "#node") == "no turns yet"
        for line, verb in (("/undo", ["undo"]), ("/redo", ["redo"]), ("/diff", ["diff"])):
            await command(pilot, line)
            done = cli(*verb, "--session", empty.id)
            assert (done.rc, done.err.splitlines()) == (1, ["turnback: " + output(app)[0]]), line
        await command(pilot, "/rollback 1")
        assert output(app) == ["the session has no turn 1"]
        await command(pilot, "/lang ja")
        assert output(app) == ["言語：ja"]


async def test_slash_in_the_session_list_leaves_it_for_the_command_line(app: TurnbackApp, story: Story) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await command(pilot, "/sessions")
        assert isinstance(app.screen.query_one("#sessions"), OptionList)
        await command(pilot, "/help")  # typed in the list: "/" leaves it, the rest is the command
        assert not app.screen.query("#sessions")
        assert screen_lines(app, "#output")[0].startswith("commands (Tab completes")


async def test_each_call_of_the_node_shows_its_state_and_its_counts_in_one_column(
    app: TurnbackApp, story: Story
) -> None:
    delete, write = app.engine.log(story.session.id)[2].calls
    async with app.run_test(size=SIZE) as pilot:
        assert (
            call_list(app)
            == f"{short_id(delete.id)} delete docs/guide.md +0 -1 {short_id(write.id)} write notes.txt +1 -0"
        )
        await command(pilot, f"/revert {short_id(write.id)} confirm")
        await command(pilot, "/history")
        reverted = f"{short_id(write.id)} write notes.txt +1 -0 (Reverted)"  # the title wraps; the counts do not
        assert call_list(app) == f"{short_id(delete.id)} delete docs/guide.md +0 -1 {reverted}"
        counted = [line for line in screen_lines(app, "#calls") if " +" in line]
        assert len(counted) == 2 and len({line.index(" +") for line in counted}) == 1  # the counts in one column


async def test_u_undoes_the_selected_turn_and_undo_from_n_shows_the_clis_rows(
    app: TurnbackApp, story: Story, project: Path, home: Path
) -> None:
    sid = story.session.id
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("j", "k", "j")  # j and k move as the arrows do: to turn 2
        await pilot.pause()
        assert shown(app, "#node").startswith("turn 2  ")
        await pilot.press("u")  # turn 2 alone, while turn 3 after it is not undone
        await pilot.pause()
        refused = run_cli(home, "undo", "2", "--session", sid, cwd=project)
        assert (refused.rc, refused.err.splitlines()) == (1, ["turnback: " + output(app)[0]])
        await command(pilot, "/undo from 2")
        assert output(app) == cli_preview(home, project, "undo", "--from", "2", "--session", sid)
        assert tree_state(project) == story.states[3]
        await pilot.press("y")
        await pilot.pause()
    assert tree_state(project) == story.states[1]


async def test_undo_force_shows_the_clis_rows_and_trashes_what_the_user_wrote_since(
    app: TurnbackApp, story: Story, project: Path, home: Path
) -> None:
    sid = story.session.id
    (project / "notes.txt").write_bytes(b"one\nthree\nmine\n")  # the user's own edit, after turn 3
    async with app.run_test(size=SIZE) as pilot:
        await command(pilot, "/undo")
        assert output(app) == cli_preview(home, project, "undo", "--session", sid)
        assert any(line.startswith("skip        notes.txt") for line in output(app))
        await command(pilot, "/undo --force")
        assert output(app) == cli_preview(home, project, "undo", "--force", "--session", sid)
        assert (project / "notes.txt").read_bytes() == b"one\nthree\nmine\n"
        await command(pilot, "/undo --force confirm")
    assert tree_state(project) == story.states[2]  # turn 2's end state: the user's edit went to the trash
    [trashed] = [path for path in (Path(app.engine.home) / "trash").rglob("notes.txt")]
    assert trashed.read_bytes() == b"one\nthree\nmine\n"


async def test_a_call_of_a_turn_running_elsewhere_shows_live_and_a_rollback_confirm_is_refused_meanwhile(
    app: TurnbackApp, story: Story, project: Path, home: Path
) -> None:
    sid = story.session.id
    harness = subprocess.Popen(["sleep", "60"])  # the process that holds the turn, as a harness's would
    try:
        async with app.run_test(size=SIZE) as pilot:
            await command(pilot, "/rollback 1")
            assert app.query_one("#confirm").has_class("shown")
            begun = run_cli(home, "turn", "begin", "--session", sid, "--message", "busy", "--pid", str(harness.pid))
            assert begun.rc == 0, begun.err
            await pilot.pause(1.0)
            assert shown(app, "#busy") == f"running: turn 4 (held by process {harness.pid})"
            wrote = run_cli(home, "write", "--session", sid, "late.txt", cwd=project, stdin=b"late\n")
            assert wrote.rc == 0, wrote.err
            await pilot.pause(1.0)  # the call another process recorded shows within a second
            await pilot.press("home")  # the newest turn: 4
            await pilot.pause()
            calls = call_list(app)
            assert calls.endswith(" write late.txt +1 -0") and calls.count(" write ") == 1, calls
            during = tree_state(project)
            await pilot.click("#yes")  # the preview's button, under it still
            await pilot.pause()
            refused = run_cli(home, "rollback", "1", "--session", sid, "--confirm", cwd=project)
            assert (refused.rc, refused.err.splitlines()) == (3, ["turnback: " + output(app)[0]])
            assert tree_state(project) == during  # nothing changed
    finally:
        harness.kill()
        harness.wait()


async def test_the_tree_marks_the_head_an_abandoned_branch_and_an_undone_turn(app: TurnbackApp, story: Story) -> None:
    t1, t2, t3 = (short_id(turn) for turn in story.turns)

    def tree() -> list[str]:
        return [str(option.prompt) for option in app.query_one("#tree", OptionList).options]

    async with app.run_test(size=SIZE) as pilot:
        await command(pilot, "/rollback 2 confirm")
        t4 = short_id(lib_turn(app.engine, story.session.id, "a new branch", ("write", "x.txt", b"x\n")).id)
        await pilot.pause(0.5)  # the live view redraws
        await command(pilot, "/undo confirm")
        assert tree() == [
            f"* turn 4  {t4}  a new branch  [head, undone]",
            f"| * turn 3  {t3}  drop the guide  [abandoned, undone]",
            "|/",
            f"* turn 2  {t2}  say goodbye too",
            f"* turn 1  {t1}  add a greeting",
        ]


async def test_a_click_on_a_node_previews_rolling_back_to_it_as_enter_does(
    app: TurnbackApp, story: Story, project: Path
) -> None:
    async with app.run_test(size=SIZE) as pilot:
        tree = app.query_one("#tree", OptionList)
        row = next(y for y in range(tree.size.height) if "turn 1 " in tree.render_line(y).text)
        border = tree.content_region.y - tree.region.y  # render_line counts from inside it, a click from outside
        assert await pilot.click("#tree", offset=(4, border + row))
        await pilot.pause()
        assert output(app)[0] == f"roll back to turn 1 ({short_id(story.turns[0])})"
        assert tree_state(project) == story.states[3]


async def test_a_call_that_changed_no_line_shows_no_counts(fixed_engine: turnback.Engine, story: Story) -> None:
    steps = (
        ("write", "notes.txt", b"one\nthree\n"),
        ("write", "logo.png", b"\x89PNG\x00\x01"),
        ("write", "b.txt", b"b\n"),
    )
    turn = lib_turn(fixed_engine, story.session.id, "same bytes, a binary file, a line", *steps)
    app = TurnbackApp(turnback.KeptStore(lambda: fixed_engine), fixed_engine.session(story.session.id), lang="en")
    async with app.run_test(size=(80, 24)) as pilot:  # narrow: a call's counts stay on one line
        await pilot.pause()
        ids = [short_id(call.id) for call in turn.calls]
        assert call_list(app) == f"{ids[0]} write notes.txt {ids[1]} write logo.png {ids[2]} write b.txt +1 -0"
        assert any(line.rstrip().endswith("+1 -0") for line in screen_lines(app, "#calls"))  # never split


@pytest.mark.parametrize("lang", ["en", "zh-CN", "ja"])
async def test_help_aligns_what_each_command_does_by_display_width(
    fixed_engine: turnback.Engine, story: Story, lang: str
) -> None:
    app = TurnbackApp(turnback.KeptStore(lambda: fixed_engine), story.session, lang=lang)
    async with app.run_test(size=(80, 24)) as pilot:
        await command(pilot, "/help")
        rows = [re.match(r"  (\S.*?) {2,}(?=\S)", line) for line in screen_lines(app, "#output")[1:]]
        columns = {display_width(row.group(0)) for row in rows if row is not None}
        assert len([row for row in rows if row is not None]) >= len(HELP)
        assert len(columns) == 1, columns  # every description starts in the same column, wrapped lines too

"""The terminal UI: the history tree, the selected node's detail, a command line, a key help line.

Thin over the engine, as the CLI is: every plan comes from ``Engine.plan_*`` and is applied by
``Engine.apply`` (its compare-and-swap), every line from ``render/`` and every word from the catalog, in the
language ``/lang`` picks. A rollback confirmed here is pinned to the head its preview saw, as the CLI's
``--confirm --expect-head`` is; undo, revert and redo apply the plan that was shown, as the CLI's prompt does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import ClassVar, NamedTuple

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual import events, on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option

import turnback
from turnback import Call, KeptStore, Plan, Session, Turn, short_id
from turnback.catalog import Message, language, say, word
from turnback.render import data, text, views
from turnback.render.terminal import display_width, escape_line
from turnback.tui.commands import COMPLETIONS, HELP, Command, CommandError, confirms, parse

ROLLBACK = "rollback"


class Pending(NamedTuple):
    """A preview on screen, waiting for ``y`` or ``… confirm``: the command that made it and its plan."""

    command: Command
    plan: Plan


def plain(lines: Sequence[str]) -> Text:
    """Lines as text, every control character escaped (a name or a file's content cannot restyle the screen)."""
    return Text("\n".join(escape_line(line) for line in lines))


def patch(lines: Sequence[str], *, color: bool) -> Text:
    """A diff, coloured as the CLI colours it (``views.colorize``), or plain with ``NO_COLOR``."""
    return Text.from_ansi("\n".join(views.colorize(lines))) if color else plain(lines)


def call_rows(turn: Turn, load: text.Load) -> list[Table | Text]:
    """Each call of *turn* as ``log`` shows it (with what became of it), then its +/- counts (the page's
    ``call_block_data``) in a column of their own at the right, which a narrow screen never splits (the title
    wraps instead). A call that changed no line (no file, a folder, a mode, a binary file, the same bytes
    again) has none, and its title the whole width: "+0 -0" would say it changed nothing."""
    counts = []
    for call in turn.calls:
        block = data.call_block_data(call, turn, load, data.change_items(call)) if call.changes else {}
        counted = block.get("added") or block.get("removed")
        counts.append(f"+{block['added']} -{block['removed']}" if counted else "")
    width = max(map(display_width, counts), default=0)
    rows: list[Table | Text] = []
    for call, shown in zip(turn.calls, counts, strict=True):
        if not shown:
            rows.append(plain([text.call_row(turn, call)]))
            continue
        row = Table.grid(padding=(0, 2), expand=True)
        row.add_column(ratio=1)
        row.add_column(no_wrap=True, width=width)
        row.add_row(plain([text.call_row(turn, call)]), plain([shown]))
        rows.append(row)
    return rows


def help_view(title: str, rows: Sequence[tuple[str, str]]) -> Group:
    """``/help``: each command and what it does, in two columns that Rich aligns by display width (a CJK
    character takes two) and wraps each within its own column on a narrow screen."""
    table = Table.grid(padding=(0, 2))
    table.add_column()
    table.add_column(ratio=1)
    for usage, does in rows:
        description = plain([does])
        description.overflow = "fold"  # a CJK sentence is one word to Rich: folded at the column's edge, not cut
        table.add_row(plain([usage]), description)
    return Group(plain([title]), Padding(table, (0, 0, 0, 2)))


class Rows(OptionList):
    """A list moved with the arrows, or ``j`` and ``k`` as in less and vim."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", show=False),
        Binding("k", "cursor_up", show=False),
    ]


class CommandLine(Input):
    """The command line: Tab completes, the arrows recall earlier commands, Escape leaves it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("tab", "complete", show=False),
        Binding("up", "recall(-1)", show=False),
        Binding("down", "recall(1)", show=False),
        Binding("escape", "leave", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(
            id="command", suggester=SuggestFromList(COMPLETIONS, case_sensitive=False), select_on_focus=False
        )
        self.history: list[str] = []
        self._recalled = 0

    def remember(self, line: str) -> None:
        if line and (not self.history or self.history[-1] != line):
            self.history.append(line)
        self._recalled = len(self.history)

    async def _on_key(self, event: events.Key) -> None:
        # Enter is taken here, in turn with the characters before it, not as a binding: Textual checks a
        # binding when the key has come back up to the app, by when the keys typed after it (a pasted
        # "/history" Enter "/rollback 1" Enter) may be in this line already.
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            await self.action_submit()
            return
        await super()._on_key(event)

    async def action_submit(self) -> None:
        """Enter: the line goes to the app, and the command line starts empty, so the keys typed next are
        never mixed into this line (the app then leaves the command line, as vim does)."""
        line = self.value.strip()
        self.remember(line)
        self.value = ""
        self.post_message(self.Submitted(self, line))

    def action_complete(self) -> None:
        if self._suggestion:
            self.value = self._suggestion
            self.cursor_position = len(self.value)

    def action_recall(self, step: int) -> None:
        if not self.history:
            return
        self._recalled = max(0, min(len(self.history), self._recalled + step))
        self.value = self.history[self._recalled] if self._recalled < len(self.history) else ""
        self.cursor_position = len(self.value)

    def action_leave(self) -> None:
        self.value = ""
        self.screen.set_focus(self.screen.query_one("#tree"))


class SessionPicker(ModalScreen[str | None]):
    """``/sessions``: every session, as ``turnback sessions`` lists them; Enter switches, Escape goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", show=False)]

    def __init__(self, heading: str, rows: Sequence[tuple[str, str]], current: str):
        super().__init__()
        self._heading = heading
        self._rows = rows
        self._current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static(plain([self._heading]))
            yield Rows(*(Option(plain([line]), id=session_id) for session_id, line in self._rows), id="sessions")

    def on_mount(self) -> None:
        sessions = self.query_one("#sessions", Rows)
        sessions.highlighted = sessions.get_option_index(self._current)  # where the user is, to move from
        self.set_focus(sessions)

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class TurnbackApp(App[int]):
    """``turnback tui``: one session's history, driven by commands and keys."""

    TITLE = "turnback"
    AUTO_FOCUS = None  # on_mount gives the tree the focus at once; Textual's own would come after keys typed
    CSS = """
    #title { height: 1; background: $primary-background; }
    #busy { height: auto; color: $warning; }
    #main { height: 1fr; }
    #tree { width: 45%; height: 1fr; }
    #view { width: 1fr; height: 1fr; padding: 0 1; }
    #calls { height: auto; max-height: 8; }
    #confirm { height: auto; display: none; }
    #confirm.shown { display: block; }
    #prompt { width: 1fr; height: auto; padding: 0 1; }
    #confirm Button { min-width: 10; height: 1; border: none; margin: 0 1; }
    #command { height: 1; border: none; padding: 0 1; }
    #keys { height: 1; color: $text-muted; }
    #picker { width: 90%; height: 80%; border: round $primary; background: $surface; }
    SessionPicker { align: center middle; }
    .refused { color: $error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        # A priority binding, handled as the key arrives: a plain one waits until the key has bubbled up
        # from the tree, and the keys typed after "/" (r, y...) would reach the tree first. (Off while the
        # command line has the focus: check_action.)
        Binding("slash", "command_line", show=False, priority=True),
        Binding("q", "quit_app", show=False),
        Binding("r", "revert_selected", show=False),
        Binding("u", "undo_selected", show=False),
        Binding("y", "confirm", show=False),
        Binding("n", "decline", show=False),
        Binding("escape", "decline", show=False),
    ]

    def __init__(self, kept: KeptStore, session: Session, *, lang: str, poll_s: float = 0.5):
        """*kept*: the store, kept open while the TUI runs; at each poll and before each command the engine is
        the one a new opening would give (a database deleted or made again in its place is noticed: a command
        is refused as opening the store is, never applied with its record going into a file no one reads)."""
        super().__init__()
        self.kept = kept
        self.engine = kept.engine()
        self.session_id = session.id
        self.lang = lang
        self.poll_s = poll_s
        self.color = not turnback.env_no_color()
        self.pending: Pending | None = None
        self.head: str | None = None  # the head the tree on screen shows
        self.turns: dict[str, Turn] = {}
        self._mark: object = None
        self._showing_output = False

    # -- layout --------------------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="title")
        yield Static(id="busy")
        with Horizontal(id="main"):
            yield Rows(id="tree")
            with VerticalScroll(id="view"):
                yield Static(id="node")
                yield Rows(id="calls")
                yield Static(id="diff")
                yield Static(id="output")
        with Horizontal(id="confirm"):
            yield Static(id="prompt")
            yield Button("", id="yes", variant="primary")
            yield Button("", id="no")
        yield CommandLine()
        yield Static(id="keys")

    def on_mount(self) -> None:
        self._relabel()
        self.reload()
        self.screen.set_focus(self.query_one("#tree"))  # at once: Widget.focus would come after keys typed
        self.set_interval(self.poll_s, self.poll)

    @contextlib.contextmanager
    def worded(self) -> Iterator[None]:
        """Render in the TUI's language: ``say`` and ``word`` read it from the context (each handler runs in
        a task of its own, so it is set around the rendering, not once)."""
        token = language.set(self.lang)
        try:
            yield
        finally:
            language.reset(token)

    def _relabel(self) -> None:
        """Every fixed label, in the current language."""
        with self.worded():
            keys = say("tui_keys", revert=Message("label_revert"), undo=Message("op_undo"))
            self.query_one("#keys", Static).update(plain([keys]))
            self.query_one("#command", Input).placeholder = say("tui_placeholder")
            self.query_one("#title", Static).update(plain([say("tui_title", session=short_id(self.session_id))]))
            self.query_one("#no", Button).label = say("tui_button_no")

    # -- the tree and the node -----------------------------------------------------------------------------------

    def poll(self) -> None:
        """Redraw when another process recorded something (a turn, a call, an operation, a busy mark)."""
        if not self.is_running:  # a tick while the app shuts down: its widgets are already gone
            return
        try:
            self._engine_afresh()
            if self.engine.change_mark(self.session_id) != self._mark:
                self.reload()
        except turnback.TurnbackError as error:  # the store busy a moment, or the session deleted meanwhile
            with self.worded():
                self.show_output(plain([word(error.message)]), refused=True)

    def _engine_afresh(self) -> None:
        """The engine over the store a new opening gives now (the kept one while it is still that); unchanged
        when the store cannot be opened (the error says why)."""
        engine = self.kept.engine()
        self.engine, engine = engine, self.engine
        self.kept.give_back(engine)

    def reload(self) -> None:
        engine, session_id = self.engine, self.session_id
        engine.mark_interrupted(session_id)
        self._mark = engine.change_mark(session_id)
        turns = engine.log(session_id)
        session = engine.session(session_id)
        self.head = session.head
        self.turns = {turn.id: turn for turn in turns}
        active = {turn.id for turn in engine.active_line(session_id)}
        resent = {turn.id for turn in turns if turn.resent}
        tree = self.query_one("#tree", Rows)
        selected = tree.highlighted_option.id if tree.highlighted_option is not None else None
        with self.worded():
            rows = text.tree_rows(turns, head=session.head, active=active, resent=resent)
            status = engine.status(session_id)
            busy = [say("status_running_turn", number=turn.number, pid=turn.holder_pid) for turn in status.running]
            busy += [say("busy_reason", reason=word(reason)) for reason in status.busy]
        ids = [turn.id for turn, _ in rows if turn is not None]
        # Redrawn, the tree keeps its selection; that is no move of the user's (which shows the node in place
        # of what a command printed).
        with tree.prevent(OptionList.OptionHighlighted):
            tree.clear_options()
            tree.add_options(
                [Option(plain([line]), id=turn.id if turn else None, disabled=turn is None) for turn, line in rows]
            )
            if ids:
                tree.highlighted = tree.get_option_index(selected if selected in ids else session.head or ids[0])
        self.query_one("#busy", Static).update(plain(busy))
        self.query_one("#busy").display = bool(busy)
        if not self._showing_output:  # what a command printed stays, on a session with no turns too
            self.show_node()

    def selected_turn(self) -> Turn | None:
        option = self.query_one("#tree", Rows).highlighted_option
        return self.turns.get(option.id) if option is not None and option.id else None

    def selected_call(self) -> Call | None:
        turn = self.selected_turn()
        calls = self.query_one("#calls", Rows)
        if turn is None or not turn.calls:
            return None
        index = calls.highlighted if calls.highlighted is not None else 0
        return turn.calls[min(index, len(turn.calls) - 1)]

    def show_node(self) -> None:
        """The selected turn on the right: its line, its message, its files with their counts, its calls,
        and the diff of the selected call."""
        self._show(output=False)
        turn = self.selected_turn()
        calls = self.query_one("#calls", Rows)
        calls.clear_options()
        if turn is None:
            with self.worded():
                self.query_one("#node", Static).update(plain([say("no_turns_yet")]))
            self.query_one("#diff", Static).update("")
            return
        active = {t.id for t in self.engine.active_line(self.session_id)}
        resent = {t.id for t in self.turns.values() if t.resent}
        with self.worded():
            lines = [text.turn_line(turn, head=self.head, active=active, resent=resent)]
            message = (turn.message or "").strip().splitlines()
            if len(message) > 1:  # the tree shows its first line only
                lines.append(say("tui_message", text=message[0]))
                lines.extend("  " + line for line in message[1:])
            lines.extend(text.change_rows(turn, self.engine.load, self.engine.overlap_notes))
            if not turn.calls:
                lines.append(say("tui_no_calls"))
            rows = call_rows(turn, self.engine.load)
        self.query_one("#node", Static).update(plain(lines))
        calls.add_options([Option(row, id=call.id) for row, call in zip(rows, turn.calls, strict=True)])
        if turn.calls:
            calls.highlighted = 0
        self.show_call()

    def show_call(self) -> None:
        call = self.selected_call()
        diff = self.query_one("#diff", Static)
        if call is None:
            diff.update("")
            return
        engine = self.engine
        with self.worded():
            call = engine.call_as_it_stands(call.id)
            hidden = engine.call_hidden(call)
            lines = text.call_lines(
                call,
                engine.turn_of(call).number,
                engine.load,
                engine.config.diff_lines,
                hidden=hidden.paths,
                hide_error=hidden.text,
                notes=engine.overlap_notes(call),
            )
        diff.update(patch(lines[1:], color=self.color))  # its first line is the call's row, shown above

    @on(OptionList.OptionHighlighted, "#tree")
    def _tree_moved(self) -> None:
        self.show_node()

    @on(OptionList.OptionSelected, "#tree")
    def _tree_chosen(self) -> None:
        turn = self.selected_turn()
        if turn is not None:
            self.run_command(Command(ROLLBACK, (str(turn.number),)))

    @on(OptionList.OptionHighlighted, "#calls")
    def _call_moved(self) -> None:
        self.show_call()

    # -- output --------------------------------------------------------------------------------------------------

    def _show(self, *, output: bool) -> None:
        self._showing_output = output
        for name in ("#node", "#calls", "#diff"):
            self.query_one(name).display = not output
        self.query_one("#output").display = output

    def show_output(self, body: RenderableType, *, refused: bool = False) -> None:
        """What a command printed, in place of the node (``/history`` or a move in the tree brings it back)."""
        self._show(output=True)
        output = self.query_one("#output", Static)
        output.set_class(refused, "refused")
        output.update(body)
        self.query_one("#view", VerticalScroll).scroll_home(animate=False)

    def _ask(self, pending: Pending | None) -> None:
        """Show or hide the confirm bar under a preview."""
        self.pending = pending
        bar = self.query_one("#confirm")
        bar.set_class(pending is not None, "shown")
        if pending is None:
            return
        command, plan = pending
        flags = sorted(command.flags - {"--diff"})
        confirm = " ".join(["/" + command.name, *command.words, *flags, "confirm"])
        with self.worded():
            if command.name == ROLLBACK:
                prompt = say("rollback_changes_nothing_yet", command=confirm)
            else:
                prompt = say("tui_confirm_or_type", prompt=text.confirm_prompt(plan), command=confirm)
            self.query_one("#yes", Button).label = word(text.action_name(plan)) + " (y)"
        self.query_one("#prompt", Static).update(plain([prompt]))

    # -- commands ------------------------------------------------------------------------------------------------

    @on(Input.Submitted, "#command")
    def _submitted(self, event: Input.Submitted) -> None:
        # Left here, in the app's turn, not in the command line's: the keys the app has handed it meanwhile
        # (typed fast, or pasted) are its own still, Enter included; the keys after go to the tree.
        self.screen.set_focus(self.query_one("#tree"))
        line = event.value
        if not line:
            return
        try:
            command = parse(line)
        except CommandError as error:
            with self.worded():
                code = "tui_unknown_command" if error.kind == "unknown" else "tui_usage"
                self.show_output(plain([say(code, command=error.command, usage=error.command)]), refused=True)
            return
        self.run_command(command)

    def run_command(self, command: Command) -> None:
        """Run *command*; a refusal is shown with the engine's message, in the TUI's language."""
        try:
            self._engine_afresh()
            self._dispatch(command)
        except turnback.TurnbackError as error:
            with self.worded():
                self.show_output(plain([word(error.message)]), refused=True)
            self._ask(None)
            self.reload()

    def _dispatch(self, command: Command) -> None:
        name = command.name
        if name == "quit":
            self.exit(0)
        elif name == "history":
            self._ask(None)
            self.reload()
            self.show_node()
        elif name == "sessions":
            self._pick_session()
        elif name == "lang":
            self.lang = command.words[0]
            self._relabel()
            self.reload()
            if self.pending is not None:
                self._ask(self.pending)
            with self.worded():
                self.show_output(plain([say("tui_language", lang=self.lang)]))
        elif name == "help":
            with self.worded():
                self.show_output(
                    help_view(say("tui_help_title"), [(usage, word(does)) for usage, does in HELP.values()])
                )
        elif name in ("diff", "files", "status"):
            with self.worded():
                self.show_output(self._look(command))
        else:
            self._take_back(command)

    def _look(self, command: Command) -> Text:
        """``/diff``, ``/files`` and ``/status``: what the CLI's verbs of the same names print."""
        engine, session_id = self.engine, self.session_id
        if command.name == "files":
            return plain(text.file_lines(engine.files(session_id)))
        if command.name == "status":
            engine.catch_up(session_id)
            status = engine.status(session_id)
            return plain(text.status_lines(**status._asdict(), max_mib=engine.config.store_max_mib))
        diff = engine.turn_diff(session_id, command.words[0] if command.words else None)
        ignored = set(diff.ignored)
        notes = [word(diff.note)] if diff.note else []
        files = [c for c in diff.changes if "dir" not in (c.before.kind, c.after.kind)]
        if not files and diff.turn.refs:
            return plain([*notes, say("diff_only_refs", refs=views.refs_moved(diff.turn.refs))])
        body = patch(views.patch_text(diff.changes, ignored, engine.load).split("\n")[:-1], color=self.color)
        return Text("\n").join([plain(notes), body, plain(views.left_out_lines(diff.changes, ignored))])

    def _plan(self, command: Command) -> Plan:
        engine, session_id = self.engine, self.session_id
        words = command.words
        if command.name == ROLLBACK:
            if not command.confirm:
                return engine.plan_rollback(session_id, words[0])
            # Pinned to the head the preview saw (else to the head on screen): a turn that arrived since
            # is refused with the CLI's own words, and nothing changes.
            seen = self.head
            if self.pending is not None and confirms(command, self.pending.command):
                seen = self.pending.plan.head_from
            expect = short_id(seen) if seen else "0"
            return engine.plan_rollback(session_id, words[0], expect_head=expect, confirming=True)
        if command.name == "undo":
            turn, from_turn = (None, words[1]) if words and words[0] == "from" else (words[0] if words else None, None)
            return engine.plan_undo(session_id, turn=turn, from_turn=from_turn, force="--force" in command.flags)
        if command.name == "revert":
            return engine.plan_revert(words[0], anyway="--anyway" in command.flags)
        return engine.plan_redo(session_id)

    def _take_back(self, command: Command) -> None:
        """Preview a plan (nothing changes), or apply it: the CLI's take-back flow, asked on screen."""
        engine = self.engine
        pending = self.pending
        if command.confirm and command.name != ROLLBACK and pending and confirms(command, pending.command):
            plan = pending.plan  # what the preview showed, as the CLI's prompt applies it
        else:
            plan = self._plan(command)
        with self.worded():
            lines = []
            if plan.status == "applying":
                lines.append(say("operation_goes_on", kind=text.op_noun(plan.kind), op=short_id(plan.id)))
            shown = [row.path for row in plan.rows if row.conflict or row.acts]
            hidden = engine.hidden_paths(plan.session_id, shown)
            lines += text.plan_lines(plan, engine.load, diff_limit=engine.config.diff_lines, hidden=hidden)
            if not command.confirm and plan.kind == ROLLBACK:
                if "--diff" in command.flags:
                    changes = views.plan_changes(plan, engine.load)
                    ignored = set(engine.hidden_paths(plan.session_id, [change.path for change in changes]))
                    lines += views.patch_text(changes, ignored, engine.load).splitlines()
                    lines += views.left_out_lines(changes, ignored)
                else:
                    lines += views.going_back_lines(plan, engine.load, diff_flag="--diff")
            force_only = plan.status != "applying" and not plan.acting_rows and plan.force_only_rows
            if force_only:
                lines.append(text.force_only_line(plan))
        if not command.confirm:
            self.show_output(patch(lines, color=self.color))
            self._ask(None if force_only else Pending(command, plan))
            return
        self._ask(None)
        result = engine.apply(plan)
        with self.worded():
            lines += text.result_lines(result)
        self.show_output(patch(lines, color=self.color))
        self.reload()

    # -- keys ----------------------------------------------------------------------------------------------------

    def action_command_line(self) -> None:
        if isinstance(self.screen, SessionPicker):
            self.screen.dismiss(None)  # "/" leaves the session list for the command line, as it does anywhere
        command_line = self.query_one(CommandLine)
        # At once, not after the keys already typed (as Widget.focus would): typed fast, "/history" would
        # otherwise reach the tree as the keys r (revert) and y (confirm).
        self.screen.set_focus(command_line)
        command_line.value = "/"
        command_line.cursor_position = 1

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """On the command line, "/" is a character of the command (a path): it goes there in its turn,
        after the keys typed before it (the command line reads them from its own queue)."""
        return not (action == "command_line" and isinstance(self.screen.focused, CommandLine))

    def action_quit_app(self) -> None:
        self.exit(0)

    def action_revert_selected(self) -> None:
        call = self.selected_call()
        turn = self.selected_turn()
        if call is not None:
            self.run_command(Command("revert", (short_id(call.id),)))
        elif turn is not None:
            with self.worded():
                self.show_output(plain([say("tui_no_call_selected", number=turn.number)]), refused=True)

    def action_undo_selected(self) -> None:
        turn = self.selected_turn()
        self.run_command(Command("undo", (str(turn.number),) if turn is not None else ()))

    def action_confirm(self) -> None:
        if self.pending is not None:
            self.run_command(self.pending.command._replace(confirm=True))

    def action_decline(self) -> None:
        if self.pending is not None:
            self._ask(None)
            with self.worded():
                self.show_output(plain([say("declined_no", nothing=Message("nothing_changed"))]))

    @on(Button.Pressed, "#yes")
    def _yes(self) -> None:
        self.action_confirm()

    @on(Button.Pressed, "#no")
    def _no(self) -> None:
        self.action_decline()

    # -- sessions ------------------------------------------------------------------------------------------------

    def _pick_session(self) -> None:
        engine = self.engine
        sessions = engine.sessions()
        defaults = engine.default_sessions(sessions)
        with self.worded():
            rows = [
                (
                    session.id,
                    text.session_line(
                        session,
                        engine.project_of(session),
                        turns=len(engine.log(session.id)),
                        default=session.id in defaults,
                    ),
                )
                for session in sessions
            ]
            heading = say("tui_sessions_title")
        self.push_screen(SessionPicker(heading, rows, self.session_id), self._switch_session)

    def _switch_session(self, session_id: str | None) -> None:
        if session_id is None or session_id == self.session_id:
            return
        self.session_id = self.engine.session(session_id).id
        self._ask(None)
        self._relabel()
        self.query_one("#tree", Rows).highlighted = None
        self.reload()
        self.show_node()


__all__ = ["CommandLine", "Pending", "Rows", "SessionPicker", "TurnbackApp"]

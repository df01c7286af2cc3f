"""``turnback tui`` in a real terminal (tmux): what the screen shows, the keys a user types, the bytes on disk."""

from __future__ import annotations

import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import cli_env, tree_state
from tests.history.helpers import cli_turn, log_json, new_session, short_id

TMUX = shutil.which("tmux")


def _no_signal_blocked() -> None:
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


class Terminal:
    """A tmux server of its own (its socket in the test's folder) running one window of 100×30."""

    def __init__(self, socket: Path):
        assert TMUX is not None
        self.base = [TMUX, "-S", str(socket)]

    def tmux(self, *args: str) -> str:
        # The tmux server is started by the first of these: with no signal blocked, whatever this test process
        # blocks (after the browser tests in the same worker, SIGCHLD was), as in a user's terminal.
        done = subprocess.run(
            [*self.base, *args], capture_output=True, text=True, timeout=30, preexec_fn=_no_signal_blocked
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def start(self, command: list[str], env: dict[str, str], cwd: Path, exit_file: Path) -> None:
        # A shell in the pane waits for the command and writes its exit status to *exit_file*: waitpid needs
        # no signal, where tmux's own record of it does (on CI, a pane was seen dead with no status).
        waits = f'"$@"; echo $? > {shlex.quote(str(exit_file))}'
        shell = ["/bin/sh", "-c", waits, "sh", *command]
        line = shlex.join(["env", "-i", *(f"{key}={value}" for key, value in env.items()), *shell])
        self.tmux("new-session", "-d", "-x", "100", "-y", "30", "-s", "tb", "-c", str(cwd), line)
        self.tmux("set-option", "-t", "tb", "remain-on-exit", "on")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "tb")

    def wait_for(self, found: Callable[[str], bool], what: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            shown = self.screen()
            if found(shown):
                return shown
            if time.monotonic() > deadline:
                raise AssertionError(f"the terminal never showed {what}:\n{shown}")
            time.sleep(0.1)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "tb", "-l", text)
        self.tmux("send-keys", "-t", "tb", "Enter")

    def processes(self) -> str:
        """The pane's processes and their states (``ps``), for a failure's report."""
        pane = self.tmux("display-message", "-p", "-t", "tb", "#{pane_pid}").strip()
        listed = subprocess.run(["ps", "-o", "pid,stat,etime,args", "--ppid", pane, "-p", pane], capture_output=True)
        return listed.stdout.decode(errors="replace")

    def exit_status(self, exit_file: Path, typed: str) -> str:
        """The exit status the pane's shell wrote (see :meth:`start`) once the TUI ended on *typed*."""
        deadline = time.monotonic() + 20
        while not exit_file.exists() or not exit_file.read_text():
            assert time.monotonic() < deadline, f"turnback tui did not end on {typed}:\n{self.processes()}"
            time.sleep(0.1)
        return exit_file.read_text()

    def kill(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def terminal(tmp_path: Path) -> Terminal:
    if TMUX is None:
        pytest.skip("tmux is not installed (.ci/run installs it: apt-get install tmux)")
    opened = Terminal(tmp_path / "tmux.sock")
    yield opened  # type: ignore[misc]
    opened.kill()


def test_history_then_rollback_confirm_in_a_real_terminal(cli, home: Path, project: Path, terminal: Terminal) -> None:  # type: ignore[no-untyped-def]
    sid = new_session(cli)
    cli_turn(cli, sid, "one", ("write", "README.md", b"one\n"))
    after_one = tree_state(project)
    cli_turn(cli, sid, "two", ("write", "README.md", b"two\n"), ("write", "new.txt", b"new\n"))
    t1 = short_id(log_json(cli, sid)["turns"][0]["id"])

    env = cli_env(home, {"TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"})
    exit_file = home / "tui-exit-status"
    terminal.start([sys.executable, "-m", "turnback", "tui", "--session", sid], env, project, exit_file)
    terminal.wait_for(lambda shown: "turn 2" in shown and "[head]" in shown, "the history tree")

    terminal.type("/help")  # each command typed as one burst, as a paste sends it
    terminal.wait_for(lambda shown: "commands (Tab completes" in shown, "/help")
    terminal.type("/history")
    shown = terminal.wait_for(lambda shown: "commands (Tab" not in shown, "/history in place of /help")
    assert f"turn 1  {t1}  one" in shown
    assert "r Revert" in shown.splitlines()[-1]  # the key help line, at the bottom of an 80×24-or-wider screen

    terminal.type("/rollback 1")
    terminal.wait_for(lambda shown: "/rollback 1 confirm applies it" in shown, "the rollback preview")
    assert (project / "README.md").read_bytes() == b"two\n", terminal.screen()  # a preview changes nothing

    terminal.type("/rollback 1 confirm")
    terminal.wait_for(lambda shown: "rolled back: " in shown, "the rollback's result")
    assert tree_state(project) == after_one
    assert log_json(cli, sid)["head"] == log_json(cli, sid)["turns"][0]["id"]

    terminal.tmux("send-keys", "-t", "tb", "q")
    assert terminal.exit_status(exit_file, "q") == "0\n", terminal.screen()


def test_lang_picks_the_language_of_every_label_in_a_real_terminal(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path, terminal: Terminal
) -> None:
    sid = new_session(cli)
    cli_turn(cli, sid, "one", ("write", "README.md", b"one\n"))
    env = cli_env(home, {"TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"})
    exit_file = home / "tui-exit-status"
    terminal.start([sys.executable, "-m", "turnback", "tui", "--lang", "ja"], env, project, exit_file)
    shown = terminal.wait_for(lambda shown: "ターン 1" in shown, "the history tree in Japanese")
    assert "r 元に戻す" in shown.splitlines()[-1]  # the key help line
    terminal.type("/quit")
    assert terminal.exit_status(exit_file, "/quit") == "0\n", terminal.screen()

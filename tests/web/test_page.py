"""The web page in a real browser: Debian's chromium, headless, driven by Playwright, against a real
``turnback serve`` on a project the CLI recorded. Every take-back is checked by the bytes on disk after it.

``TURNBACK_SCREENSHOTS=1`` makes ``test_screenshots_of_the_main_views`` write docs/web/*.png (the README's
pictures); without it they go to the test's temp folder.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, ConsoleMessage, Locator, Page

import turnback
from tests.conftest import ROOT, TEST_KEY, run_cli
from tests.web.serving import Served, serve
from turnback.catalog import Message, word

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 15_000

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra: make test")
pytest.importorskip("uvicorn", reason="turnback serve needs the web extra (in dev): make test")


def _chromium() -> str:
    """Debian's chromium; installed with apt-get when missing (as .ci/run does), else the test is skipped."""
    why = "apt-get install chromium needs root"
    if not Path(CHROMIUM).exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        # The lock waited for: the suite's other worker may be installing it at the same moment.
        install = ["apt-get", "-o", "DPkg::Lock::Timeout=900", "install", "-y", "chromium"]
        done = subprocess.run(install, capture_output=True, text=True, timeout=1200)
        why = f"apt-get install chromium ended with {done.returncode}: {done.stderr.strip()[-300:]}"
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing and could not be installed ({why})")
    return CHROMIUM


@pytest.fixture
def served(home: Path) -> Iterator[Served]:
    server = serve(home)
    yield server
    assert server.stop() == 0


@contextlib.contextmanager
def chromium(profile: Path, locale: str = "en-US") -> Iterator[BrowserContext]:
    """Headless chromium with a fresh profile, asking for pages in *locale*, 1100 px wide."""
    executable = _chromium()
    with playwright_api.sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            headless=True,
            args=CHROMIUM_ARGS,
            locale=locale,
            viewport={"width": 1100, "height": 900},
        )
        context.set_default_timeout(TIMEOUT_MS)
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def browser_context(tmp_path: Path) -> Iterator[BrowserContext]:
    with chromium(tmp_path / "profile") as context:
        yield context


@pytest.fixture
def page(browser_context: BrowserContext, served: Served, project: Project) -> Iterator[Page]:
    """The page of *project*, opened from the token address; an error in the console (a CSP refusal, a script
    error) fails the test."""
    opened = browser_context.new_page()
    errors: list[str] = []

    def console(message: ConsoleMessage) -> None:
        # A refusal (409, 423) or a stopped server is shown on the page, and chromium logs its request too.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            errors.append(message.text)

    opened.on("console", console)
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.goto(served.url)
    opened.wait_for_selector("[data-turn]")
    yield opened
    assert errors == []


@dataclass
class Project:
    root: Path
    session: str
    home: Path
    calls: list[str] = field(default_factory=list)  # the fixture's calls, in order

    def cli(self, *args: str, stdin: bytes = b"") -> str:
        result = run_cli(self.home, *args, cwd=self.root, stdin=stdin)
        assert result.rc == 0, (args, result.out, result.err)
        return result.out.strip()

    def turn(self, message: str, *steps: tuple[str, ...]) -> list[str]:
        """A turn of *steps*, recorded by the engine as the CLI's verbs do (``("edit", PATH, OLD, NEW)``,
        ``("write", PATH, TEXT)``), from another process than the server's; returns each call's id."""
        with turnback.Engine.open(str(self.home), key_secret=TEST_KEY, try_keyring=False) as engine:
            engine.begin_turn(self.session, message)
            calls = []
            for verb, path, *rest in steps:
                if verb == "write":
                    call = engine.write(self.session, path, rest[0].encode(), cwd=str(self.root))
                else:
                    call = engine.edit(self.session, path, rest[0], rest[1], cwd=str(self.root))
                calls.append(call.id)
            engine.end_turn(self.session)
        return calls


@pytest.fixture
def project(home: Path, tmp_path: Path) -> Project:
    """Two turns, recorded by the engine: turn 1 edits a.txt and writes new.txt; turn 2 edits b.txt."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_bytes(b"one\ntwo\nthree\n")
    (root / "b.txt").write_bytes(b"bee\n")
    with turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False) as engine:
        session = engine.new_session(str(root), title="fix parser").id
    made = Project(root, session, home)
    made.calls = made.turn(
        "rename two",
        ("edit", "a.txt", "two", "TWO"),
        ("write", "new.txt", "created by the agent\n"),
    )
    made.calls += made.turn("shout three", ("edit", "b.txt", "bee", "BEE"))
    return made


def block(page: Page, call: str) -> Locator:
    return page.locator(f'[data-call-id="{call}"]')


def dialog(page: Page) -> Locator:
    found = page.get_by_role("dialog")
    found.wait_for()
    return found


def settled(page: Page) -> None:
    """Waits until no load of the session is in flight: its re-render would replace the buttons a click aims at."""
    expect(page.locator("#session")).not_to_have_attribute("aria-busy", "true")


def expect(locator: Locator):  # type: ignore[no-untyped-def]  # (playwright's assertion classes are private)
    return playwright_api.expect(locator)


# -- seeing ----------------------------------------------------------------------------------------------------------


def test_the_token_address_opens_the_newest_session_with_its_turns_and_call_blocks(
    page: Page, project: Project
) -> None:
    assert "token" not in page.url
    expect(page.locator("#session-list a")).to_have_count(1)
    expect(page.locator("#session-list a")).to_contain_text("fix parser")
    turns = page.locator("[data-turn]")
    expect(turns).to_have_count(2)
    assert [turns.nth(i).get_attribute("data-turn") for i in range(2)] == ["2", "1"]  # newest first
    expect(page.locator('[data-turn="2"]')).to_contain_text("head")
    first = page.locator('[data-turn="1"] [data-call-id]')
    expect(first).to_have_count(2)
    edit, write = (block(page, call) for call in project.calls[:2])
    expect(edit.locator(".tool")).to_have_text("Edit file")
    expect(edit.locator(".target")).to_have_text("a.txt")
    expect(edit.locator(".state")).to_have_text("applied")
    expect(write.locator(".tool")).to_have_text("Write file")
    expect(write.locator(".target")).to_have_text("new.txt")


def test_sessions_of_every_project_are_listed_most_recently_active_first(
    page: Page, project: Project, tmp_path: Path
) -> None:
    other_root = tmp_path / "other"
    other_root.mkdir()
    with turnback.Engine.open(str(project.home), key_secret=TEST_KEY, try_keyring=False) as engine:
        other = engine.new_session(str(other_root), title="write docs").id
    Project(other_root, other, project.home).turn("docs", ("write", "docs.md", "# docs\n"))
    sessions = page.locator("#session-list a")
    expect(sessions).to_have_count(2)  # it arrived live
    expect(sessions.nth(0)).to_contain_text("write docs")
    expect(sessions.nth(1)).to_contain_text("fix parser")
    sessions.nth(0).click()
    expect(page.locator("[data-turn]")).to_have_count(1)
    expect(page.locator('[data-turn="1"]')).to_contain_text("docs.md")
    assert "s=" + other in page.url


def test_a_block_expands_to_its_diff_unified_or_split_and_shows_its_input(page: Page, project: Project) -> None:
    edit = block(page, project.calls[0])
    edit.locator(".call-toggle").click()
    diff = edit.locator("pre.diff")
    expect(diff).to_contain_text("-two")
    expect(diff).to_contain_text("+TWO")
    edit.get_by_role("button", name="Split", exact=True).click()
    split = edit.locator("table.diff")
    expect(split.locator("td.d-del")).to_have_text("two")
    expect(split.locator("td.d-add")).to_have_text("TWO")
    edit.get_by_role("button", name="Show input", exact=True).click()
    expect(edit.locator("pre.input")).to_contain_text('"new": "TWO"')


def test_a_binary_file_says_so_instead_of_a_diff(page: Page, project: Project) -> None:
    project.cli("turn", "begin", "--session", project.session, "--message", "logo")
    wrote = run_cli(
        project.home,
        "--json",
        "write",
        "--session",
        project.session,
        "logo.bin",
        cwd=project.root,
        stdin=bytes(range(256)),
    )
    project.cli("turn", "end", "--session", project.session)
    call = str(wrote.json()["call"]["id"])  # type: ignore[index]
    block(page, call).locator(".call-toggle").click()
    expect(block(page, call).locator(".binary")).to_contain_text("Binary files differ")
    expect(block(page, call).locator("pre.diff")).to_have_count(0)


def test_a_file_too_large_to_diff_says_so_instead_of_a_diff(page: Page, project: Project) -> None:
    project.cli("turn", "begin", "--session", project.session, "--message", "a big log")
    text = b"a line of text\n" * (9 << 20 >> 4)  # 9 MiB: past the 8 MiB a diff is made of
    wrote = run_cli(
        project.home, "--json", "write", "--session", project.session, "big.txt", cwd=project.root, stdin=text
    )
    assert wrote.rc == 0, wrote.err
    project.cli("turn", "end", "--session", project.session)
    call = str(wrote.json()["call"]["id"])  # type: ignore[index]
    block(page, call).locator(".call-toggle").click()
    expect(block(page, call).locator(".binary")).to_contain_text("too large to show a diff")
    expect(block(page, call).locator("pre.diff")).to_have_count(0)


def test_a_call_whose_after_never_came_says_it_may_be_cut_short(page: Page, project: Project) -> None:
    with turnback.Engine.open(str(project.home), key_secret=TEST_KEY, try_keyring=False) as engine:
        engine.begin_turn(project.session, "harness write")
        handle = engine.begin_call(project.session, "Write", {"file_path": "half.txt"}, cwd=str(project.root))
        handle.before("half.txt")
        (project.root / "half.txt").write_bytes(b"half\n")
        engine.end_turn(project.session)  # no after: the harness died mid-call
    cut = page.locator('[data-turn="3"] [data-call-id]')
    expect(cut.locator(".state")).to_contain_text(["may be cut short"])
    expect(cut.locator(".tool")).to_have_text("Write file")


def _wait_for_jobs_to_end(project: Project) -> None:
    deadline = time.monotonic() + 30
    while "running" in project.cli("jobs", "--session", project.session):
        assert time.monotonic() < deadline, "the background job never ended"
        time.sleep(0.2)


def test_blocks_of_a_denied_call_a_shell_command_and_a_background_job_with_their_states_and_counts(
    page: Page, project: Project
) -> None:
    with turnback.Engine.open(str(project.home), key_secret=TEST_KEY, try_keyring=False) as engine:
        engine.begin_turn(project.session, "try a write")
        denied = engine.begin_call(project.session, "Write", {"file_path": "x.txt"}, cwd=str(project.root))
        denied.end(failed=Message("call_denied_because", why="the user said no"))  # as hooks/claude.py does
        engine.end_turn(project.session)
    project.cli("config", "set", "snapshot.exclude", "*.log")
    project.cli("turn", "begin", "--session", project.session, "--message", "commands")
    project.cli("exec", "--session", project.session, "--", "sh", "-c", "echo log > run.log; echo more >> b.txt")
    project.cli("exec", "--session", project.session, "--background", "--", "sh", "-c", "echo job > job.txt")
    _wait_for_jobs_to_end(project)
    project.cli("turn", "end", "--session", project.session)
    expect(block(page, denied.id).locator(".state")).to_have_text(["denied"])
    expect(block(page, denied.id).locator(".tool")).to_have_text("Write file")
    expect(page.locator('[data-turn="4"] [data-call-id]')).to_have_count(2)  # (.all() does not wait)
    command, job = page.locator('[data-turn="4"] [data-call-id]').all()
    expect(command.locator(".tool")).to_have_text("Shell command")
    expect(command.locator(".target")).to_have_text("sh -c 'echo log > run.log; echo more >> b.txt'")
    expect(command.locator(".state")).to_have_text(["not covered"])
    expect(command.locator(".counts")).to_have_text("+1 −0")  # b.txt's line; run.log has no copy to count
    expect(job.locator(".tool")).to_have_text("Background job")
    expect(job.locator(".target")).to_have_text("sh -c 'echo job > job.txt'")
    # Its end and the turn's may come within one poll of the events: until the page reads them, the job shows
    # running (two states: running, may be cut short); the list form waits for the one state, as the line above.
    expect(job.locator(".state")).to_have_text(["applied"])
    expect(job.locator(".counts")).to_have_text("+1 −0")


def test_a_call_whose_copies_the_cap_dropped_can_no_longer_be_reverted_and_names_its_files(
    page: Page, project: Project
) -> None:
    project.cli("turn", "begin", "--session", project.session, "--message", "a command")
    project.cli("exec", "--session", project.session, "--", "sh", "-c", "echo more >> b.txt")
    project.cli("turn", "end", "--session", project.session)
    project.cli("config", "set", "store.max_mib", "1")
    for number in range(4):  # 1.6 MB of copies past a 1 MiB cap: the oldest calls lose theirs
        project.turn(f"big {number}", ("write", f"big{number}.bin", os.urandom(400_000).hex()[:400_000]))
    first, command = block(page, project.calls[0]), page.locator('[data-turn="3"] [data-call-id]')
    expect(first.locator(".state")).to_have_text("can no longer be reverted")
    expect(first.locator(".revert-icon")).to_have_count(0)
    expect(command.locator(".state")).to_have_text("can no longer be reverted")
    expect(command.locator(".tool")).to_have_text("Shell command")
    expect(command.locator(".target")).to_have_text("b.txt")  # its command went with its input
    expect(page.locator('[data-turn="7"] .state')).to_have_text("applied")


def test_the_header_revert_icon_shows_on_hover_and_on_keyboard_focus(page: Page, project: Project) -> None:
    edit = block(page, project.calls[0])
    icon = edit.get_by_role("button", name="Revert", exact=True)
    page.mouse.move(0, 0)
    expect(icon).to_have_css("opacity", "0")
    edit.locator(".call-header").hover()
    expect(icon).to_have_css("opacity", "1")
    page.mouse.move(0, 0)
    edit.locator(".call-toggle").focus()
    expect(icon).to_have_css("opacity", "1")


# -- reverting a call ------------------------------------------------------------------------------------------------


def test_revert_asks_first_with_the_host_and_the_diff_then_restores_the_file_and_shows_reverted(
    page, project: Project
) -> None:
    call = project.calls[2]
    block(page, call).locator(".call-toggle").click()
    block(page, call).get_by_role("button", name="Revert", exact=True).last.click()
    asked = dialog(page)
    expect(asked).to_contain_text(os.uname().nodename)
    expect(asked.locator(".diff")).to_contain_text("+bee")
    assert (project.root / "b.txt").read_bytes() == b"BEE\n"  # nothing changed before the confirm
    asked.get_by_role("button", name="Revert", exact=True).click()
    expect(block(page, call).locator(".state")).to_have_text("Reverted")
    assert (project.root / "b.txt").read_bytes() == b"bee\n"


def test_escape_cancels_the_confirmation_and_changes_nothing(page: Page, project: Project) -> None:
    call = project.calls[2]
    block(page, call).locator(".call-toggle").focus()
    page.keyboard.press("Tab")  # the header's Revert icon
    page.keyboard.press("Enter")
    dialog(page)
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog")).to_have_count(0)
    assert (project.root / "b.txt").read_bytes() == b"BEE\n"
    expect(block(page, call).locator(".state")).to_have_text("applied")


def test_a_revert_with_the_keyboard_alone(page: Page, project: Project) -> None:
    call = project.calls[2]
    block(page, call).locator(".call-toggle").focus()
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    asked = dialog(page)
    expect(asked.get_by_role("button", name="Revert", exact=True)).to_be_focused()
    page.keyboard.press("Enter")
    expect(block(page, call).locator(".state")).to_have_text("Reverted")
    assert (project.root / "b.txt").read_bytes() == b"bee\n"


def test_a_created_file_offers_delete(page: Page, project: Project) -> None:
    call = project.calls[1]
    block(page, call).get_by_role("button", name="Revert", exact=True).click()
    asked = dialog(page)
    expect(asked).to_contain_text("new.txt")
    expect(asked.get_by_role("button", name="Revert", exact=True)).to_have_count(0)
    asked.get_by_role("button", name="Delete", exact=True).click()
    expect(block(page, call).locator(".state")).to_have_text("Reverted")
    assert not (project.root / "new.txt").exists()


def test_a_created_file_changed_since_offers_delete_anyway(page: Page, project: Project) -> None:
    (project.root / "new.txt").write_bytes(b"the user's words\n")
    call = project.calls[1]
    block(page, call).get_by_role("button", name="Revert", exact=True).click()
    asked = dialog(page)
    expect(asked.get_by_role("button", name="Delete", exact=True)).to_have_count(0)
    asked.get_by_role("button", name="Delete Anyway", exact=True).click()
    sure = page.get_by_role("dialog").filter(has_text="Sure?")
    sure.get_by_role("button", name="Delete Anyway", exact=True).click()
    expect(block(page, call).locator(".state")).to_have_text("Reverted")
    assert not (project.root / "new.txt").exists()


def test_a_conflict_shows_the_diff_from_now_back_names_the_later_call_then_restore_anyway(
    page, project: Project
) -> None:
    later = project.turn("again", ("edit", "a.txt", "three", "3"))[0]
    page.wait_for_selector('[data-turn="3"]')  # it arrived live
    call = project.calls[0]
    block(page, call).get_by_role("button", name="Revert", exact=True).click()
    asked = dialog(page)
    expect(asked).to_contain_text("a.txt changed since the call")
    expect(asked.locator(".diff")).to_contain_text("-3")
    expect(asked.locator(".diff")).to_contain_text("+two")
    link = asked.locator("a.later-call")
    expect(link).to_contain_text(later[:16])
    expect(asked.get_by_role("button", name="Revert", exact=True)).to_have_count(0)
    asked.get_by_role("button", name="Restore Anyway", exact=True).click()
    sure = page.get_by_role("dialog").filter(has_text="Sure?")
    assert (project.root / "a.txt").read_bytes() == b"one\nTWO\n3\n"  # not before the second confirmation
    sure.get_by_role("button", name="Restore Anyway", exact=True).click()
    expect(block(page, call).locator(".state")).to_have_text("Reverted")
    assert (project.root / "a.txt").read_bytes() == b"one\ntwo\nthree\n"


def test_the_link_to_the_later_call_opens_its_block(page: Page, project: Project) -> None:
    later = project.turn("again", ("edit", "a.txt", "three", "3"))[0]
    page.wait_for_selector(f'[data-call-id="{later}"]')
    block(page, project.calls[0]).get_by_role("button", name="Revert", exact=True).click()
    dialog(page).locator("a.later-call").click()
    expect(page.get_by_role("dialog")).to_have_count(0)
    expect(block(page, later).locator("pre.diff")).to_contain_text("+3")
    assert (project.root / "a.txt").read_bytes() == b"one\nTWO\n3\n"


# -- rollback, redo, resend ------------------------------------------------------------------------------------------


def test_rollback_previews_files_and_leaving_turns_then_applies_with_the_head_it_saw(
    page: Page, project: Project
) -> None:
    page.locator('[data-turn="1"]').get_by_role("button", name="Rollback to turn 1", exact=True).click()
    asked = dialog(page)
    expect(asked).to_contain_text("b.txt")
    expect(asked.locator(".leaving")).to_have_text("Turn 2")
    assert (project.root / "b.txt").read_bytes() == b"BEE\n"
    asked.get_by_role("button", name="Roll Back", exact=True).click()
    expect(page.locator('[data-turn="2"]')).to_contain_text("abandoned")
    expect(page.locator('[data-turn="1"]')).to_contain_text("head")
    assert (project.root / "b.txt").read_bytes() == b"bee\n"
    assert (project.root / "a.txt").read_bytes() == b"one\nTWO\nthree\n"


def test_a_rollback_whose_head_moved_since_the_preview_is_refused_and_changes_nothing(
    page: Page, project: Project
) -> None:
    page.locator('[data-turn="1"]').get_by_role("button", name="Rollback to turn 1", exact=True).click()
    asked = dialog(page)
    project.turn("meanwhile", ("write", "c.txt", "sea\n"))
    asked.get_by_role("button", name="Roll Back", exact=True).click()
    expect(page.get_by_role("alert")).to_be_visible()
    assert (project.root / "b.txt").read_bytes() == b"BEE\n"
    assert (project.root / "c.txt").read_bytes() == b"sea\n"


def test_undo_is_offered_on_the_newest_turn_asks_with_its_files_then_takes_it_back(
    page: Page, project: Project
) -> None:
    newest, older = page.locator('[data-turn="2"]'), page.locator('[data-turn="1"]')
    expect(older.get_by_role("button", name="Undo", exact=True)).to_have_count(0)  # a stack: the newest first
    newest.get_by_role("button", name="Undo", exact=True).click()
    asked = dialog(page)
    expect(asked).to_contain_text(f"Undo turn 2 on {os.uname().nodename}? These files go back:")
    expect(asked).to_contain_text("b.txt")
    assert (project.root / "b.txt").read_bytes() == b"BEE\n"  # nothing before the confirmation
    asked.get_by_role("button", name="Undo", exact=True).click()
    expect(newest).to_contain_text("undone")
    assert (project.root / "b.txt").read_bytes() == b"bee\n"
    assert (project.root / "a.txt").read_bytes() == b"one\nTWO\nthree\n"  # turn 1 is kept
    expect(older.get_by_role("button", name="Undo", exact=True)).to_be_visible()  # now the newest not undone
    expect(newest.get_by_role("button", name="Undo", exact=True)).to_have_count(0)


def test_undo_passes_over_a_newest_turn_that_changed_no_file(page: Page, project: Project) -> None:
    """The button is where a plain undo acts (the engine's rule), not on the newest turn whatever it did."""
    project.turn("only talk")
    expect(page.locator('[data-turn="3"]')).to_be_visible()
    expect(page.locator('[data-turn="3"]').get_by_role("button", name="Undo", exact=True)).to_have_count(0)
    page.locator('[data-turn="2"]').get_by_role("button", name="Undo", exact=True).click()
    dialog(page).get_by_role("button", name="Undo", exact=True).click()
    expect(page.locator('[data-turn="2"]')).to_contain_text("undone")
    assert (project.root / "b.txt").read_bytes() == b"bee\n"


def test_an_undo_cancelled_changes_nothing(page: Page, project: Project) -> None:
    page.locator('[data-turn="2"]').get_by_role("button", name="Undo", exact=True).click()
    dialog(page).get_by_role("button", name="Cancel", exact=True).click()
    expect(page.get_by_role("dialog")).to_have_count(0)
    expect(page.locator('[data-turn="2"]')).not_to_contain_text("undone")
    assert (project.root / "b.txt").read_bytes() == b"BEE\n"


def test_an_undone_turn_is_greyed_and_offers_redo(page: Page, project: Project) -> None:
    project.cli("undo", "--session", project.session, "--yes")
    turn = page.locator('[data-turn="2"]')
    expect(turn).to_contain_text("undone")
    expect(turn).to_have_class(re.compile(r"\bundone\b"))
    assert (project.root / "b.txt").read_bytes() == b"bee\n"
    turn.get_by_role("button", name="Redo", exact=True).click()
    dialog(page).get_by_role("button", name="Redo", exact=True).click()
    expect(page.locator('[data-turn="2"]')).not_to_contain_text("undone")
    assert (project.root / "b.txt").read_bytes() == b"BEE\n"


def _resend(page: Page, number: int) -> Locator:
    page.locator(f'[data-turn="{number}"]').get_by_role("button", name="Edit and Resend", exact=True).click()
    return dialog(page)


def test_edit_and_resend_revert_and_send(page: Page, project: Project) -> None:
    asked = _resend(page, 2)
    expect(asked).to_contain_text("b.txt")
    asked.get_by_role("button", name="Revert and Send", exact=True).click()
    expect(page.locator('[data-turn="2"]')).to_contain_text("replaced by an edited message")
    assert (project.root / "b.txt").read_bytes() == b"bee\n"


def test_edit_and_resend_keep_files_and_send(page: Page, project: Project) -> None:
    _resend(page, 2).get_by_role("button", name="Keep Files and Send", exact=True).click()
    expect(page.locator('[data-turn="2"]')).to_contain_text("replaced by an edited message")
    assert (project.root / "b.txt").read_bytes() == b"BEE\n"


def test_edit_and_resend_send_anyway_for_what_cannot_be_reverted(page: Page, project: Project) -> None:
    (project.root / "b.txt").write_bytes(b"the user's bee\n")
    asked = _resend(page, 2)
    expect(asked.locator(".staying")).to_contain_text("b.txt")
    expect(asked.locator(".staying")).to_contain_text("changed")
    asked.get_by_role("button", name="Send Anyway", exact=True).click()
    expect(page.locator('[data-turn="2"]')).to_contain_text("replaced by an edited message")
    assert (project.root / "b.txt").read_bytes() == b"the user's bee\n"


def test_edit_and_resend_lists_a_file_whose_copy_was_dropped_as_staying_and_offers_send_anyway(
    page: Page, project: Project
) -> None:
    project.cli("config", "set", "store.max_mib", "1")
    for number in range(4):  # 1.6 MB of copies past a 1 MiB cap: turn 1's calls lose theirs
        project.turn(f"big {number}", ("write", f"big{number}.bin", os.urandom(400_000).hex()[:400_000]))
    expect(block(page, project.calls[0]).locator(".state")).to_have_text("can no longer be reverted")
    asked = _resend(page, 1)
    staying = asked.locator(".staying").filter(has_text="a.txt")
    expect(staying).to_contain_text("stays as it is: copy dropped by the size cap")
    asked.get_by_role("button", name="Send Anyway", exact=True).click()
    expect(page.locator('[data-turn="1"]')).to_contain_text("replaced by an edited message")
    assert (project.root / "a.txt").read_bytes() == b"one\nTWO\nthree\n"


def test_edit_and_resend_cancel_changes_nothing(page: Page, project: Project) -> None:
    asked = _resend(page, 1)
    expect(asked.locator(".resend-files li")).to_have_text(
        ["a.txt calls: 1 +1 −1", "new.txt calls: 1 +0 −1", "b.txt calls: 1 +1 −1"]
    )
    expect(asked.get_by_role("button", name="Send Anyway", exact=True)).to_have_count(0)
    asked.get_by_role("button", name="Cancel", exact=True).click()
    expect(page.get_by_role("dialog")).to_have_count(0)
    expect(page.locator("[data-turn]")).to_have_count(2)
    assert (project.root / "a.txt").read_bytes() == b"one\nTWO\nthree\n"
    assert (project.root / "new.txt").exists()


def test_the_files_view_lists_each_file_with_its_state(page: Page, project: Project) -> None:
    page.get_by_role("tab", name="Files").click()
    files = page.locator(".files li")
    expect(files).to_have_count(3)
    expect(files.filter(has_text="new.txt")).to_contain_text("created in turn 1")
    expect(files.filter(has_text="b.txt")).to_contain_text("as of turn 2")


def test_the_files_view_says_in_which_turn_a_file_was_deleted(page: Page, project: Project) -> None:
    project.cli("turn", "begin", "--session", project.session, "--message", "tidy")
    project.cli("rm", "--session", project.session, "a.txt")
    project.cli("turn", "end", "--session", project.session)
    page.wait_for_selector('[data-turn="3"]')
    page.get_by_role("tab", name="Files").click()
    expect(page.locator(".files li").filter(has_text="a.txt")).to_contain_text("deleted in turn 3")
    assert not (project.root / "a.txt").exists()


# -- live, busy, disconnected ----------------------------------------------------------------------------------------


def test_a_new_turn_appears_live_without_a_reload(page: Page, project: Project) -> None:
    page.evaluate("window.notReloaded = true")
    project.turn("live one", ("write", "live.txt", "hello\n"))
    expect(page.locator('[data-turn="3"]')).to_contain_text("live one")
    assert page.evaluate("window.notReloaded") is True


def test_the_calls_of_a_running_turn_appear_live_one_by_one(page: Page, project: Project) -> None:
    page.evaluate("window.notReloaded = true")
    holder = subprocess.Popen(["sleep", "60"])
    try:
        project.cli("turn", "begin", "--session", project.session, "--message", "live", "--pid", str(holder.pid))
        expect(page.locator('[data-turn="3"]')).to_contain_text("running")
        for number, name in enumerate(("one.txt", "two.txt"), start=1):
            piped = run_cli(project.home, "write", "--session", project.session, name, cwd=project.root, stdin=b"x\n")
            assert piped.rc == 0, piped.err
            expect(page.locator('[data-turn="3"] [data-call-id]')).to_have_count(number)
        expect(page.locator('[data-turn="3"] [data-call-id] .target')).to_have_text(["one.txt", "two.txt"])
        project.cli("turn", "end", "--session", project.session)
        expect(page.locator('[data-turn="3"]')).not_to_contain_text("running")
    finally:
        holder.kill()
        holder.wait()
    assert page.evaluate("window.notReloaded") is True


def test_buttons_are_disabled_with_the_reason_while_a_turn_runs(page: Page, project: Project) -> None:
    holder = subprocess.Popen(["sleep", "60"])
    try:
        project.cli("turn", "begin", "--session", project.session, "--message", "busy", "--pid", str(holder.pid))
        revert = block(page, project.calls[2]).get_by_role("button", name="Revert", exact=True)
        expect(revert).to_be_disabled()
        expect(page.locator("#busy")).to_contain_text("running")
        assert "running" in (revert.get_attribute("title") or "")
        project.cli("turn", "end", "--session", project.session)
        expect(revert).to_be_enabled()
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("reason", ["compaction", "approval waiting"])
def test_buttons_are_disabled_with_the_reason_while_a_compaction_or_an_approval_runs(
    page: Page, project: Project, reason: str
) -> None:
    holder = subprocess.Popen(["sleep", "60"])
    try:
        project.cli("busy", "start", "--session", project.session, "--pid", str(holder.pid), reason)
        revert = block(page, project.calls[2]).get_by_role("button", name="Revert", exact=True)
        expect(revert).to_be_disabled()
        expect(page.locator("#busy")).to_contain_text(reason)
        rollback = page.get_by_role("button", name="Rollback to turn 1", exact=True)
        expect(rollback).to_be_disabled()
        assert reason in (rollback.get_attribute("title") or "")
        project.cli("busy", "end", "--session", project.session)
        expect(revert).to_be_enabled()
    finally:
        holder.kill()
        holder.wait()


def test_buttons_are_disabled_while_the_connection_is_lost(page: Page, project: Project, served: Served) -> None:
    revert = block(page, project.calls[2]).get_by_role("button", name="Revert", exact=True)
    expect(revert).to_be_enabled()
    served.stop()
    expect(revert).to_be_disabled()
    expect(page.locator("#busy")).to_contain_text("Lost the connection")
    assert "Lost the connection" in (revert.get_attribute("title") or "")


# -- languages, small screens ----------------------------------------------------------------------------------------

LABELS = {
    "zh-CN": ("撤销修改", "已撤销", "删除", "撤销并发送", "保留文件并发送", "仍然发送", "仍然恢复", "仍然删除"),
    "ja": (
        "元に戻す",
        "元に戻し済み",
        "削除",
        "元に戻して送信",
        "ファイルはそのままで送信",
        "このまま送信",
        "このまま復元",
        "このまま削除",
    ),
}


@pytest.mark.parametrize("lang", sorted(LABELS))
def test_the_language_switch_shows_the_exact_labels(page: Page, project: Project, lang: str) -> None:
    revert, reverted, delete, revert_send, keep_send, send_anyway, restore_anyway, delete_anyway = LABELS[lang]
    created = project.turn("make c", ("write", "c.txt", "sea\n"))[0]
    (project.root / "c.txt").write_bytes(b"the user's sea\n")
    (project.root / "b.txt").write_bytes(b"the user's bee\n")
    page.wait_for_selector('[data-turn="3"]')
    page.get_by_label("Language").select_option(lang)
    expect(page.locator("html")).to_have_attribute("lang", lang)

    def labels_of_revert(call: str) -> list[str]:
        settled(page)
        block(page, call).locator(".revert-icon").click()
        names = dialog(page).locator(".dialog-buttons button").all_inner_texts()
        page.keyboard.press("Escape")
        expect(page.get_by_role("dialog")).to_have_count(0)
        return names

    calls = project.calls
    assert labels_of_revert(calls[1])[:1] == [delete]
    assert labels_of_revert(created)[:1] == [delete_anyway]
    assert labels_of_revert(calls[2])[:1] == [restore_anyway]
    block(page, calls[0]).get_by_role("button", name=revert, exact=True).click()
    dialog(page).get_by_role("button", name=revert, exact=True).click()
    expect(block(page, calls[0]).locator(".state")).to_have_text(reverted)
    assert (project.root / "a.txt").read_bytes() == b"one\ntwo\nthree\n"
    page.locator('[data-turn="2"] .turn-actions button').last.click()
    names = dialog(page).locator(".dialog-buttons button").all_inner_texts()
    assert names[:3] == [revert_send, keep_send, send_anyway]
    page.keyboard.press("Escape")
    assert (project.root / "b.txt").read_bytes() == b"the user's bee\n"


def test_the_dialogs_word_each_rows_action_in_the_chosen_language(page: Page, project: Project) -> None:
    page.get_by_label("Language").select_option("ja")
    expect(page.locator("html")).to_have_attribute("lang", "ja")
    settled(page)
    page.locator('[data-turn="1"]').get_by_role("button", name="ターン 1 までロールバック", exact=True).click()
    expect(dialog(page).locator(".row-action")).to_have_text(["復元"])
    page.keyboard.press("Escape")
    block(page, project.calls[1]).locator(".revert-icon").click()
    expect(dialog(page).locator(".row-action")).to_have_text(["ゴミ箱へ"])
    page.keyboard.press("Escape")
    assert (project.root / "b.txt").read_bytes() == b"BEE\n"
    assert (project.root / "new.txt").exists()


def test_the_default_language_comes_from_the_browser(served: Served, project: Project, tmp_path: Path) -> None:
    with chromium(tmp_path / "japanese", locale="ja-JP") as context:
        japanese = context.new_page()
        japanese.goto(served.url)
        expect(block(japanese, project.calls[0]).locator(".state")).to_have_text("適用済み")
        expect(japanese.locator("html")).to_have_attribute("lang", "ja")
        expect(japanese.get_by_role("button", name="元に戻す", exact=True).first).to_be_attached()


def test_the_page_opened_without_the_token_says_what_to_open_in_the_browsers_language(
    served: Served, tmp_path: Path
) -> None:
    with chromium(tmp_path / "no-token", locale="zh-CN") as context:
        opened = context.new_page()
        opened.goto(served.origin + "/")
        expect(opened.get_by_role("alert")).to_have_text(word(Message("serve_token_missing"), "zh-CN"))


def test_the_page_is_readable_360_px_wide(page: Page, project: Project) -> None:
    page.set_viewport_size({"width": 360, "height": 740})
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 360
    expect(block(page, project.calls[0]).get_by_role("button", name="Revert", exact=True)).to_be_visible()


def _luminance(css_color: str) -> float:
    red, green, blue = (int(part) for part in re.findall(r"\d+", css_color)[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


def _colors(locator: Locator) -> list[str]:
    """(background, text) colour of the element *locator* finds. The page may render a block anew (a live update)
    between finding it and reading its style, and an element out of the document has no computed style: read
    again until it is in it."""
    read = "(e) => e.isConnected ? [getComputedStyle(e).backgroundColor, getComputedStyle(e).color] : null"
    deadline = time.monotonic() + 10
    while (shown := locator.evaluate(read)) is None or not all(shown):
        assert time.monotonic() < deadline, "the element never stayed in the page"
        time.sleep(0.05)
    return list(shown)


def test_the_page_follows_the_light_or_dark_scheme_of_the_system(page: Page, project: Project) -> None:
    backgrounds = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        _, text = _colors(block(page, project.calls[0]).locator(".target"))
        page_background, _ = _colors(page.locator("body"))
        backgrounds[scheme] = _luminance(page_background)
        assert abs(_luminance(page_background) - _luminance(text)) > 0.5, (scheme, page_background, text)
    assert backgrounds["light"] > 0.8 and backgrounds["dark"] < 0.2, backgrounds


def test_screenshots_of_the_main_views(page: Page, project: Project, tmp_path: Path) -> None:
    folder = ROOT / "docs" / "web" if os.environ.get("TURNBACK_SCREENSHOTS") == "1" else tmp_path / "shots"
    folder.mkdir(parents=True, exist_ok=True)
    edit = block(page, project.calls[0])
    edit.locator(".call-toggle").click()
    expect(edit.locator("pre.diff")).to_be_visible()
    page.screenshot(path=str(folder / "history.png"), full_page=True)
    page.emulate_media(color_scheme="dark")
    page.screenshot(path=str(folder / "history-dark.png"), full_page=True)
    page.emulate_media(color_scheme="light")
    page.locator('[data-turn="1"]').get_by_role("button", name="Rollback to turn 1", exact=True).click()
    dialog(page)
    time.sleep(0.2)  # the dialog's backdrop settles
    page.screenshot(path=str(folder / "rollback.png"))
    page.keyboard.press("Escape")
    (project.root / "b.txt").write_bytes(b"the user's bee\n")
    block(page, project.calls[2]).locator(".revert-icon").click()
    dialog(page)
    time.sleep(0.2)
    page.screenshot(path=str(folder / "revert-conflict.png"))
    page.keyboard.press("Escape")
    page.set_viewport_size({"width": 360, "height": 740})
    page.screenshot(path=str(folder / "narrow.png"))
    for name in ("history", "history-dark", "rollback", "revert-conflict", "narrow"):
        assert (folder / f"{name}.png").stat().st_size > 1000

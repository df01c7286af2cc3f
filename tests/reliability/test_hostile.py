"""Hostile paths and races: FIFOs and devices at tracked names, a folder flipped to a link mid-undo, special
mode bits, ownership, and an unsafe trash folder, key file or store folder.

(Links, ``../``, absolute, NUL and ``/proj-evil`` paths and hard links are in
``tests/test_security.py``; this file adds what it does not cover.) Nothing
may block: every CLI run has a deadline, every library call runs in a thread
that must end in time. A restore reads or changes nothing outside the project.
"""

from __future__ import annotations

import ctypes
import os
import signal
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import turnback
from tests.conftest import cli_env, tree_state
from tests.reliability.helpers import assert_no_traceback, files_under, record, run, temp_files
from tests.reliability.scenarios import build_undo, open_engine

DEADLINE = 30.0
SPECIAL_IN_PLACE = "a FIFO, socket or device is in its place; it is left alone"


def within(seconds: float, call: Callable[[], Any]) -> Any:
    """Run *call*; fail (rather than hang) when it has not returned after *seconds* (SIGALRM interrupts a
    blocking open or read, and the handler's exception ends it)."""

    def expired(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"blocked for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return call()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def make_special(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
        return
    try:
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # a character device (the one /dev/null is)
    except PermissionError:
        pytest.skip("cannot make a device node here (not root, or no CAP_MKNOD)")


def special_state(path: Path) -> tuple[int, int]:
    st = path.lstat()
    return st.st_mode, st.st_rdev


def begin(cli) -> str:  # type: ignore[no-untyped-def]
    assert cli("init").rc == 0
    session = cli("session", "new").out.strip()
    assert cli("turn", "begin", "--session", session).rc == 0
    return str(session)


# -- a FIFO or a device at a tracked name -----------------------------------------------------------


@pytest.mark.parametrize(("kind", "how"), [("fifo", "modified"), ("device", "created"), ("device", "modified")])
def test_a_fifo_or_device_at_a_tracked_name_is_skipped_by_undo_without_blocking(  # type: ignore[no-untyped-def]
    cli, project: Path, kind: str, how: str
) -> None:
    name = "made.txt" if how == "created" else "docs/guide.md"
    session = begin(cli)
    assert cli("write", "--session", session, name, stdin=b"the agent's bytes\n").rc == 0
    assert cli("edit", "--session", session, "README.md", "--old", "line two", "--new", "line 2").rc == 0
    assert cli("turn", "end", "--session", session).rc == 0
    (project / name).unlink()
    make_special(project / name, kind)
    before = special_state(project / name)

    for args in (("undo", "--dry-run", "--json"), ("undo", "--yes", "--json")):
        result = run(project.parent / "store", *args, cwd=project, timeout=DEADLINE)
        assert_no_traceback(result)
        assert result.rc == 0, result.err
        rows = {row["path"]: row for row in result.json()["rows"]}
        assert rows[name]["action"] == "skip" and rows[name]["reason"] == SPECIAL_IN_PLACE, rows[name]
    assert rows[name]["status"] == "skipped" and rows["README.md"]["status"] == "done"
    assert special_state(project / name) == before
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"
    record("hostile-special-undo", kind=kind, how=how, blocked=False)


def test_a_fifo_swapped_in_between_plan_and_apply_is_skipped_without_blocking(
    engine: turnback.Engine, project: Path
) -> None:
    session = engine.new_session(str(project))
    engine.begin_turn(session.id, "two writes")
    engine.write(session.id, "docs/guide.md", b"agent guide\n")
    engine.write(session.id, "made.txt", b"agent made\n")
    engine.end_turn(session.id)
    plan = engine.plan_undo(session.id)
    for rel in ("docs/guide.md", "made.txt"):
        (project / rel).unlink()
        os.mkfifo(project / rel)
    result = within(DEADLINE, lambda: engine.apply(plan))
    for row in result.plan.rows:
        assert row.status == "skipped" and row.note and row.note.code == "changed_since_preview", row
        assert stat.S_ISFIFO((project / row.path).lstat().st_mode)
    assert not [p for p in Path(engine.store.trash_root).rglob("*") if p.is_file()]
    record("hostile-special-undo", kind="fifo", how="swapped in between plan and apply", blocked=False)


def test_fifos_and_devices_during_an_exec_scan_do_not_block_and_are_not_covered(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path
) -> None:
    os.mkfifo(project / "pipe")
    make_special(project / "nulldev", "device")
    (project / "tracked.txt").write_bytes(b"a regular file the command replaces with a FIFO\n")
    session = begin(cli)
    script = "echo changed > README.md; rm tracked.txt; mkfifo tracked.txt; mkfifo new-pipe"
    result = run(home, "exec", "--session", session, "--json", "--", "sh", "-c", script, cwd=project, timeout=DEADLINE)
    assert_no_traceback(result)
    assert result.rc == 0, result.err
    changes = {item["path"]: item["kind"] for item in result.json()["call"]["changes"]}
    assert changes == {"README.md": "modified", "tracked.txt": "modified", "new-pipe": "new"}, changes
    assert cli("turn", "end", "--session", session).rc == 0
    undone = run(home, "undo", "--session", session, "--yes", "--json", cwd=project, timeout=DEADLINE)
    assert_no_traceback(undone)
    assert undone.rc == 0, undone.err
    rows = {row["path"]: row for row in undone.json()["rows"]}
    assert rows["README.md"]["status"] == "done"
    for rel in ("tracked.txt", "new-pipe"):
        assert rows[rel]["action"] == "not covered" and rows[rel]["reason"] == "a FIFO, socket or device", rows[rel]
        assert stat.S_ISFIFO((project / rel).lstat().st_mode)
    assert stat.S_ISFIFO((project / "pipe").lstat().st_mode) and stat.S_ISCHR((project / "nulldev").lstat().st_mode)
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"
    record("hostile-special-exec", blocked=False)


def test_a_file_replaced_by_a_fifo_between_stat_and_open_during_a_scan(
    engine: turnback.Engine, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "swap.txt").write_bytes(b"about to become a FIFO\n")
    session = engine.new_session(str(project))
    engine.begin_turn(session.id, "a command while a file turns into a FIFO")
    real_open = os.open
    swapped: list[str] = []

    def fake_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if path == "swap.txt" and dir_fd is not None and not swapped and not flags & (os.O_WRONLY | os.O_RDWR):
            os.unlink(project / "swap.txt")
            os.mkfifo(project / "swap.txt")
            swapped.append(path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", fake_open)
    result = within(DEADLINE, lambda: engine.run_command(session.id, ["sh", "-c", "echo x > cmd.txt"]))
    monkeypatch.undo()
    assert swapped, "the scan never opened swap.txt"
    assert result.exit_code == 0
    assert stat.S_ISFIFO((project / "swap.txt").lstat().st_mode)
    engine.end_turn(session.id)
    applied = within(DEADLINE, lambda: engine.apply(engine.plan_undo(session.id)))
    assert {row.path: row.status for row in applied.plan.rows}["cmd.txt"] == "done"
    assert stat.S_ISFIFO((project / "swap.txt").lstat().st_mode)
    record("hostile-special-exec", case="file turned FIFO between stat and open", blocked=False)


# -- a folder flipped to a link to an outside canary, and back, during a 1,000-file undo -------------

RENAME_EXCHANGE = 2
AT_FDCWD = -100


def _exchange() -> Callable[[Path, Path], None]:
    """``renameat2(RENAME_EXCHANGE)``: swap two names in one step (the real folder and a link to the canary)."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        pytest.skip("no renameat2 in this libc")

    def swap(a: Path, b: Path) -> None:
        if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno), str(a))

    return swap


FLIP_FILES = 1000


def _before(i: int) -> bytes:
    return f"file {i} before\n".encode()


def _flip_scenario(tmp_path: Path) -> tuple[Path, Path, Path, str, dict[str, Any], dict[str, Any]]:
    """1,000 files (600 in sub/), one turn whose command appended a line to each; a canary folder outside."""
    home, root, canary = tmp_path / "store", tmp_path / "project", tmp_path / "canary"
    for i in range(FLIP_FILES):
        folder = "sub" if i < 600 else f"rest{i % 4}"
        path = root / folder / f"f{i:04d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_before(i))
    # The canary holds what the agent's command leaves in sub/, name for name, and more: following the link
    # would pass every compare-and-swap check and write the earlier bytes into the canary.
    canary.mkdir()
    for i in range(600):
        (canary / f"f{i:04d}.txt").write_bytes(_before(i) + b"appended by the command\n")
    (canary / "precious.txt").write_bytes(b"outside the project, never to be touched\n")
    os.mkfifo(canary / "fifo")
    with open_engine(home) as engine:
        session = engine.new_session(str(root))
        engine.begin_turn(session.id, "append a line to 1,000 files")
        result = engine.run_command(
            session.id, ["sh", "-c", "for f in sub/* rest*/*; do echo 'appended by the command' >> $f; done"]
        )
        assert result.exit_code == 0 and len(result.call.changes) == FLIP_FILES
        engine.end_turn(session.id)
    return home, root, canary, session.id, tree_state(root), tree_state(canary)


def test_a_folder_flipped_to_a_link_to_outside_during_a_1000_file_undo(tmp_path: Path) -> None:
    """The real folder and a link to the canary swap names in one step (``renameat2(RENAME_EXCHANGE)``), back
    and forth, while the undo runs: sub/ is always there, a folder or the link."""
    swap = _exchange()
    home, root, canary, session_id, pre, canary_before = _flip_scenario(tmp_path)
    files = FLIP_FILES
    link = root / "sub.link"
    link.symlink_to(canary, target_is_directory=True)

    flips = {"count": 0}
    stop = threading.Event()

    def flipper() -> None:
        while not stop.is_set():
            swap(root / "sub", link)  # sub is now the link to the canary; the real folder is sub.link
            flips["count"] += 1
            swap(root / "sub", link)  # and back

    thread = threading.Thread(target=flipper, daemon=True)
    thread.start()
    try:
        undone = run(home, "undo", "--session", session_id, "--yes", "--json", cwd=root, timeout=120)
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert_no_traceback(undone)
    assert (root / "sub").is_dir() and not (root / "sub").is_symlink(), "the flipper ended with sub as the link"
    link.unlink()
    assert flips["count"] > 10, flips
    assert tree_state(canary) == canary_before, "the canary outside the project was changed"
    assert undone.rc in (0, 1), (undone.rc, undone.err)
    rows = undone.json()["rows"] if undone.rc == 0 or undone.out.strip() else []
    not_done = [row for row in rows if row["status"] != "done"]
    for row in not_done:
        assert row["status"] in ("skipped", "failed") and (row.get("note") or row.get("reason")), row
    # Every file holds its state before or after the undo; nothing else.
    now = tree_state(root)
    assert set(now) == set(pre), set(now) ^ set(pre)
    for rel, state in now.items():
        if state[0] == "file":
            i = int(rel.rsplit("f", 1)[-1].split(".")[0])
            assert state[1] in (_before(i), pre[rel][1]), rel
    assert temp_files(root) == []
    # Without the flipper, undo of turn 1 finishes what was left.
    if not_done:
        finished = run(home, "undo", "1", "--session", session_id, "--yes", cwd=root, timeout=120)
        assert_no_traceback(finished)
        assert finished.rc == 0, finished.err
    for i in range(files):
        folder = "sub" if i < 600 else f"rest{i % 4}"
        assert (root / folder / f"f{i:04d}.txt").read_bytes() == _before(i)
    record(
        "hostile-flip",
        how="exchange",
        files=files,
        flips=flips["count"],
        rows_not_done=len(not_done),
        canary_changed=False,
    )


def test_a_folder_renamed_away_and_replaced_by_a_link_in_a_loop_during_a_1000_file_undo(tmp_path: Path) -> None:
    """The literal race: rename sub/ away, put a link to the canary in its place, remove the link, rename the
    folder back, in a tight loop. In the moments sub/ is missing, a restore may make a new sub/ (restores make
    missing folders), and the loop then stops where it is. The canary stays untouched whatever happens, the undo
    ends, and no file's content is lost (each name holds its earlier or its later bytes, in sub/, in the folder
    renamed away, or in the trash)."""
    home, root, canary, session_id, pre, canary_before = _flip_scenario(tmp_path)
    sub, away = root / "sub", root / "sub.away"
    counts = {"flips": 0, "collisions": 0}
    stop = threading.Event()

    def flipper() -> None:
        while not stop.is_set():
            try:
                os.rename(sub, away)
            except OSError:
                counts["collisions"] += 1
                return
            try:
                os.symlink(canary, sub, target_is_directory=True)
                os.unlink(sub)
                os.rename(away, sub)
            except OSError:  # a restore made a new sub/ meanwhile: leave both folders for the checks below
                counts["collisions"] += 1
                return
            counts["flips"] += 1

    thread = threading.Thread(target=flipper, daemon=True)
    thread.start()
    try:
        undone = run(home, "undo", "--session", session_id, "--yes", "--json", cwd=root, timeout=120)
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert_no_traceback(undone)
    assert undone.rc in (0, 1), (undone.rc, undone.err)
    if sub.is_symlink():
        sub.unlink()
    assert tree_state(canary) == canary_before, "the canary outside the project was changed"
    for row in undone.json()["rows"] if undone.out.strip() else []:
        if row["status"] != "done":
            assert row["status"] in ("skipped", "failed") and (row.get("note") or row.get("reason")), row
    trashed: dict[str, bytes] = {}
    for folder in (home / "trash").iterdir() if (home / "trash").exists() else []:
        trashed.update(files_under(folder))
    for i in range(600):
        name = f"f{i:04d}.txt"
        after = pre[f"sub/{name}"][1]
        held = [path.read_bytes() for path in (sub / name, away / name) if path.is_file()]
        assert all(content in (_before(i), after) for content in held), name
        assert held or trashed.get(f"sub/{name}") == after, f"sub/{name} is nowhere"
    assert temp_files(root) == []
    record("hostile-flip", how="rename-and-link", files=FLIP_FILES, canary_changed=False, **counts)


# -- special mode bits and ownership ---------------------------------------------------------------


def test_setuid_setgid_and_sticky_bits_are_restored_without_those_bits_and_a_warning(  # type: ignore[no-untyped-def]
    cli, home: Path, project: Path
) -> None:
    (project / "suid").write_bytes(b"#!/bin/sh\necho suid\n")
    os.chmod(project / "suid", 0o4755)
    (project / "sgid").write_bytes(b"#!/bin/sh\necho sgid\n")
    os.chmod(project / "sgid", 0o2755)
    (project / "shared").mkdir()
    os.chmod(project / "shared", 0o1777)
    assert stat.S_IMODE((project / "suid").stat().st_mode) == 0o4755
    session = begin(cli)
    assert cli("write", "--session", session, "suid", stdin=b"#!/bin/sh\necho changed\n").rc == 0
    assert cli("rm", "--session", session, "sgid").rc == 0
    assert cli("rm", "--session", session, "shared").rc == 0
    assert cli("turn", "end", "--session", session).rc == 0
    preview = cli("undo", "--dry-run")
    for rel in ("suid", "sgid", "shared"):
        assert f"warning: {rel}: its setuid, setgid or sticky bit is not restored" in preview.lines, preview.out
    undone = cli("undo", "--yes", "--json")
    assert undone.rc == 0, undone.err
    for row in undone.json()["rows"]:
        assert row["status"] == "done"
        assert row["warnings"] == ["its setuid, setgid or sticky bit is not restored"], row
    assert stat.S_IMODE((project / "suid").stat().st_mode) == 0o755
    assert (project / "suid").read_bytes() == b"#!/bin/sh\necho suid\n"
    assert stat.S_IMODE((project / "sgid").stat().st_mode) == 0o755
    assert not (project / "shared").stat().st_mode & 0o7000
    for path in (home / "trash").rglob("*"):
        assert not path.lstat().st_mode & 0o7000, f"a trash copy keeps a special bit: {path}"
    record("hostile-special-bits", files=3, warnings=3)


def test_a_folder_recorded_with_mode_777_is_restored_with_mode_777(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    (project / "open").mkdir()
    os.chmod(project / "open", 0o777)
    session = begin(cli)
    assert cli("rm", "--session", session, "open").rc == 0
    assert cli("turn", "end", "--session", session).rc == 0
    assert cli("undo", "--yes").rc == 0
    assert stat.S_IMODE((project / "open").stat().st_mode) == 0o777


def test_nothing_is_ever_chowned_back(cli, home: Path, project: Path) -> None:  # type: ignore[no-untyped-def]
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    other = 4242
    for rel in ("README.md", "docs/guide.md", "src/main.py"):
        os.chown(project / rel, other, other)
    session = begin(cli)
    assert cli("write", "--session", session, "README.md", stdin=b"rewritten\n").rc == 0
    assert cli("rm", "--session", session, "docs/guide.md").rc == 0
    assert cli("turn", "end", "--session", session).rc == 0
    undone = cli("undo", "--yes")
    assert undone.rc == 0, undone.err
    for rel in ("README.md", "docs/guide.md"):
        st = (project / rel).stat()
        assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid()), f"{rel} was chowned to {st.st_uid}"
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"
    assert (project / "src/main.py").stat().st_uid == other  # untouched files keep their owner
    for path in (home / "trash").rglob("*"):
        assert path.lstat().st_uid == os.getuid()
    record("hostile-chown", files=2, chowned_back=0)


# -- an unsafe trash folder, key file or store folder ------------------------------------------------


@pytest.mark.parametrize("unsafe", ["symlink", "mode-777", "mode-770", "mode-702"])
def test_an_unsafe_trash_folder_is_refused_and_nothing_changes(fast_tmp: Path, unsafe: str) -> None:
    case = build_undo(fast_tmp / "case")
    outside = fast_tmp / "outside"
    outside.mkdir()
    trash = case.home / "trash"
    if unsafe == "symlink":
        trash.symlink_to(outside, target_is_directory=True)
        words = [str(trash), "symbolic link", "refuses"]
    else:
        trash.mkdir()
        trash.chmod(int(unsafe.split("-")[1], 8))
        words = [str(trash), "can be written by other users", f"chmod 700 {trash}"]
    result = run(case.home, *case.args, cwd=case.project)
    assert_no_traceback(result)
    assert result.rc == 1, (result.rc, result.out, result.err)
    [line] = result.err.splitlines()
    assert all(word in line for word in words), line
    assert tree_state(case.project) == case.start
    assert os.listdir(outside) == []
    status = run(case.home, "status", "--session", case.session_id, cwd=case.project)
    assert not any(line.startswith("interrupted:") for line in status.lines), status.out
    record("hostile-unsafe-trash", unsafe=unsafe, refused=True)


def test_a_trash_folder_of_the_operation_made_a_link_beforehand_is_not_written_through(
    engine: turnback.Engine, project: Path, tmp_path: Path
) -> None:
    session = engine.new_session(str(project))
    engine.begin_turn(session.id, "a change to trash")
    engine.write(session.id, "README.md", b"the agent's readme\n")
    engine.write(session.id, "made.txt", b"made\n")
    engine.end_turn(session.id)
    plan = engine.plan_undo(session.id)
    outside = tmp_path / "outside"
    outside.mkdir()
    Path(engine.store.trash_root).mkdir(mode=0o700, exist_ok=True)
    (Path(engine.store.trash_root) / f"u-{plan.id}").symlink_to(outside, target_is_directory=True)
    with pytest.raises(turnback.UnsafePathError) as refused:
        within(DEADLINE, lambda: engine.apply(plan))
    assert f"u-{plan.id}" in str(refused.value) and "symbolic link" in str(refused.value)
    assert os.listdir(outside) == []
    assert (project / "README.md").read_bytes() == b"the agent's readme\n"
    assert (project / "made.txt").read_bytes() == b"made\n"
    # Once the link is gone, undoing the turn again takes it back.
    (Path(engine.store.trash_root) / f"u-{plan.id}").unlink()
    engine.apply(engine.plan_undo(session.id))  # finishes the interrupted operation (its rows were skipped)
    result = engine.apply(engine.plan_undo(session.id, turn=1))
    assert all(row.status == "done" for row in result.plan.rows), result.plan.rows
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"
    assert not (project / "made.txt").exists()
    record("hostile-unsafe-trash", unsafe="operation folder made a link beforehand", refused=True)


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o660])
def test_a_group_or_world_writable_key_file_is_refused(fast_tmp: Path, mode: int) -> None:
    home, project = fast_tmp / "store", fast_tmp / "project"
    project.mkdir()
    (project / "a.txt").write_bytes(b"a\n")
    env = cli_env(home)
    del env["TURNBACK_KEY"]

    def cli(*args: str, stdin: bytes = b"") -> Any:
        import subprocess
        import sys

        return subprocess.run(
            [sys.executable, "-m", "turnback", *args],
            input=stdin,
            capture_output=True,
            cwd=project,
            env=env,
            timeout=DEADLINE,
            check=False,
        )

    assert cli("init").returncode == 0
    session = cli("session", "new").stdout.decode().strip()
    assert cli("turn", "begin", "--session", session).returncode == 0
    assert cli("write", "--session", session, "a.txt", stdin=b"agent\n").returncode == 0
    assert cli("turn", "end", "--session", session).returncode == 0
    key = home / "key"
    key.chmod(mode)
    before = tree_state(project)
    db_before = (home / "turnback.db").read_bytes()
    for args in (("undo", "--session", session, "--yes"), ("write", "--session", session, "b.txt"), ("verify",)):
        done = cli(*args, stdin=b"x\n")
        err = done.stderr.decode()
        assert done.returncode == 1 and "Traceback" not in err, (args, done.returncode, err)
        assert err.startswith(f"turnback: the key file {key} has mode {mode:o}; it must be 600"), err
        assert tree_state(project) == before
    assert (home / "turnback.db").read_bytes() == db_before
    key.chmod(0o600)
    assert cli("undo", "--session", session, "--yes").returncode == 0
    assert (project / "a.txt").read_bytes() == b"a\n"
    record("hostile-unsafe-key", mode=f"{mode:o}", refused=True)


def test_a_store_folder_others_can_write_is_refused(fast_tmp: Path) -> None:
    case = build_undo(fast_tmp)
    case.home.chmod(0o770)
    result = run(case.home, *case.args, cwd=case.project)
    assert_no_traceback(result)
    assert result.rc == 1 and "can be written by other users (mode 770)" in result.err, result.err
    assert tree_state(case.project) == case.start
    case.home.chmod(0o700)
    record("hostile-unsafe-store-folder", mode="770", refused=True)

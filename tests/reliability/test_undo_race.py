"""A writer appending to files in place while an undo puts 400 of them back: no appended byte is lost.

Each round, a turn rewrites 400 files and the undo of that turn runs while a
separate process appends to them. The appender attacks the moment an undo
is most fragile: as soon as a file's displaced copy shows up in the
operation's trash folder it appends to that file by its path (as an editor's
autosave or a log does), and between those it appends to files at random
and writes through a few files it holds open (as a logger does). When the
undo is done, every appended line must be somewhere: in the file (the row was
skipped because the file changed first, or the append came after the earlier
content was put back) or in the trash copy of what the undo displaced.

The rounds repeat until 50 have run (``TURNBACK_SOAK``: 200), in one process
on a RAM folder so the test stays quick; the appender is a real second
process, so it runs truly alongside the undo.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import turnback
from tests.reliability.helpers import SOAK, record
from tests.reliability.scenarios import open_engine
from turnback.ops.apply import trash_folder_name

FILES = 400
ROUNDS = 200 if SOAK else 50
HELD_OPEN = 5

APPENDER = r"""
import json, os, random, sys, time
project, trash, stop, tag, held_open = sys.argv[1:6]
names = json.loads(sys.stdin.readline())
rng = random.Random(tag)
held = {n: os.open(os.path.join(project, n), os.O_WRONLY | os.O_APPEND) for n in rng.sample(names, int(held_open))}
seen, appended, n = set(), [], 0

def append(name, fd=None):
    global n
    line = f"<<{tag} append {n}>>\n".encode()
    n += 1
    if fd is None:
        with open(os.path.join(project, name), "ab") as out:
            out.write(line)
    else:
        os.write(fd, line)
    appended.append((line.decode(), name))

print("ready", flush=True)
next_random = next_held = 0.0
while not os.path.exists(stop):
    try:
        listed = os.listdir(trash)
    except FileNotFoundError:
        listed = []
    for name in listed:
        if name not in seen and not name.startswith(".turnback-"):
            seen.add(name)
            append(name)
    now = time.monotonic()
    if now >= next_random:  # a log line to some file, every few milliseconds
        append(rng.choice(names))
        next_random = now + 0.003
    if held and now >= next_held:  # through a file held open since before the undo
        name = rng.choice(list(held))
        append(name, held[name])
        next_held = now + 0.01
    time.sleep(0.0001)  # a poll every tenth of a millisecond: quick enough, and the undo keeps a core
for fd in held.values():
    os.close(fd)
json.dump(appended, sys.stdout)
"""


@dataclass
class Counts:
    appends: int = 0
    skipped: int = 0
    written_during: int = 0


def _content(round_number: int, i: int) -> bytes:
    return f"round {round_number} content of file {i}\n".encode() * (1 + i % 7)


def _without_appends(content: bytes) -> bytes:
    return b"".join(line for line in content.splitlines(keepends=True) if not line.startswith(b"<<"))


def _one_round(
    home: Path,
    project: Path,
    engine: turnback.Engine,
    session: turnback.Session,
    number: int,
    held: dict[str, bytes],
    held_open: int,
) -> Counts:
    """One turn rewriting every file, and its undo with the appender running; the counts of what happened.

    *held* is what each file held before the turn, appended lines left out; updated for the next round.
    """
    names = [f"f{i:03d}.txt" for i in range(FILES)]
    engine.begin_turn(session.id, f"round {number}")
    for i, name in enumerate(names):
        engine.write(session.id, name, _content(number, i))
    engine.end_turn(session.id)
    plan = engine.plan_undo(session.id)
    trash = home / "trash" / trash_folder_name(plan)
    stop = home / f"stop-{number}"
    appender = subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(project), str(trash), str(stop), f"r{number}", str(held_open)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert appender.stdin is not None and appender.stdout is not None
    appender.stdin.write(json.dumps(names) + "\n")
    appender.stdin.flush()
    assert appender.stdout.readline() == "ready\n"
    try:
        result = engine.apply(plan)
        time.sleep(0.005)  # a few more appends after the undo, through the held files and at random
    finally:
        stop.touch()
        out, _ = appender.communicate(timeout=60)
    appended: list[tuple[str, str]] = json.loads(out)
    lost = []
    for line, name in appended:
        places = [project / name, trash / name]
        if not any(place.exists() and line.encode() in place.read_bytes() for place in places):
            lost.append((name, line))
    assert not lost, f"round {number}: {len(lost)} of {len(appended)} appended lines lost: {lost[:5]}"
    counts = Counts(appends=len(appended))
    for row in result.plan.rows:
        i = names.index(row.path)
        in_place = _without_appends((project / row.path).read_bytes())
        if row.status == "skipped":
            # Written to before its turn came: left as it is, the appended lines in it, nothing in the trash.
            assert row.note and row.note.code == "changed_since_preview", row.note
            assert in_place == _content(number, i) and not (trash / row.path).exists()
            held[row.path] = in_place
            counts.skipped += 1
            continue
        assert row.status == "done", (row.path, row.status, row.note)
        assert in_place == held[row.path], row.path
        assert _without_appends((trash / row.path).read_bytes()) == _content(number, i), row.path
        counts.written_during += bool(row.note and "written to as turnback put it back" in str(row.note))
    return counts


def _race(project: Path, home: Path, rounds: int, held_open: int) -> Counts:
    """*rounds* rounds of a 400-file undo with the appender running; asserts no appended line is lost."""
    project.mkdir()
    for i in range(FILES):
        (project / f"f{i:03d}.txt").write_bytes(b"the first content\n")
    held = {f"f{i:03d}.txt": b"the first content\n" for i in range(FILES)}
    total = Counts()
    with open_engine(home) as engine:
        session = engine.new_session(str(project))
        for number in range(rounds):
            counts = _one_round(home, project, engine, session, number, held, held_open)
            total.appends += counts.appends
            total.skipped += counts.skipped
            total.written_during += counts.written_during
    assert total.written_during > 0, "the appender never wrote to a file between its check and its swap"
    return total


@pytest.mark.slow
def test_appends_during_an_undo_of_400_files_are_all_kept(fast_tmp: Path) -> None:
    """The trash on the project's file system: each displaced file goes there itself, writes and all."""
    started = time.monotonic()
    total = _race(fast_tmp / "project", fast_tmp / "store", ROUNDS, HELD_OPEN)
    record(
        "undo-race",
        rounds=ROUNDS,
        files=FILES,
        appends=total.appends,
        rows_skipped_written_first=total.skipped,
        rows_written_during_swap=total.written_during,
        bytes_lost=0,
        seconds=round(time.monotonic() - started, 1),
    )


def test_an_undo_with_the_store_on_another_file_system_copies_what_it_displaces(fast_tmp: Path, tmp_path: Path) -> None:
    """No hard link crosses file systems: the displaced bytes are copied into the trash, checked, and the
    project's files get their earlier bytes back; the trash holds copies, not the project's files."""
    if os.stat(fast_tmp).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip(f"{fast_tmp} and {tmp_path} are on one file system: no second one to put the store on")
    project, home = fast_tmp / "project", tmp_path / "store"
    project.mkdir()
    names = [f"f{i:03d}.txt" for i in range(20)]
    for name in names:
        (project / name).write_bytes(b"the first content\n")
    with open_engine(home) as engine:
        session = engine.new_session(str(project))
        engine.begin_turn(session.id, "rewrite")
        for i, name in enumerate(names):
            engine.write(session.id, name, _content(0, i))
        engine.end_turn(session.id)
        result = engine.apply(engine.plan_undo(session.id))
    assert [row.status for row in result.plan.rows] == ["done"] * len(names)
    assert result.trash_dir is not None
    for i, name in enumerate(names):
        assert (project / name).read_bytes() == b"the first content\n"
        copy = Path(result.trash_dir) / name
        assert copy.read_bytes() == _content(0, i) and copy.stat().st_nlink == 1

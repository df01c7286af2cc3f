"""``turnback edit`` of a very large file: memory stays bounded, and what is recorded can be restored.

An edit is made in memory, so a file over ``snapshot.max_file_mib`` (16 MiB
by default) is refused before it is read: a 3 GiB file (sparse, so the test
costs no disk) is refused with exit 1 in a few seconds and a peak resident
size of tens of MiB, measured for the CLI process alone (its ``VmHWM`` as it
exits: ``wait4``'s figure also counts the pages of the pytest process it was
forked from). An
edit at the limit, of a file big enough to be stored in chunks, followed by
``rm`` of the file, is undone byte for byte with the default store cap.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import cli_env, run_cli
from tests.reliability.helpers import record

GIB = 1 << 30
RSS_LIMIT_MIB = 150  # the CLI itself is ~40 MiB; reading 3 GiB would take over 3000
NEEDLE = b"\nthe old line\n"


# Runs the CLI as ``python -m turnback`` does, and writes its own peak resident size (kB) to the descriptor
# its first argument names as it exits.
PEAK_REPORTER = """
import atexit, os, runpy, sys
def report():
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    os.write(fd, peak.encode())
fd = int(sys.argv.pop(1))
atexit.register(report)
sys.argv[0] = "turnback"
runpy.run_module("turnback", run_name="__main__", alter_sys=True)
"""


def _cli_with_peak_rss(home: Path, *args: str, cwd: Path) -> tuple[int, str, float, float]:
    """Run the CLI; its exit code, stderr, peak resident size in MiB (its own, after exec) and seconds."""
    started = time.monotonic()
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", PEAK_REPORTER, str(write_end), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=cli_env(home),
            pass_fds=(write_end,),
        )
        os.close(write_end)
        write_end = -1
        peak_kib = int(os.read(read_end, 64) or b"0")
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    return proc.returncode, proc.stderr.decode("utf-8", "replace"), peak_kib / 1024, time.monotonic() - started


def _session(home: Path, project: Path) -> str:
    assert run_cli(home, "init", cwd=project).rc == 0
    made = run_cli(home, "session", "new", cwd=project)
    assert made.rc == 0, made.err
    return made.lines[-1].split()[-1]


@pytest.mark.slow
def test_an_edit_of_a_3_gib_file_is_refused_before_it_is_read(tmp_path: Path, home: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    big = project / "big.log"
    with big.open("wb") as out:
        out.truncate(3 * GIB)  # sparse: no disk used
        out.seek(3 * GIB - len(NEEDLE))
        out.write(NEEDLE)
    session = _session(home, project)
    assert run_cli(home, "turn", "begin", "--session", session, cwd=project).rc == 0

    edit = ("edit", "--session", session, "big.log", "--old", "the old line", "--new", "the new line")
    capped = run_cli(home, *edit, cwd=project)  # no copy of it could be kept: refused before anything else
    assert capped.rc == 1 and "over store.max_mib" in capped.err, (capped.rc, capped.err)
    # Told to go ahead without a copy, the edit is still refused before the file is read.
    rc, err, peak_mib, seconds = _cli_with_peak_rss(home, *edit, "--uncovered", cwd=project)

    assert rc == 1, err
    assert err.splitlines() == [
        "turnback: big.log is larger than snapshot.max_file_mib (16 MiB); turnback edits a file in memory, "
        "so nothing was changed: write it whole, or raise the limit with turnback config set snapshot.max_file_mib"
    ]
    assert peak_mib < RSS_LIMIT_MIB, f"the refused edit took {peak_mib:.0f} MiB"
    assert seconds < 30, seconds
    st = big.stat()
    assert st.st_size == 3 * GIB and st.st_blocks * 512 < 1 << 20, "the file was rewritten"
    with big.open("rb") as held:
        held.seek(3 * GIB - len(NEEDLE))
        assert held.read() == NEEDLE
    ended = run_cli(home, "turn", "end", "--session", session, cwd=project)
    assert ended.rc == 0, ended.err
    undo = run_cli(home, "undo", "--yes", "--session", session, cwd=project)
    assert undo.rc == 1 and "nothing to undo" in undo.err, (undo.rc, undo.err)
    record("large-edit-refused", size_gib=3, rc=rc, peak_rss_mib=round(peak_mib), seconds=round(seconds, 1))


@pytest.mark.slow
def test_an_edit_at_the_limit_then_rm_is_undone_byte_for_byte(tmp_path: Path, home: Path) -> None:
    """16 MiB less a little, incompressible, stored in chunks: the edit's and the rm's copies fit the default
    store cap, and the undo puts the file back as it was."""
    project = tmp_path / "project"
    project.mkdir()
    content = os.urandom((16 << 20) - 4096) + NEEDLE
    (project / "big.bin").write_bytes(content)
    session = _session(home, project)
    assert run_cli(home, "turn", "begin", "--session", session, cwd=project).rc == 0
    rc, err, peak_mib, seconds = _cli_with_peak_rss(
        home, "edit", "--session", session, "big.bin", "--old", "the old line", "--new", "the new line", cwd=project
    )
    assert rc == 0, err
    assert (project / "big.bin").read_bytes() == content.replace(b"the old line", b"the new line")
    removed = run_cli(home, "rm", "--session", session, "big.bin", cwd=project)
    assert removed.rc == 0, removed.err
    assert run_cli(home, "turn", "end", "--session", session, cwd=project).rc == 0
    undo = run_cli(home, "undo", "--yes", "--session", session, cwd=project)
    assert undo.rc == 0, (undo.out, undo.err)
    assert (project / "big.bin").read_bytes() == content
    record("large-edit-restored", size_mib=16, edit_peak_rss_mib=round(peak_mib), edit_seconds=round(seconds, 1))

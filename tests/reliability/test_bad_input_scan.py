"""Bad input through the paths ``tests/test_bad_input.py`` does not take: shell commands (the exec scan), NFC/NFD
twins, every odd content at once, a 2 GB sparse file, a file over the size cap.

Each ends in a byte-identical round trip (undo) or a clear "not covered" with
its reason: never a crash, never a traceback (exit 70).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from tests.conftest import cli_env, tree_state
from tests.reliability.helpers import SOAK, assert_no_traceback, record, run

NFC = unicodedata.normalize("NFC", "café")
NFD = unicodedata.normalize("NFD", "café")
ODD_NAMES = [
    os.fsdecode(b"latin1-caf\xe9-\xff.txt"),
    "line\nbreak.txt",
    "-leading-dash.txt",
    f"{NFC}.txt",
    f"{NFD}.txt",
    "tab\tand space .txt",
    "\u202eevil-rtl.txt",
]
ODD_CONTENTS = {
    "crlf.txt": b"one\r\ntwo\r\n",
    "lone-cr.txt": b"one\rtwo\rthree",
    "bom.txt": b"\xef\xbb\xbfwith a byte order mark\n",
    "nul.bin": b"text\x00with\x00NULs\x00",
    "no-final-newline.txt": b"no final newline",
    "empty.txt": b"",
    "invalid-utf8.txt": b"caf\xe9 \xff\xfe\n",
}


TURNBACK = [sys.executable, "-m", "turnback"]


@pytest.fixture
def sid(cli) -> str:  # type: ignore[no-untyped-def]
    assert cli("init").rc == 0
    return str(cli("session", "new").out.strip())


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_nfc_and_nfd_twins_both_present_round_trip_through_file_tools(cli, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    assert NFC != NFD and NFC.encode() != NFD.encode()
    (project / f"{NFC}.txt").write_bytes(b"composed\n")
    (project / f"{NFD}.txt").write_bytes(b"decomposed\n")
    start = tree_state(project)
    assert cli("turn", "begin", "--session", sid).rc == 0
    assert cli("write", "--session", sid, f"{NFC}.txt", stdin=b"composed, changed\n").rc == 0
    assert cli("edit", "--session", sid, f"{NFD}.txt", "--old", "decomposed", "--new", "changed").rc == 0
    assert cli("write", "--session", sid, f"new-{NFD}.txt", stdin=b"new twin\n").rc == 0
    assert cli("write", "--session", sid, f"new-{NFC}.txt", stdin=b"new other twin\n").rc == 0
    assert (project / f"{NFC}.txt").read_bytes() == b"composed, changed\n"
    assert (project / f"{NFD}.txt").read_bytes() == b"changed\n"
    assert cli("turn", "end", "--session", sid).rc == 0
    for args in (("log",), ("diff",), ("diff", "--stat"), ("undo", "--dry-run")):
        shown = cli(*args)
        assert_no_traceback(shown)
        assert shown.rc == 0, (args, shown.err)
    undone = cli("undo", "--yes")
    assert undone.rc == 0, undone.err
    assert tree_state(project) == start
    record("bad-input", case="nfc-nfd-file-tools", round_trip=True)


def test_odd_names_and_contents_through_an_exec_scan_round_trip(cli, home: Path, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    for i, name in enumerate(ODD_NAMES):
        (project / name).write_bytes(f"odd name {i}\n".encode())
    for name, content in ODD_CONTENTS.items():
        (project / name).write_bytes(content)
    start = tree_state(project)
    # One command (argv carries no odd byte: the names come from a list in the code) that rewrites each odd name,
    # turns each odd content into another odd content, makes new odd names, and deletes a few.
    code = f"""
import os
names = {ODD_NAMES!r}
contents = {ODD_CONTENTS!r}
keys = sorted(contents)
for i, name in enumerate(names):
    if i % 3 == 2:
        os.unlink(name)
    else:
        with open(name, "wb") as f:
            f.write(contents[keys[i % len(keys)]])
    with open("new-" + name, "wb") as f:
        f.write(contents[keys[(i + 1) % len(keys)]])
for i, key in enumerate(keys):
    with open(key, "wb") as f:
        f.write(contents[keys[(i + 1) % len(keys)]])
"""
    assert cli("turn", "begin", "--session", sid).rc == 0
    ran = run(home, "exec", "--session", sid, "--json", "--", *_python(code), cwd=project)
    assert_no_traceback(ran)
    assert ran.rc == 0, ran.err
    changes = ran.json()["call"]["changes"]
    assert len(changes) == len(ODD_NAMES) * 2 + len(ODD_CONTENTS), changes
    assert cli("turn", "end", "--session", sid).rc == 0
    call = str(ran.json()["call"]["id"])
    for args in (("log",), ("log", "--json"), ("diff",), ("diff", "--stat"), ("show", call), ("undo", "--dry-run")):
        shown = cli(*args)
        assert_no_traceback(shown)
        assert shown.rc == 0, (args, shown.err)
    undone = cli("undo", "--yes", "--json")
    assert_no_traceback(undone)
    assert undone.rc == 0, undone.err
    assert all(row["status"] == "done" for row in undone.json()["rows"]), undone.out
    assert tree_state(project) == start
    record("bad-input", case="odd-names-and-contents-exec", names=len(ODD_NAMES), contents=len(ODD_CONTENTS))


def test_a_2_gb_sparse_file_is_scanned_in_bounded_memory(cli, home: Path, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    """``snapshot.max_file_mib`` raised to 4096 so the exec scan reads the whole 2 GiB file (zeros, sparse).
    The peak RSS of the turnback process that scans it (its children included) must stay under 200 MB."""
    set_ = cli("config", "set", "snapshot.max_file_mib", "4096")
    assert set_.rc == 0, set_.err
    assert cli("config", "set", "snapshot.max_mib", "8192").rc == 0
    assert cli("config", "set", "store.max_mib", "8192").rc == 0  # the copies a change of it keeps: 2 GiB each
    big = project / "sparse.bin"
    with big.open("wb") as handle:
        handle.truncate(2 << 30)
    assert big.stat().st_blocks * 512 < 1 << 20, "the file system did not make the file sparse"
    an_hour_ago = big.stat().st_mtime - 3600
    os.utime(big, (an_hour_ago, an_hour_ago))  # not "racy": the scan after the command trusts its stat
    assert cli("turn", "begin", "--session", sid).rc == 0
    # A wrapper runs the CLI and reports the peak RSS of its descendants (the exec process, the command).
    wrapper = (
        "import resource, subprocess, sys\n"
        "code = subprocess.run(sys.argv[1:]).returncode\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    command = "echo scanned > marker.txt"
    if SOAK:  # and change the big file too: one byte at 1 GiB, taken back by the undo below
        command += "; printf x | dd of=sparse.bin bs=1 seek=1073741824 conv=notrunc status=none"
    proc = subprocess.run(
        [sys.executable, "-c", wrapper, *TURNBACK, "exec", "--session", sid, "--json", "--", "sh", "-c", command],
        capture_output=True,
        cwd=project,
        env=cli_env(home),
        timeout=600,
        check=False,
    )
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "Traceback" not in err, err
    peak_kib = int(err.strip().splitlines()[-1])
    peak_mb = peak_kib * 1024 / 1e6
    assert peak_mb < 200, f"peak RSS {peak_mb:.0f} MB"
    changes = {item["path"]: item["kind"] for item in json.loads(proc.stdout)["call"]["changes"]}
    assert changes.get("marker.txt") == "new", changes
    assert cli("turn", "end", "--session", sid).rc == 0
    preview = cli("undo", "--dry-run")
    assert_no_traceback(preview)
    assert "not covered" not in preview.out, preview.out  # the whole file was read and kept
    undone = cli("undo", "--yes")
    assert_no_traceback(undone)
    assert undone.rc == 0, undone.err
    assert not (project / "marker.txt").exists()
    assert big.stat().st_size == 2 << 30
    if SOAK:
        digest = hashlib.sha256()
        with big.open("rb") as handle:
            while chunk := handle.read(8 << 20):
                digest.update(chunk)
        assert digest.hexdigest() == hashlib.sha256(b"\0" * (2 << 30)).hexdigest()
    record("bad-input-2gb", case="2 GiB sparse file scanned", peak_rss_mb=round(peak_mb, 1), file_bytes=2 << 30)


def test_a_file_over_the_size_cap_is_not_covered_and_says_why(cli, home: Path, project: Path, sid: str) -> None:  # type: ignore[no-untyped-def]
    big = project / "big.dat"
    big.write_bytes(os.urandom(1 << 20) * 20)  # 20 MiB: over the default snapshot.max_file_mib (16)
    assert cli("turn", "begin", "--session", sid).rc == 0
    ran = run(home, "exec", "--session", sid, "--", "sh", "-c", "echo more >> big.dat; echo x > small.txt", cwd=project)
    assert_no_traceback(ran)
    assert ran.rc == 0, ran.err
    assert cli("turn", "end", "--session", sid).rc == 0
    reason = "larger than snapshot.max_file_mib (16 MiB)"
    preview = cli("undo", "--dry-run")
    assert f"not covered big.dat ({reason})" in preview.lines, preview.out
    covers = cli("covers", "--", "rm", "big.dat")
    assert covers.rc != 0 and reason in covers.out + covers.err, (covers.out, covers.err)
    undone = cli("undo", "--yes", "--json")
    assert_no_traceback(undone)
    assert undone.rc == 0, undone.err
    rows = {row["path"]: row for row in undone.json()["rows"]}
    assert rows["big.dat"]["action"] == "not covered" and rows["big.dat"]["reason"] == reason
    assert rows["small.txt"]["status"] == "done"
    assert big.stat().st_size == (20 << 20) + 5  # left as it is
    record("bad-input", case="over the size cap", not_covered=1)

"""The attack on ``store.max_mib``: a destructive call whose copy cannot be kept, and eviction under the cap.

Rule: the copy a destructive call needs is never dropped by that call. Where
turnback cannot keep it (over the cap, unreadable), the destructive step is
not taken silently: the CLI refuses unless ``--uncovered``, the MCP tool
returns an error, the Claude Code PreToolUse hook asks the user, and the
end-of-turn line and the log say which change cannot be undone. Eviction
drops the oldest copies first, never one the newest turn or a pending plan
needs.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

import turnback
from tests.conftest import TEST_KEY, Result, unprivileged_prefix
from tests.integrations.test_claude_code import Claude, stop_message
from tests.reliability.helpers import record
from turnback.catalog import word

BIG = 40_000_000  # 38.1 MiB, over the default store.max_mib (32 MiB)
OVER_CAP = "38.1 MiB, over store.max_mib (32 MiB)"
REFUSED = (
    f"turnback: cannot keep a copy of big.bin ({OVER_CAP}), so this change could not be undone;"
    " nothing was changed (--uncovered goes ahead without a copy)"
)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def big_file(path: Path, size: int = BIG) -> str:
    """A file of *size* random bytes (they do not compress, so the store would hold all of it); its digest."""
    with path.open("wb") as out:
        for offset in range(0, size, 1 << 20):
            out.write(os.urandom(min(1 << 20, size - offset)))
    return digest(path)


def start(cli, *, message: str = "one") -> None:  # type: ignore[no-untyped-def]
    assert cli("init", ".").rc == 0
    assert cli("session", "new").rc == 0
    begun = cli("turn", "begin", "--message", message)
    assert begun.rc == 0, begun


def end_turn(cli) -> Result:  # type: ignore[no-untyped-def]
    ended = cli("turn", "end")
    assert ended.rc == 0, ended
    return ended


def log_changes(cli) -> list[str]:  # type: ignore[no-untyped-def]
    log = cli("log")
    assert log.rc == 0, log
    return [line.strip() for line in log.lines]


# -- file tools over the cap: refused, then allowed with --uncovered, and said -----------


def test_rm_write_edit_mv_of_a_file_over_the_cap_are_refused_and_uncovered_says_it_cannot_be_undone(
    cli, project: Path
) -> None:  # type: ignore[no-untyped-def]
    big = project / "big.bin"
    before = big_file(big)
    start(cli)

    refused = [
        cli("rm", "big.bin"),
        cli("write", "big.bin", stdin=b"small\n"),
        cli("edit", "big.bin", "--old", "x", "--new", "y"),
        cli("mv", "big.bin", "moved.bin"),
        cli("mv", "README.md", "big.bin"),  # replacing big.bin destroys it too
    ]
    for result in refused:
        assert result.rc == 1, result
        assert result.out == "", result
    assert [r.err.splitlines() for r in refused[:4]] == [[REFUSED]] * 4
    assert refused[4].err.splitlines() == [REFUSED]
    assert digest(big) == before and big.stat().st_size == BIG
    assert not (project / "moved.bin").exists()
    assert (project / "README.md").read_bytes() == b"# project\n\nline two\n"
    log = cli("log", "--json")
    assert log.rc == 0
    assert [turn["calls"] for turn in log.json()["turns"]] == [[]]  # type: ignore[index]

    allowed = cli("rm", "--uncovered", "big.bin")
    assert allowed.rc == 0, allowed
    assert not big.exists()
    assert allowed.lines[1:] == [f"deleted big.bin (not covered: {OVER_CAP})"]

    ended = end_turn(cli)
    assert ended.lines == [
        "1 file changed, +0 -0",
        f"deleted big.bin (not covered: {OVER_CAP}): it cannot be undone",
    ]
    assert f"deleted big.bin (not covered: {OVER_CAP}; it cannot be undone)" in log_changes(cli)
    preview = cli("undo", "--dry-run")
    assert preview.rc == 0, preview
    assert f"not covered big.bin ({OVER_CAP})" in preview.lines
    record("cap: file tool over store.max_mib", refused=len(refused), bytes_lost_silently=0)


def test_write_over_a_big_file_with_uncovered_goes_ahead_and_the_turn_says_so(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    big_file(project / "big.bin")
    start(cli)
    wrote = cli("write", "--uncovered", "big.bin", stdin=b"small\n")
    assert wrote.rc == 0, wrote
    assert (project / "big.bin").read_bytes() == b"small\n"
    assert end_turn(cli).lines[1:] == [f"changed big.bin (not covered: {OVER_CAP}): it cannot be undone"]


def test_a_file_that_cannot_be_read_is_not_deleted_silently(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    prefix = unprivileged_prefix()
    if prefix is None:
        pytest.skip("needs setpriv to drop root's power to read any file")
    secret = project / "secret.txt"
    secret.write_bytes(b"only mine\n")
    secret.chmod(0o000)
    start(cli)
    refused = cli("rm", "secret.txt", prefix=prefix)
    assert refused.rc == 1, refused
    assert refused.err.splitlines() == [
        "turnback: cannot keep a copy of secret.txt (it cannot be read: permission denied: secret.txt), so this"
        " change could not be undone; nothing was changed (--uncovered goes ahead without a copy)"
    ]
    assert secret.exists()
    allowed = cli("rm", "--uncovered", "secret.txt", prefix=prefix)
    assert allowed.rc == 0, allowed
    assert not secret.exists()
    assert end_turn(cli).lines[1:] == [
        "deleted secret.txt (not covered: it cannot be read: permission denied: secret.txt): it cannot be undone"
    ]


# -- the MCP tool and the Claude Code hook map the same rule ------------------------------


def test_the_mcp_delete_of_a_file_over_the_cap_is_a_tool_error_and_the_file_stays(
    home: Path, project: Path, tmp_path: Path
) -> None:
    from tests.integrations.test_mcp import refused, serve

    before = big_file(project / "big.bin")

    async def body(session):  # type: ignore[no-untyped-def]
        return [
            await refused(session, "delete_file", path="big.bin"),
            await refused(session, "write_file", path="big.bin", content="small\n"),
        ]

    errors = serve(home, project, tmp_path / "server.err", body)
    reason = f"cannot keep a copy of big.bin ({OVER_CAP}), so this change could not be undone; nothing was changed"
    assert errors == [f"Error executing tool delete_file: {reason}", f"Error executing tool write_file: {reason}"]
    assert digest(project / "big.bin") == before


def test_the_claude_code_hook_asks_the_user_and_the_stop_line_says_it_cannot_be_undone(
    home: Path, project: Path
) -> None:
    big = project / "big.bin"
    big_file(big)
    claude = Claude(home, project)
    claude.prompt("shrink it")
    tool_input = {"file_path": str(big), "content": "small\n"}
    asked = claude.send("PreToolUse", tool_name="Write", tool_input=tool_input, tool_use_id="toolu_big")
    assert asked.err == "", asked
    assert json.loads(asked.out) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "ask",
            "permissionDecisionReason": f"turnback cannot keep a copy of big.bin ({OVER_CAP}), so this change "
            "could not be undone. Allow it only if you need no way back.",
        }
    }
    big.write_bytes(b"small\n")  # the user allowed it: Claude Code writes the file
    claude.post("Write", tool_input, "toolu_big", {"type": "update", "filePath": str(big), "content": "small\n"})
    assert stop_message(claude.stop()) == (
        f"1 file changed, +0 -0\nchanged big.bin (not covered: {OVER_CAP}): it cannot be undone"
    )


# -- eviction: oldest first, never the newest turn's copies or a pending plan's ------------


def test_a_command_over_the_cap_keeps_its_turn_s_copies_and_the_oldest_go(cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("config", "set", "snapshot.max_file_mib", "64").rc == 0
    old = project / "old.bin"
    old_digest = big_file(old, 5 << 20)
    digests = {name: big_file(project / name, 12 << 20) for name in ("a.bin", "b.bin", "c.bin")}
    start(cli, message="drop old")
    assert cli("rm", "old.bin").rc == 0
    end_turn(cli)
    assert cli("turn", "begin", "--message", "drop three").rc == 0
    ran = cli("exec", "--", "rm", "a.bin", "b.bin", "c.bin")  # 36 MiB of copies in one call, over the cap
    assert ran.rc == 0, ran
    end_turn(cli)

    log = cli("log")
    calls = [line.strip() for line in log.lines if "  " in line.strip() and ("delete" in line or "rm " in line)]
    assert any(line.endswith("delete old.bin  (can no longer be reverted)") for line in calls), log.out
    assert not any("rm a.bin" in line and "can no longer" in line for line in calls), log.out
    undone = cli("undo", "--yes")
    assert undone.rc == 0, undone
    assert {name: digest(project / name) for name in digests} == digests
    assert not old.exists() and old_digest  # the oldest copy went: turn 1 can no longer be undone
    record("cap: newest turn over store.max_mib", files_restored=len(digests), bytes_lost=0)


def test_eviction_keeps_a_pending_plan_s_copies_however_old(home: Path, project: Path) -> None:
    now = [1_000 * 10**9]

    def clock() -> int:
        now[0] += 10**6
        return now[0]

    with turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False, clock=clock) as engine:
        engine.set_config("snapshot.max_file_mib", "64")
        session = engine.new_session(str(project))
        root = str(project)
        big_file(project / "old.bin", 1 << 20)
        a = big_file(project / "a.bin", 16 << 20)
        big_file(project / "b.bin", 17 << 20)

        engine.begin_turn(session.id, "drop old")
        engine.delete(session.id, "old.bin", cwd=root)
        engine.end_turn(session.id)
        engine.begin_turn(session.id, "drop a")
        call_a = engine.delete(session.id, "a.bin", cwd=root)
        engine.end_turn(session.id)
        pending = engine.plan_revert(call_a.id)  # previewed, not applied yet
        now[0] += 2 * 3600 * 10**9  # the user comes back hours later
        engine.begin_turn(session.id, "drop b")
        result = engine.run_command(session.id, ["rm", "b.bin"], cwd=root)
        assert result.exit_code == 0
        engine.end_turn(session.id)  # 1 + 16 + 17 MiB kept: over the cap by 2 MiB

        turns = engine.log(session.id)
        assert [any(c.evicted for call in t.calls for c in call.changes) for t in turns] == [True, False, False]
        applied = engine.apply(engine.plan(pending.id))
        assert applied.changed
        assert digest(project / "a.bin") == a


# -- item 5: a full store still ends its turn -----------------------------------------------


FULL_DISK_NOTE = (
    "the disk holding the store is full: turnback used the space it keeps aside for this; "
    "free some space there (turnback gc reclaims copies nothing needs)"
)


@pytest.mark.parametrize("served", ["by its own process", "by the relay"])
def test_a_full_store_still_ends_its_turn_so_undo_is_not_refused_as_busy(tmp_path: Path, served: str) -> None:
    # `turn begin` starts the hook relay in the background, and the relay serves `turn end` with the store it
    # holds open: its log may already have the pages the commit needs, so whether the reserve is used depends on
    # timing. Each way is taken on purpose here: a process that opens the store on a full disk must use the
    # reserve (and say so); the relay must end the turn whether it needs the reserve or not.
    import subprocess

    from tests.integrations.test_hook_relay import stop_relay, wait_for_relay

    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for the store needs root")
    relayed = served == "by the relay"
    env = {"TURNBACK_HOOK_RELAY_IDLE_S": "120"} if relayed else {"TURNBACK_HOOK_RELAY": "0"}
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(disk)], check=True)
    home = disk / "store"
    try:
        project = tmp_path / "project"
        project.mkdir()
        (project / "a.txt").write_bytes(b"one\n")

        def cli(*args: str, stdin: bytes = b"") -> Result:
            from tests.conftest import run_cli

            return run_cli(home, *args, cwd=project, stdin=stdin, env=env)

        start(cli)
        relay = wait_for_relay(home) if relayed else None
        assert cli("write", "a.txt", stdin=b"two\n").rc == 0
        with (disk / "filler").open("wb") as filler:  # fill the disk the store is on, to the last byte
            try:
                while True:
                    filler.write(bytes(1 << 20))
                    filler.flush()
            except OSError:
                pass
        ended = cli("turn", "end")
        assert ended.rc == 0, ended
        assert ended.lines[0] == "1 file changed, +1 -1", ended
        if relayed:
            assert ended.lines[1:] in ([], [FULL_DISK_NOTE]), ended
            assert wait_for_relay(home) == relay  # the relay ended it, and still serves
        else:
            assert ended.lines[1:] == [FULL_DISK_NOTE], ended
        (disk / "filler").unlink()
        undone = cli("undo", "--yes")
        assert undone.rc == 0, undone
        assert (project / "a.txt").read_bytes() == b"one\n"
        record(f"full store ends its turn ({served})", turns_ended=1, undo_refused_busy=0, bytes_lost=0)
    finally:
        stop_relay(home)
        subprocess.run(["umount", "-l", str(disk)], check=False)


# -- the cap beside the running turn, with two processes writing in it -----------------------------


def test_a_write_over_the_cap_beside_the_running_turn_is_refused_whichever_process_kept_the_rest(
    home: Path, project: Path
) -> None:
    """Each process checks the cap from a bound it reads again only when another process wrote: a copy
    another process kept in the same turn meanwhile still counts, and the write is refused, the file intact."""
    for name in ("a.bin", "b.bin", "c.bin"):
        big_file(project / name, 400 << 10)
    root = str(project)
    with (
        turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False) as agent,
        turnback.Engine.open(str(home), key_secret=TEST_KEY, try_keyring=False) as other,
    ):
        agent.set_config("store.max_mib", "1")
        session = agent.new_session(root)
        agent.begin_turn(session.id, "three writes")
        agent.write(session.id, "a.bin", b"a", cwd=root)  # keeps a.bin's 400 KiB
        other.write(session.id, "b.bin", b"b", cwd=root)  # another process's call in the turn: 400 KiB more
        c = digest(project / "c.bin")
        try:
            agent.write(session.id, "c.bin", b"c", cwd=root)
        except turnback.UncoveredError as exc:
            assert word(exc.message) == (
                "cannot keep a copy of c.bin (400.0 KiB, over store.max_mib (1 MiB); the running turn keeps"
                " 800.0 KiB already), so this change could not be undone; nothing was changed"
            )
        else:
            raise AssertionError("the write over the cap beside the turn was not refused")
        assert digest(project / "c.bin") == c

"""Git refs around a turn, against real git in temp folders.

Every test builds its repository with the git commands a turn would run, so
what is checked is git's own behaviour: loose and packed refs, annotated
tags, the stash, detached HEAD, and update-ref's all-or-none transactions.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from turnback.capture.git import (
    RefMove,
    describe_value,
    git_dir,
    move_refs,
    read_refs,
    ref_moves,
    short_name,
)
from turnback.errors import UnsafePathError

OLD_TIME = 1_000_000_000  # every file under .git gets this mtime, so any write shows


@pytest.fixture(autouse=True)
def pinned_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The git commands of the tests: fixed identity, no user or system config."""
    for name in list(os.environ):
        if name.startswith("GIT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "author@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Committer")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "committer@example.com")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("HOME", str(tmp_path))


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout.strip()


def rev(repo: Path, name: str) -> str:
    return git(repo, "rev-parse", "--verify", name)


def commit(repo: Path, name: str, text: str, message: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message)
    return rev(repo, "HEAD")


def init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with two commits on main."""
    root = init(tmp_path / "project")
    commit(root, "a.txt", "one\n", "first")
    commit(root, "a.txt", "two\n", "second")
    return root


def refs_of(root: Path) -> dict[str, str]:
    refs = read_refs(str(root))
    assert refs is not None
    return refs


def undo(root: Path, before: dict[str, str], after: dict[str, str]) -> bool:
    return move_refs(str(root), ref_moves(before, after))


def snapshot(folder: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every entry under *folder*: mode, mtime (ns) and, for a file, its bytes."""
    state: dict[str, tuple[int, int, bytes | None]] = {}
    for path in [folder, *sorted(folder.rglob("*"))]:
        st = path.lstat()
        data = path.read_bytes() if stat.S_ISREG(st.st_mode) else None
        state[path.relative_to(folder).as_posix()] = (st.st_mode, st.st_mtime_ns, data)
    return state


def age(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        os.utime(path, (OLD_TIME, OLD_TIME), follow_symlinks=False)


# -- git_dir ---------------------------------------------------------------------------------


def test_git_dir_of_a_worktree_a_subfolder_and_a_nested_repository(repo: Path) -> None:
    (repo / "src" / "deep").mkdir(parents=True)
    nested = init(repo / "vendor" / "lib")
    commit(nested, "n.txt", "n\n", "nested")
    assert git_dir(str(repo)) == str((repo / ".git").resolve())
    assert git_dir(str(repo / "src" / "deep")) == str((repo / ".git").resolve())
    assert git_dir(str(nested)) == str((nested / ".git").resolve())
    # The nested repository's branch is not the project's.
    git(nested, "branch", "only-in-nested")
    assert "refs/heads/only-in-nested" not in refs_of(repo)
    assert "refs/heads/only-in-nested" in refs_of(nested)


def test_no_repository_no_folder_no_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert git_dir(str(plain)) is None
    assert read_refs(str(plain)) is None
    assert read_refs(str(tmp_path / "missing")) is None
    with pytest.raises(UnsafePathError):
        move_refs(str(plain), [])
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    monkeypatch.setenv("PATH", str(empty_bin))
    assert git_dir(str(repo)) is None
    assert read_refs(str(repo)) is None
    with pytest.raises(UnsafePathError, match="git cannot run"):
        move_refs(str(repo), [])


def test_inherited_git_variables_do_not_redirect_the_read(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = init(tmp_path / "other")
    commit(other, "o.txt", "o\n", "other")
    git(other, "branch", "elsewhere")
    expected = refs_of(repo)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "foreign-index"))
    assert git_dir(str(repo)) == str((repo / ".git").resolve())
    assert refs_of(repo) == expected
    assert not (tmp_path / "foreign-index").exists()


def test_linked_worktree_has_its_own_head(repo: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "wt", str(linked))
    assert git_dir(str(linked)) == str((repo / ".git" / "worktrees" / "linked").resolve())
    before = refs_of(linked)
    assert before["HEAD"] == "ref: refs/heads/wt"
    commit(linked, "w.txt", "w\n", "in the linked worktree")
    git(linked, "checkout", "-q", "-b", "wt2")
    assert undo(linked, before, refs_of(linked)) is True
    assert refs_of(linked) == before
    assert refs_of(repo)["HEAD"] == "ref: refs/heads/main"


def test_sha256_repository(tmp_path: Path) -> None:
    root = tmp_path / "sha256"
    root.mkdir()
    made = subprocess.run(["git", "init", "-q", "-b", "main", "--object-format=sha256"], cwd=root, check=False)
    if made.returncode != 0:
        pytest.skip("this git has no SHA-256 repositories")
    commit(root, "f.txt", "f\n", "first")
    before = refs_of(root)
    assert len(before["refs/heads/main"]) == 64
    commit(root, "f.txt", "g\n", "second")
    git(root, "tag", "v1")
    assert undo(root, before, refs_of(root)) is True
    assert refs_of(root) == before


# -- read_refs -------------------------------------------------------------------------------


def test_unborn_repository(tmp_path: Path) -> None:
    root = init(tmp_path / "fresh")
    assert refs_of(root) == {"HEAD": "ref: refs/heads/main"}


def test_after_commits_and_detached_head(repo: Path) -> None:
    head = rev(repo, "HEAD")
    first = rev(repo, "HEAD~1")
    git(repo, "branch", "side", first)
    assert refs_of(repo) == {"HEAD": "ref: refs/heads/main", "refs/heads/main": head, "refs/heads/side": first}
    git(repo, "checkout", "-q", "--detach", first)
    assert refs_of(repo)["HEAD"] == first


def test_tags_are_their_own_object_ids(repo: Path) -> None:
    git(repo, "tag", "light")
    git(repo, "tag", "-a", "-m", "annotated", "heavy")
    refs = refs_of(repo)
    head = rev(repo, "HEAD")
    assert refs["refs/tags/light"] == head
    assert refs["refs/tags/heavy"] == rev(repo, "refs/tags/heavy")
    assert refs["refs/tags/heavy"] != head
    assert git(repo, "cat-file", "-t", refs["refs/tags/heavy"]) == "tag"


def test_stash(repo: Path) -> None:
    (repo / "a.txt").write_text("dirty\n")
    git(repo, "stash", "-q")
    refs = refs_of(repo)
    assert refs["refs/stash"] == rev(repo, "refs/stash")


def test_packed_refs_read_like_loose_ones(repo: Path) -> None:
    git(repo, "branch", "side", "HEAD~1")
    git(repo, "tag", "v1")
    git(repo, "tag", "-a", "-m", "annotated", "v2")
    (repo / "a.txt").write_text("dirty\n")
    git(repo, "stash", "-q")
    git(repo, "branch", "odd/name-with.dots_and-😀")
    loose = refs_of(repo)
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "side").exists()
    assert (repo / ".git" / "packed-refs").exists()
    assert refs_of(repo) == loose
    assert "refs/heads/odd/name-with.dots_and-😀" in loose


def test_a_symbolic_alias_branch_is_not_listed(repo: Path) -> None:
    git(repo, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
    assert "refs/heads/alias" not in refs_of(repo)


def test_reading_writes_nothing_in_git_dir(repo: Path) -> None:
    git(repo, "tag", "v1")
    git(repo, "branch", "side")
    (repo / "a.txt").write_text("changed\n")
    git(repo, "stash", "-q")
    # A work-tree file whose stat no longer matches the index: a `git status`
    # would rewrite the index here.
    (repo / "a.txt").write_text("two\n")
    os.utime(repo / "a.txt", (OLD_TIME + 5, OLD_TIME + 5))
    gdir = repo / ".git"
    for detach in (False, True):
        if detach:
            git(repo, "checkout", "-q", "--detach")
            git(repo, "pack-refs", "--all")
        index = (gdir / "index").read_bytes()
        age(gdir)  # a lock file made and removed would still change its folder's mtime
        before = snapshot(gdir)
        for _ in range(3):
            assert git_dir(str(repo)) is not None
            refs_of(repo)
        assert snapshot(gdir) == before
        assert (gdir / "index").read_bytes() == index


# -- ref_moves, short_name, describe_value ---------------------------------------------------


def test_ref_moves_take_after_back_to_before_with_head_last() -> None:
    a, b, c = "a" * 40, "b" * 40, "c" * 40
    before = {"HEAD": "ref: refs/heads/main", "refs/heads/main": a, "refs/tags/gone": c, "refs/heads/same": a}
    after = {"HEAD": "ref: refs/heads/x", "refs/heads/main": b, "refs/heads/x": b, "refs/heads/same": a}
    assert ref_moves(before, after) == [
        RefMove("refs/heads/main", expect=b, target=a),
        RefMove("refs/heads/x", expect=b, target=None),
        RefMove("refs/tags/gone", expect=None, target=c),
        RefMove("HEAD", expect="ref: refs/heads/x", target="ref: refs/heads/main"),
    ]
    assert ref_moves(before, before) == []


def test_short_name_and_describe_value() -> None:
    assert short_name("refs/heads/main") == "main"
    assert short_name("refs/heads/feature/x") == "feature/x"
    assert short_name("refs/tags/v1") == "tag v1"
    assert short_name("refs/stash") == "stash"
    assert short_name("HEAD") == "HEAD"
    assert describe_value("0123456789abcdef0123456789abcdef01234567") == "0123456"
    assert describe_value("ref: refs/heads/main") == "main"
    assert describe_value("ref: refs/heads/feature/x") == "feature/x"
    assert describe_value(None) == "(none)"


# -- move_refs -------------------------------------------------------------------------------


def run_turn(repo: Path) -> None:
    """What an agent's shell commands might do to the refs in one turn."""
    commit(repo, "b.txt", "new\n", "turn commit")
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "tag", "v1")
    (repo / "a.txt").write_text("edited by the turn\n")
    git(repo, "stash", "-q")


def test_a_turn_round_trip(repo: Path) -> None:
    before = refs_of(repo)
    run_turn(repo)
    after = refs_of(repo)
    assert {"refs/heads/feature", "refs/tags/v1", "refs/stash"} <= set(after)
    assert after["HEAD"] == "ref: refs/heads/feature"
    index = (repo / ".git" / "index").read_bytes()
    work_tree = {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file()}

    assert undo(repo, before, after) is True

    assert refs_of(repo) == before
    assert git(repo, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert (repo / ".git" / "index").read_bytes() == index
    assert {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file()} == work_tree
    assert git(repo, "stash", "list") == ""
    # The undo is on record where git users look.
    assert "turnback: undo" in git(repo, "reflog", "-1", "main")
    assert "turnback: undo" in git(repo, "reflog", "-1", "HEAD")


def test_undo_of_the_first_commit_leaves_an_unborn_branch(tmp_path: Path) -> None:
    root = init(tmp_path / "fresh")
    before = refs_of(root)
    commit(root, "f.txt", "f\n", "first")
    assert undo(root, before, refs_of(root)) is True
    assert refs_of(root) == {"HEAD": "ref: refs/heads/main"}


def test_a_ref_moved_again_stops_every_move(repo: Path) -> None:
    before = refs_of(repo)
    run_turn(repo)
    after = refs_of(repo)
    # The user commits on feature after the turn; main, v1 and the stash still
    # hold what the turn left, yet none of them may move.
    commit(repo, "c.txt", "user\n", "user commit")
    now = refs_of(repo)
    assert now["refs/heads/main"] == after["refs/heads/main"]

    assert undo(repo, before, after) is False
    assert refs_of(repo) == now


def test_head_moved_by_the_user_stops_every_move(repo: Path) -> None:
    before = refs_of(repo)
    run_turn(repo)
    after = refs_of(repo)
    git(repo, "checkout", "-q", "main")
    now = refs_of(repo)
    assert undo(repo, before, after) is False
    assert refs_of(repo) == now


def test_attached_where_detached_was_expected_is_a_mismatch(repo: Path) -> None:
    # git's own old-value check for HEAD compares the resolved id, which is the
    # same here; the move must still be refused.
    head = rev(repo, "HEAD")
    first = rev(repo, "HEAD~1")
    move = RefMove("HEAD", expect=head, target=first)
    before = refs_of(repo)
    assert move_refs(str(repo), [move]) is False
    assert refs_of(repo) == before


def test_a_failed_transaction_moves_nothing(repo: Path) -> None:
    before = refs_of(repo)
    run_turn(repo)
    after = refs_of(repo)
    lock = repo / ".git" / "refs" / "tags" / "v1.lock"
    lock.write_text("another git process\n")
    with pytest.raises(UnsafePathError, match="v1"):
        undo(repo, before, after)
    assert refs_of(repo) == after
    lock.unlink()
    assert undo(repo, before, after) is True
    assert refs_of(repo) == before


def test_detached_head_moves_back_without_touching_its_branch(repo: Path) -> None:
    first = rev(repo, "HEAD~1")
    main = rev(repo, "main")
    git(repo, "checkout", "-q", "--detach", first)
    before = refs_of(repo)
    git(repo, "checkout", "-q", "main")  # the turn attaches HEAD to main
    after = refs_of(repo)
    assert ref_moves(before, after) == [RefMove("HEAD", expect="ref: refs/heads/main", target=first)]
    assert undo(repo, before, after) is True
    assert refs_of(repo) == before
    assert rev(repo, "main") == main
    assert subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=repo, check=False).returncode == 1


def test_detached_head_and_its_commits(repo: Path) -> None:
    git(repo, "checkout", "-q", "--detach")
    before = refs_of(repo)
    commit(repo, "d.txt", "d\n", "detached commit")
    after = refs_of(repo)
    assert undo(repo, before, after) is True
    assert refs_of(repo) == before


def test_detached_head_comes_back_after_commits_on_the_branch_it_was_attached_to(repo: Path) -> None:
    first = rev(repo, "HEAD~1")
    git(repo, "checkout", "-q", "--detach", first)
    before = refs_of(repo)
    git(repo, "checkout", "-q", "main")
    commit(repo, "m.txt", "m\n", "on main")
    after = refs_of(repo)
    assert undo(repo, before, after) is True
    assert refs_of(repo) == before


def test_attached_head_comes_back_after_a_detached_turn(repo: Path) -> None:
    before = refs_of(repo)
    git(repo, "checkout", "-q", "--detach", "HEAD~1")
    commit(repo, "x.txt", "x\n", "detached work")
    git(repo, "tag", "detached-tag")
    after = refs_of(repo)
    assert undo(repo, before, after) is True
    assert refs_of(repo) == before


def test_deleted_refs_come_back_and_created_ones_go(repo: Path) -> None:
    first = rev(repo, "HEAD~1")
    git(repo, "branch", "old", first)
    git(repo, "tag", "t")
    git(repo, "tag", "-a", "-m", "annotated", "at")
    before = refs_of(repo)
    git(repo, "branch", "-D", "old")
    git(repo, "tag", "-d", "t")
    git(repo, "tag", "-d", "at")
    git(repo, "branch", "new")
    after = refs_of(repo)
    assert undo(repo, before, after) is True
    assert refs_of(repo) == before
    assert git(repo, "cat-file", "-t", "refs/tags/at") == "tag"


def test_a_popped_stash_comes_back_into_the_stash_list(repo: Path) -> None:
    (repo / "a.txt").write_text("dirty\n")
    git(repo, "stash", "-q")
    before = refs_of(repo)
    git(repo, "stash", "drop", "-q")
    after = refs_of(repo)
    assert "refs/stash" not in after
    assert undo(repo, before, after) is True
    assert refs_of(repo) == before
    assert git(repo, "stash", "list").startswith("stash@{0}: ")
    assert "dirty" in git(repo, "stash", "show", "-p")


def test_packed_refs_move_back(repo: Path) -> None:
    git(repo, "branch", "side", "HEAD~1")
    git(repo, "tag", "v1", "HEAD~1")
    git(repo, "pack-refs", "--all")
    before = refs_of(repo)
    commit(repo, "p.txt", "p\n", "turn commit")  # main becomes loose again, its packed line stays
    git(repo, "branch", "-f", "side", "HEAD")
    git(repo, "tag", "-d", "v1")  # rewrites packed-refs
    after = refs_of(repo)
    assert undo(repo, before, after) is True
    assert refs_of(repo) == before
    git(repo, "pack-refs", "--all")
    assert refs_of(repo) == before


def test_moves_outside_branches_tags_and_stash_are_refused(repo: Path) -> None:
    head = rev(repo, "HEAD")
    with pytest.raises(ValueError):
        move_refs(str(repo), [RefMove("refs/notes/commits", expect=None, target=head)])
    with pytest.raises(ValueError):
        move_refs(str(repo), [RefMove("refs/heads/x", expect=None, target="ref: refs/heads/main")])
    with pytest.raises(ValueError):
        move_refs(str(repo), [RefMove("HEAD", expect="ref: refs/heads/main", target=None)])
    assert move_refs(str(repo), []) is True


def test_head_changed_after_the_refs_moved_reverses_them(repo: Path) -> None:
    """A reference-transaction hook moves HEAD right after git commits the refs: nothing stays moved."""
    before = refs_of(repo)
    run_turn(repo)
    after = refs_of(repo)
    git(repo, "branch", "elsewhere")
    marker = repo.parent / "hook-ran"
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = committed ] && [ ! -e "{marker}" ]; then\n'
        f'  touch "{marker}"\n'
        "  git symbolic-ref HEAD refs/heads/elsewhere\n"
        "fi\n"
    )
    hook.chmod(0o755)
    now = refs_of(repo)
    assert undo(repo, before, after) is False
    assert marker.exists()
    assert refs_of(repo) == {**now, "HEAD": "ref: refs/heads/elsewhere"}


def test_head_changed_before_the_lock_is_caught_under_the_lock(repo: Path) -> None:
    """HEAD is compared exactly while the transaction holds its lock, not only by git's resolved-id check.

    A hook at "prepared" reattaches HEAD before turnback looks under the lock;
    it stands in for a change between turnback's first look and the lock.
    """
    main = rev(repo, "main")
    first = rev(repo, "HEAD~1")
    git(repo, "checkout", "-q", "--detach", first)
    before = refs_of(repo)
    git(repo, "checkout", "-q", "--detach", main)
    after = refs_of(repo)
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.write_text(
        '#!/bin/sh\nif [ "$1" = prepared ]; then\n  printf "ref: refs/heads/main\\n" > "$GIT_DIR/HEAD"\nfi\n'
    )
    hook.chmod(0o755)
    assert undo(repo, before, after) is False
    assert refs_of(repo) == {**after, "HEAD": "ref: refs/heads/main"}
    assert rev(repo, "main") == main


def test_a_locked_head_stops_the_moves_of_its_branch(repo: Path) -> None:
    # Moving the branch HEAD is attached to also writes HEAD's reflog, under HEAD's lock.
    before = refs_of(repo)
    run_turn(repo)
    after = refs_of(repo)
    lock = repo / ".git" / "HEAD.lock"
    lock.write_text("another git process\n")
    with pytest.raises(UnsafePathError, match="HEAD"):
        undo(repo, before, after)
    lock.unlink()
    assert refs_of(repo) == after


def test_head_that_cannot_be_attached_takes_the_refs_back_too(repo: Path) -> None:
    git(repo, "branch", "side", "HEAD~1")
    before = refs_of(repo)
    git(repo, "checkout", "-q", "side")
    git(repo, "tag", "v1")
    after = refs_of(repo)
    lock = repo / ".git" / "HEAD.lock"
    lock.write_text("another git process\n")
    with pytest.raises(UnsafePathError, match="HEAD"):
        undo(repo, before, after)
    lock.unlink()
    assert refs_of(repo) == after
    assert undo(repo, before, after) is True
    assert refs_of(repo) == before

"""git_patch against real git: what it writes must apply, forwards and backwards, to exactly the other tree.

Two folders, "before" and "after", differ in every way a turn can change a
project: text, line endings, missing final newlines, empty files, modes,
symbolic links, binaries, odd names, folders made and emptied. The patch
between them is applied with ``git apply`` to a copy of "before" and with
``git apply -R`` to a copy of "after", and every file, link and folder is
compared. Where git writes the same change itself, the text is compared too.
"""

from __future__ import annotations

import base64
import os
import random
import shutil
import stat
import subprocess
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from turnback.render.diff import MAX_DIFF_BYTES
from turnback.render.patch import PatchFile, _base85_lines, blob_id, git_patch, quote_path

Tree = dict[str, tuple[str, bytes, bool]]  # path -> (kind, content or link target, executable)

NON_UTF8 = os.fsdecode(b"bytes-\xff\xfe.txt")
SPACE = "with space/file name.txt"
NON_ASCII = "café/naïve.txt"
TAB = "tab\tname.txt"
QUOTE = 'quote"back\\slash.txt'
NUMBERED = "".join(f"{i} line\n" for i in range(1, 21))
RANDOM = random.Random(20240607).randbytes(100_000)

# Left out where the text is compared with git's own: git diffs these as text with raw bytes (not
# UTF-8, a NUL after 8000 bytes, a non-UTF-8 link target) where turnback sends a binary patch, or
# (binary on one side) writes "Binary files differ" without --binary.
NOT_GIT_TEXT = {"latin1.txt", "late-nul.txt", "text-to-binary.txt", "binary-to-text.txt", "link-non-utf8"}


def _git_env(ceiling: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(ceiling),
        "LANG": "C.UTF-8",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        # no folder above the test's own may be taken for the repository git apply works in
        "GIT_CEILING_DIRECTORIES": str(ceiling),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }


def git(cwd: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, input=stdin, capture_output=True, env=_git_env(cwd.parent), timeout=60
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"git {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr.decode(errors='replace')}"
        )
    return proc


def put(root: Path, rel: str, data: bytes, mode: int = 0o644) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)


def link(root: Path, rel: str, target: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def build_before(root: Path) -> None:
    root.mkdir()
    put(root, "same.txt", b"never changes\n")
    put(root, "modified.txt", NUMBERED.encode())
    put(root, "removed.txt", b"gone\n")
    put(root, "no-eol-old.txt", b"a\nb")
    put(root, "no-eol-new.txt", b"a\nb\n")
    put(root, "no-eol-both.txt", b"x")
    put(root, "crlf.txt", b"one\r\ntwo\r\nthree\r\n")
    put(root, "mixed-eol.txt", b"a\r\nb\nc\r\n")
    put(root, "lone-cr.txt", b"a\rb\nc\n")
    put(root, "empty-old", b"")
    put(root, "empty-to-text", b"")
    put(root, "text-to-empty", b"was text\n")
    put(root, "mode-only.sh", b"#!/bin/sh\n")
    put(root, "mode-and-content.sh", b"echo a\n")
    put(root, "exec-to-plain.sh", b"echo x\n", 0o755)
    put(root, "deleted-exec.sh", b"echo bye\n", 0o755)
    put(root, "target-a", b"a\n")
    link(root, "link-gone", "removed.txt")
    link(root, "link-retarget", "target-a")
    link(root, "link-to-file", "target-a")
    put(root, "file-to-link", b"a file first\n")
    link(root, "link-non-utf8", os.fsdecode(b"caf\xe9"))
    put(root, "bin/gone.bin", bytes(range(256)))
    put(root, "bin/changed.bin", b"\x89PNG\r\n\x1a\n" + bytes(range(64)))
    put(root, "bin/nul.dat", b"text\0more")
    put(root, "bin/random.bin", RANDOM)
    put(root, "text-to-binary.txt", b"plain\n")
    put(root, "binary-to-text.txt", b"\0\1\2")
    put(root, "latin1.txt", b"caf\xe9\n")
    put(root, "late-nul.txt", b"x" * 9000 + b"\n")
    put(root, SPACE, b"one\ntwo\n")
    put(root, NON_ASCII, b"na\xc3\xafve\n")
    put(root, NON_UTF8, b"name is not utf-8\n")
    put(root, "emptied/only.txt", b"the folder empties\n")
    put(root, "turn/into_dir", b"a file that becomes a folder\n")


def build_after(root: Path) -> None:
    root.mkdir()
    put(root, "same.txt", b"never changes\n")
    put(root, "modified.txt", NUMBERED.replace("3 line", "3 LINE").replace("15 line", "15 LINE").encode())
    put(root, "added.txt", b"new\n")
    put(root, "no-eol-old.txt", b"a\nb\nc\n")
    put(root, "no-eol-new.txt", b"a\nB")
    put(root, "no-eol-both.txt", b"y")
    put(root, "crlf.txt", b"one\r\nTWO\r\nthree\r\n")
    put(root, "mixed-eol.txt", b"a\nb\r\nc\r\n")
    put(root, "lone-cr.txt", b"a\rB\nc\r")
    put(root, "empty-new", b"")
    put(root, "empty-to-text", b"now text\n")
    put(root, "text-to-empty", b"")
    put(root, "mode-only.sh", b"#!/bin/sh\n", 0o755)
    put(root, "mode-and-content.sh", b"echo b\n", 0o755)
    put(root, "exec-to-plain.sh", b"echo x\n")
    put(root, "new-exec.sh", b"echo hi\n", 0o755)
    put(root, "target-a", b"a\n")
    link(root, "link-new", "modified.txt")
    link(root, "link-dangling", "nowhere/at/all")
    link(root, "link-retarget", "bin/nul.dat")
    put(root, "link-to-file", b"a file now\n")
    link(root, "file-to-link", "target-a")
    link(root, "link-non-utf8", os.fsdecode(b"na\xefve"))
    put(root, "bin/new.bin", bytes(range(255, -1, -1)))
    put(root, "bin/changed.bin", b"\x89PNG\r\n\x1a\n" + bytes(range(64, 0, -1)))
    put(root, "bin/nul.dat", b"text\0less\n")
    put(root, "bin/random.bin", RANDOM[:50_000] + b"\0changed\0" + RANDOM[50_010:] + b"tail")
    put(root, "text-to-binary.txt", b"\0plain\n")
    put(root, "binary-to-text.txt", b"plain now\n")
    put(root, "latin1.txt", b"cafe\n")
    put(root, "late-nul.txt", b"x" * 9000 + b"\0\n")
    put(root, SPACE, b"one\n2\n")
    put(root, NON_ASCII, b"naive\n")
    put(root, NON_UTF8, b"name is still not utf-8\n")
    put(root, TAB, b"tab in the name\n")
    put(root, QUOTE, b"quote and backslash\n")
    put(root, "new/nested/deep/file.txt", b"deep\n")
    put(root, "turn/into_dir/inner.txt", b"now a folder\n")


def read_tree(root: Path) -> tuple[Tree, set[str]]:
    """Every file and link under *root* (content, target, executable bit), and every folder."""
    files: Tree = {}
    folders: set[str] = set()
    for folder, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                files[rel] = ("link", os.fsencode(os.readlink(path)), False)
            elif stat.S_ISDIR(st.st_mode):
                folders.add(rel)
            else:
                files[rel] = ("file", path.read_bytes(), bool(st.st_mode & stat.S_IXUSR))
    return files, folders


def patch_files(before: Path, after: Path, keep: Callable[[str], bool] = lambda path: True) -> list[PatchFile]:
    """One PatchFile per path in either tree, in git's order (by the path's bytes)."""
    old_tree, _ = read_tree(before)
    new_tree, _ = read_tree(after)

    def side(root: Path, tree: Tree, rel: str) -> tuple[bytes | None, int | None, str | None]:
        entry = tree.get(rel)
        if entry is None:
            return None, None, None
        if entry[0] == "link":
            return None, None, os.fsdecode(entry[1])
        return entry[1], stat.S_IMODE((root / rel).lstat().st_mode), None

    out = []
    for rel in sorted(set(old_tree) | set(new_tree), key=os.fsencode):
        if keep(rel):
            old, old_mode, old_link = side(before, old_tree, rel)
            new, new_mode, new_link = side(after, new_tree, rel)
            out.append(PatchFile(rel, old, new, old_mode, new_mode, old_link, new_link))
    return out


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, bytes]]:
    base = tmp_path_factory.mktemp("patch")
    before, after = base / "before", base / "after"
    build_before(before)
    build_after(after)
    yield before, after, git_patch(patch_files(before, after)).encode("utf-8")


def copy_of(tree: Path, dest: Path) -> Path:
    """A copy with links as links and modes kept, in its own folder (so git finds no repository)."""
    dest.mkdir()
    shutil.copytree(tree, dest / "work", symlinks=True)
    return dest / "work"


def committed_repo(tree: Path, dest: Path) -> Path:
    """A repository whose one commit, and worktree, is *tree*."""
    repo = copy_of(tree, dest)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "before")
    return repo


def replace_worktree(repo: Path, tree: Path) -> None:
    """Make *repo*'s worktree (not its .git) hold exactly *tree*, and stage it all."""
    for entry in list(repo.iterdir()):
        if entry.name == ".git":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    for entry in tree.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, repo / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, repo / entry.name, follow_symlinks=False)
    # An index without stat data: a file of the same size whose inode and times happen to match
    # (copies made within one clock tick) would otherwise be taken as unchanged and not hashed.
    git(repo, "read-tree", "HEAD")
    git(repo, "add", "-A")


def test_apply_gives_the_after_tree_exactly(trees: tuple[Path, Path, bytes], tmp_path: Path) -> None:
    before, after, patch = trees
    work = copy_of(before, tmp_path / "fwd")
    git(work, "apply", "--check", stdin=patch)
    git(work, "apply", stdin=patch)
    assert read_tree(work) == read_tree(after)


def test_apply_reverse_gives_the_before_tree_exactly(trees: tuple[Path, Path, bytes], tmp_path: Path) -> None:
    before, after, patch = trees
    work = copy_of(after, tmp_path / "rev")
    git(work, "apply", "-R", "--check", stdin=patch)
    git(work, "apply", "-R", stdin=patch)
    assert read_tree(work) == read_tree(before)


def test_patch_round_trips_in_an_initialised_repository(trees: tuple[Path, Path, bytes], tmp_path: Path) -> None:
    """In a repository, with the index: forward then back again gives the committed tree."""
    before, after, patch = trees
    repo = committed_repo(before, tmp_path / "repo")
    git(repo, "apply", "--index", stdin=patch)
    files, _ = read_tree(repo)
    assert {k: v for k, v in files.items() if not k.startswith(".git/")} == read_tree(after)[0]
    git(repo, "apply", "--index", "-R", stdin=patch)
    files, _ = read_tree(repo)
    assert {k: v for k, v in files.items() if not k.startswith(".git/")} == read_tree(before)[0]
    git(repo, "read-tree", "HEAD")  # re-hash everything: see replace_worktree
    assert git(repo, "status", "--porcelain", "--untracked-files=all").stdout == b""


def test_every_changed_path_is_listed_and_unchanged_ones_are_not(trees: tuple[Path, Path, bytes]) -> None:
    before, after, patch = trees
    old_tree, _ = read_tree(before)
    new_tree, _ = read_tree(after)
    changed = {p for p in set(old_tree) | set(new_tree) if old_tree.get(p) != new_tree.get(p)}
    assert "same.txt" not in changed and "target-a" not in changed

    numstat = git(before.parent, "apply", "--numstat", "-z", stdin=patch).stdout
    listed = {os.fsdecode(record.split(b"\t", 2)[2]) for record in numstat.split(b"\0") if record}
    assert listed == changed

    sections = patch.count(b"diff --git ")
    assert sections == len(changed) + 2  # file-to-link and link-to-file: each a deletion and a creation
    stat_out = git(before.parent, "apply", "--stat", stdin=patch).stdout.decode()
    assert f" {sections} files changed" in stat_out.splitlines()[-1]

    summary = git(before.parent, "apply", "--summary", stdin=patch).stdout.decode()
    assert " create mode 120000 link-new" in summary
    assert " delete mode 100755 deleted-exec.sh" in summary
    assert " mode change 100644 => 100755 mode-only.sh" in summary
    assert " mode change 100755 => 100644 exec-to-plain.sh" in summary


def test_same_content_and_mode_is_left_out() -> None:
    assert git_patch([PatchFile("a", b"x\n", b"x\n", 0o644, 0o664)]) == ""
    assert git_patch([PatchFile("l", None, None, old_link="t", new_link="t")]) == ""
    assert git_patch([PatchFile("n", None, None)]) == ""
    assert git_patch([]) == ""


def test_mode_only_change_has_no_hunk() -> None:
    assert git_patch([PatchFile("run.sh", b"x\n", b"x\n", 0o644, 0o755)]) == (
        "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"
    )


def test_text_matches_git_diff_line_for_line(trees: tuple[Path, Path, bytes], tmp_path: Path) -> None:
    """What git writes for the same text changes (--full-index), headers, hunks and quoting included."""
    before, after, _ = trees

    def keep(rel: str) -> bool:
        return not rel.startswith("bin/") and rel not in NOT_GIT_TEXT

    repo = committed_repo(before, tmp_path / "cmp")
    replace_worktree(repo, after)
    files = patch_files(before, after, keep)
    theirs = git(repo, "diff", "--cached", "--full-index", "--no-renames", "HEAD", "--", *(f.path for f in files))
    ours = git_patch(files).encode("utf-8")
    assert ours.count(b"diff --git ") == 35
    assert ours.decode("utf-8").splitlines() == theirs.stdout.decode("utf-8").splitlines()
    assert ours == theirs.stdout


def test_binary_patch_matches_git(tmp_path: Path) -> None:
    """New and deleted binaries, whose literal hunks git writes the same way: headers equal, the
    base85 lines equal byte for byte when encoding git's own deflated bytes, and the same content."""
    # deflated, these run from 9 to over 100 bytes (and one of many lines): the last length letter of
    # a line and the first of the next (26/27, 52/53, 104/105), and every padding of a 4-byte group
    rng = random.Random(7)
    sizes = [*range(1, 100), 3000]
    contents = {f"b{size:05d}.bin": b"\0" + rng.randbytes(size - 1) for size in sizes}
    work = tmp_path / "bin" / "work"
    put(work, "old.bin", b"\0old binary\xff")
    git(work, "init", "-q")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "before")
    (work / "old.bin").unlink()
    for name, data in contents.items():
        put(work, name, data)
    git(work, "add", "-A")
    theirs = git(work, "diff", "--cached", "--binary", "HEAD").stdout.decode("ascii").splitlines()

    files = [PatchFile(name, None, data, None, 0o644) for name, data in sorted(contents.items())]
    files.append(PatchFile("old.bin", b"\0old binary\xff", None, 0o644, None))
    ours = git_patch(files).splitlines()

    def is_data(line: str) -> bool:
        return bool(line) and " " not in line  # base85 has no space; every header line has one

    def payloads(lines: list[str]) -> list[bytes]:
        """Each literal hunk's deflated bytes, decoded from its base85 lines."""
        out: list[bytes] = []
        for line in lines:
            if line.startswith("literal "):
                out.append(b"")
            elif is_data(line):
                size = ord(line[0]) - ord("A") + 1 if line[0] <= "Z" else ord(line[0]) - ord("a") + 27
                out[-1] += base64.b85decode(line[1:])[:size]
        return out

    assert [line if not is_data(line) else "DATA" for line in ours] == [
        line if not is_data(line) else "DATA" for line in theirs
    ]
    their_payloads = payloads(theirs)
    assert [zlib.decompress(p) for p in payloads(ours)] == [zlib.decompress(p) for p in their_payloads]
    assert min(map(len, their_payloads)) < 26 and max(map(len, their_payloads)) > 105
    assert {len(p) % 4 for p in their_payloads} == {0, 1, 2, 3}
    assert [line for p in their_payloads for line in _base85_lines(p)] == [line for line in theirs if is_data(line)]


def test_base85_lines_carry_every_length() -> None:
    data = random.Random(3).randbytes(160)
    for size in range(161):
        lines = _base85_lines(data[:size])
        assert len(lines) == -(-size // 52)
        letters = "".join(chr(ord("A") + n - 1) if n <= 26 else chr(ord("a") + n - 27) for n in range(1, 53))
        assert [line[0] for line in lines] == [
            letters[len(data[i : min(i + 52, size)]) - 1] for i in range(0, size, 52)
        ]
        assert all(len(line) == 1 + 5 * -(-(letters.index(line[0]) + 1) // 4) for line in lines)
        decoded = b"".join(base64.b85decode(line[1:])[: letters.index(line[0]) + 1] for line in lines)
        assert decoded == data[:size]


def test_quoting_matches_git(tmp_path: Path) -> None:
    names = [
        b"sp ace",
        b"tab\there",
        b'q"b\\s',
        b"caf\xc3\xa9",
        b"nb\xff",
        b"nl\nx",
        b"del\x7fc\x01",
        b"\x1b",
        b"plain",
    ]
    repo = tmp_path / "q" / "work"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    for name in names:
        (repo / os.fsdecode(name)).write_bytes(b"x")
    git(repo, "add", "-A")
    listed = git(repo, "ls-files").stdout.decode("ascii").splitlines()
    assert sorted(quote_path("", os.fsdecode(name)) for name in names) == sorted(listed)


def test_blob_id_is_gits() -> None:
    assert blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    assert blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_text_too_large_to_diff_goes_as_binary_and_applies(tmp_path: Path) -> None:
    old = b"line\n" * (MAX_DIFF_BYTES // 5 + 1)
    new = old[:4096] + b"changed\n" + old[4096:]
    patch = git_patch([PatchFile("big.txt", old, new, 0o644, 0o644)])
    assert "GIT binary patch" in patch
    work = tmp_path / "big" / "work"
    put(work, "big.txt", old)
    git(work, "apply", stdin=patch.encode())
    assert (work / "big.txt").read_bytes() == new
    git(work, "apply", "-R", stdin=patch.encode())
    assert (work / "big.txt").read_bytes() == old


def test_a_side_cannot_be_both_content_and_a_link() -> None:
    with pytest.raises(ValueError, match="both content and a symbolic link"):
        PatchFile("x", b"data", None, 0o644, None, old_link="target")

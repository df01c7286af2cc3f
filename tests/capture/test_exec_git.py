"""Shell commands run by ``turnback exec``, git refs moved in a turn, and the turn views, end to end.

Everything runs through the real CLI as a subprocess against real git: the
commands a turn runs (``git commit``, ``checkout -b``, ``tag``, ``stash``)
inherit turnback's environment, so the git identity and config are pinned
for the test process and passed through to every CLI call.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import stat
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from tests.conftest import Result, cli_env, tree_state

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}
Tb = Callable[..., Result]
IGNORED = "(ignored by .gitignore: contents not shown)"
INDEX_LINE = "your git index is unchanged; git status can show staged changes"
REFS_TOGETHER = "a ref moved between the preview and the undo, so no ref was moved (turnback undo 1 plans it again)"
CHANGED_SINCE_PREVIEW = "changed since the preview; nothing was done to it (turnback undo 1 plans it again)"


@pytest.fixture(autouse=True)
def pinned_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixed identity, no user or system config, and no inherited variable that redirects git."""
    for name in list(os.environ):
        if name.startswith("GIT_"):
            monkeypatch.delenv(name)
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def tb(cli: Tb) -> Tb:
    """The CLI in the project folder, with the pinned git environment passed through to what it runs."""

    def run(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> Result:
        return cli(*args, stdin=stdin, env={**GIT_ENV, **(env or {})})

    return run


def js(result: Result) -> Any:
    """The one JSON object on stdout (Any, to index without casts)."""
    return json.loads(result.out)


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout.strip()


def init_repo(root: Path) -> str:
    """Make *root* a repository with everything in it committed on main; the commit id."""
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return git(root, "rev-parse", "HEAD")


def refs_of(repo: Path) -> dict[str, str]:
    """Every ref git lists, and HEAD (``ref: NAME`` when attached, else its commit)."""
    listing = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    refs = dict(line.split(" ", 1) for line in listing.splitlines())
    head = subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=repo, capture_output=True, text=True)
    refs["HEAD"] = "ref: " + head.stdout.strip() if head.returncode == 0 else git(repo, "rev-parse", "HEAD")
    return refs


def work_tree(root: Path) -> dict[str, tuple[str, bytes | str | None, int]]:
    """tree_state without any ``.git`` (a repository's folder, or a submodule's ``.git`` file)."""
    return {path: entry for path, entry in tree_state(root).items() if ".git" not in PurePosixPath(path).parts}


def git_files(folder: Path) -> dict[str, tuple[int, int, bytes | str]]:
    """Every entry below *folder*: mode, mtime and content (or link target), to prove nothing was written."""
    found: dict[str, tuple[int, int, bytes | str]] = {}
    for parent, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(parent, name)
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                content: bytes | str = os.readlink(path)
            elif stat.S_ISDIR(st.st_mode):
                content = b""
            else:
                content = path.read_bytes()
            found[path.relative_to(folder).as_posix()] = (st.st_mode, st.st_mtime_ns, content)
    return found


def start(tb: Tb, message: str = "agent turn") -> str:
    assert tb("init").rc == 0
    session = tb("session", "new", "--title", "t").out.strip()
    begun = tb("turn", "begin", "--session", session, "--message", message)
    assert begun.rc == 0, begun.err
    return str(session)


def run_exec(tb: Tb, session: str, script: str, *extra: str) -> Result:
    result = tb("exec", "--session", session, *extra, "--", "sh", "-c", script)
    assert result.rc == 0, (result.out, result.err)
    return result


def short(oid: str) -> str:
    return oid[:7]


# -- 1. git commands in a turn, and their undo --------------------------------------------------

AGENT_GIT = (
    "printf 'agent line\\n' >> README.md"
    " && git commit -q -am 'agent commit'"
    " && git checkout -q -b feature"
    " && git tag v1"
    " && git tag -a v1-note -m 'an annotated tag'"
    " && printf 'stashed work\\n' >> src/main.py"
    " && git stash -q"
    " && printf 'untracked\\n' > notes.txt"
)


def test_undo_moves_every_ref_back_and_leaves_the_index(tb: Tb, project: Path) -> None:
    base = init_repo(project)
    refs_before = refs_of(project)
    files_before = work_tree(project)
    session = start(tb, "commit, branch, tag and stash")
    run_exec(tb, session, AGENT_GIT)
    end = tb("turn", "end", "--session", session)
    assert end.rc == 0, end.err
    index = project / ".git" / "index"
    index_after_turn = index.read_bytes()
    index_mtime = index.stat().st_mtime_ns

    after = refs_of(project)
    commit = after["refs/heads/main"]
    assert commit != base and after["refs/heads/feature"] == commit and after["refs/tags/v1"] == commit
    assert after["HEAD"] == "ref: refs/heads/feature"
    preview = tb("undo", "--dry-run")
    assert preview.rc == 0, preview.err
    assert preview.lines[-1].startswith("only the recorded files go back: ")  # the turn ran a command
    assert preview.lines[1:-1] == [
        "trash       notes.txt",
        "restore     README.md",
        f"ref         feature {short(commit)} -> (none)",
        f"ref         main {short(commit)} -> {short(base)}",
        f"ref         stash {short(after['refs/stash'])} -> (none)",
        f"ref         tag v1 {short(commit)} -> (none)",
        f"ref         tag v1-note {short(after['refs/tags/v1-note'])} -> (none)",
        "ref         HEAD feature -> main",
        INDEX_LINE,
    ]
    data = js(tb("undo", "--dry-run", "--json"))
    assert [(r["action"], r["path"], r["status"]) for r in data["rows"]] == [
        ("trash", "notes.txt", "pending"),
        ("restore", "README.md", "pending"),
        ("ref", "feature", "pending"),
        ("ref", "main", "pending"),
        ("ref", "stash", "pending"),
        ("ref", "tag v1", "pending"),
        ("ref", "tag v1-note", "pending"),
        ("ref", "HEAD", "pending"),
    ]

    applied = tb("undo", "--yes")
    assert applied.rc == 0, applied.err
    assert applied.lines[-1].startswith("undone: 1 file restored, 1 file moved to ")
    assert applied.lines[-1].endswith("/, 6 refs moved")
    assert refs_of(project) == refs_before
    assert work_tree(project) == files_before
    assert index.read_bytes() == index_after_turn
    assert index.stat().st_mtime_ns == index_mtime
    assert js(tb("log", "--json"))["turns"][0]["undone"] is True


# -- 2. a ref moved by someone else after the turn --------------------------------------------------

AGENT_BRANCH = (
    "printf 'agent line\\n' >> README.md"
    " && git commit -q -am 'agent commit'"
    " && git checkout -q -b feature"
    " && git tag v1"
)


def _turn_then_user_commit(tb: Tb, project: Path) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """A turn that commits on main, branches to feature and tags; then the user commits on feature.

    Returns the refs before the turn, right after it, and after the user's commit.
    """
    init_repo(project)
    before = refs_of(project)
    session = start(tb)
    run_exec(tb, session, AGENT_BRANCH)
    assert tb("turn", "end", "--session", session).rc == 0
    after_turn = refs_of(project)
    git(project, "commit", "-q", "--allow-empty", "-m", "the user's own commit")
    return before, after_turn, refs_of(project)


def test_a_ref_moved_since_the_turn_is_skipped_and_the_others_move(tb: Tb, project: Path) -> None:
    readme = (project / "README.md").read_bytes()
    before, after_turn, now = _turn_then_user_commit(tb, project)
    user_commit = now["refs/heads/feature"]
    assert user_commit != after_turn["refs/heads/feature"]
    index = (project / ".git" / "index").read_bytes()

    preview = tb("undo", "--dry-run")
    assert preview.rc == 0, preview.err
    assert preview.lines[-1].startswith("only the recorded files go back: ")  # the turn ran a command
    moved_since = f"moved since the turn (it holds {short(user_commit)}); left as it is"
    commit = after_turn["refs/heads/main"]
    assert preview.lines[1:-1] == [
        "restore     README.md",
        f"skip        feature ({moved_since})",
        f"ref         main {short(commit)} -> {short(before['refs/heads/main'])}",
        f"ref         tag v1 {short(commit)} -> (none)",
        "ref         HEAD feature -> main",
        INDEX_LINE,
    ]
    applied = tb("undo", "--yes", "--json")
    assert applied.rc == 0, applied.err
    data = js(applied)
    assert [(r["action"], r["path"], r["status"], r["reason"]) for r in data["rows"]] == [
        ("restore", "README.md", "done", None),
        ("skip", "feature", "skipped", moved_since),
        ("ref", "main", "done", None),
        ("ref", "tag v1", "done", None),
        ("ref", "HEAD", "done", None),
    ]
    refs = refs_of(project)
    # The ref moved since is untouched; every other ref is back where it was before the turn.
    assert refs == {
        "refs/heads/main": before["refs/heads/main"],
        "refs/heads/feature": user_commit,
        "HEAD": before["HEAD"],
    }
    for name in set(refs) | set(before) | set(now):
        assert refs.get(name) in (before.get(name), now.get(name)), name  # nothing half-moved
    assert (project / "README.md").read_bytes() == readme
    assert (project / ".git" / "index").read_bytes() == index
    [turn] = js(tb("log", "--json"))["turns"]
    assert (turn["undone"], turn["partly_undone"]) == (True, True)


def _ref_moved_during_an_interrupted_undo(tb: Tb, project: Path, *flags: str) -> tuple[Result, dict[str, str]]:
    """An undo killed after its first file step (before any ref moves), a user commit, then the undo resumed."""
    init_repo(project)
    session = start(tb)
    run_exec(tb, session, AGENT_BRANCH)
    assert tb("turn", "end", "--session", session).rc == 0
    killed = tb("undo", "--yes", env={"TURNBACK_FAULT_KILL_AFTER": "1"})
    assert killed.rc == -9, (killed.rc, killed.err)
    git(project, "commit", "-q", "--allow-empty", "-m", "the user's own commit")
    refs = refs_of(project)
    return tb("undo", "--yes", *flags), refs


def test_refs_move_all_or_none_when_one_moved_after_the_preview(tb: Tb, project: Path) -> None:
    readme = (project / "README.md").read_bytes()
    resumed, refs = _ref_moved_during_an_interrupted_undo(tb, project, "--json")
    assert resumed.rc == 0, resumed.err
    data = js(resumed)
    assert data["resumed"] is True
    assert [(r["action"], r["path"], r["status"], r.get("note")) for r in data["rows"]] == [
        ("restore", "README.md", "done", None),
        ("ref", "feature", "skipped", CHANGED_SINCE_PREVIEW),
        ("ref", "main", "skipped", REFS_TOGETHER),
        ("ref", "tag v1", "skipped", REFS_TOGETHER),
        ("ref", "HEAD", "skipped", REFS_TOGETHER),
    ]
    assert refs_of(project) == refs  # not one ref moved
    assert (project / "README.md").read_bytes() == readme
    # Undoing the turn by number plans the refs again: the moved one is skipped, the rest move.
    again = tb("undo", "1", "--yes", "--json")
    assert again.rc == 0, again.err
    assert [(r["action"], r["path"], r["status"]) for r in js(again)["rows"]] == [
        ("skip", "feature", "skipped"),
        ("ref", "main", "done"),
        ("ref", "tag v1", "done"),
        ("ref", "HEAD", "done"),
    ]
    after = refs_of(project)
    assert after["refs/heads/feature"] == refs["refs/heads/feature"]
    assert after["HEAD"] == "ref: refs/heads/main" and "refs/tags/v1" not in after


def test_the_text_result_names_the_refs_that_were_not_moved(tb: Tb, project: Path) -> None:
    resumed, _ = _ref_moved_during_an_interrupted_undo(tb, project)
    assert resumed.rc == 0, resumed.err
    finished = next(i for i, line in enumerate(resumed.lines) if line.startswith("finished the interrupted undo"))
    result = resumed.lines[finished:]
    for name in ("feature", "main", "tag v1", "HEAD"):
        assert any(line.startswith("skipped") and name in line for line in result), (name, result)


def test_the_skip_note_names_the_command_that_plans_the_refs_again(tb: Tb, project: Path) -> None:
    """A partly undone turn counts as undone for a plain undo, so the note names ``turnback undo 1``."""
    resumed, _ = _ref_moved_during_an_interrupted_undo(tb, project)
    assert resumed.rc == 0, resumed.err
    assert any("turnback undo 1 plans it again" in line for line in resumed.lines), resumed.lines
    assert tb("undo", "--dry-run").rc == 1
    again = tb("undo", "1", "--dry-run")
    assert again.rc == 0, again.err
    assert any(line.startswith("ref         main ") for line in again.lines), again.lines


# -- 3. nested repositories and submodules ------------------------------------------------------------


def test_nested_repository_and_submodule_are_restored_and_their_git_untouched(
    tb: Tb,
    project: Path,
    tmp_path: Path,
) -> None:
    library = tmp_path / "library"
    (library / "lib").mkdir(parents=True)
    (library / "lib" / "core.txt").write_bytes(b"core\n")
    (library / "gone.txt").write_bytes(b"to be deleted\n")
    init_repo(library)
    init_repo(project)
    git(project, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "sub")
    git(project, "commit", "-q", "-m", "add the submodule")
    assert (project / "sub" / ".git").is_file() and (project / ".git" / "modules" / "sub").is_dir()
    nested = project / "nested"
    nested.mkdir()
    (nested / "n.txt").write_bytes(b"nested one\n")
    (nested / "d.txt").write_bytes(b"nested, deleted\n")
    init_repo(nested)

    session = start(tb)
    files_before = work_tree(project)
    git_before = {
        "nested": git_files(nested / ".git"),
        "modules": git_files(project / ".git" / "modules"),
        "root": git_files(project / ".git"),
    }
    script = (
        "printf 'more\\n' >> sub/lib/core.txt && rm sub/gone.txt && mkdir -p sub/new/deep"
        " && printf 'x\\n' > sub/new/deep/x.txt && printf 'changed\\n' > nested/n.txt && rm nested/d.txt"
        " && printf 'y\\n' > nested/y.txt && printf 'top\\n' >> README.md"
    )
    run_exec(tb, session, script)
    changes = {(c["path"], c["kind"]) for c in js(tb("log", "--json"))["turns"][0]["calls"][0]["changes"]}
    assert changes == {
        ("README.md", "modified"),
        ("sub/lib/core.txt", "modified"),
        ("sub/gone.txt", "deleted"),
        ("sub/new", "new"),
        ("sub/new/deep", "new"),
        ("sub/new/deep/x.txt", "new"),
        ("nested/n.txt", "modified"),
        ("nested/d.txt", "deleted"),
        ("nested/y.txt", "new"),
    }
    assert tb("turn", "end", "--session", session).rc == 0
    applied = tb("undo", "--yes")
    assert applied.rc == 0, applied.err
    assert work_tree(project) == files_before
    assert git_files(nested / ".git") == git_before["nested"]
    assert git_files(project / ".git" / "modules") == git_before["modules"]
    assert git_files(project / ".git") == git_before["root"]
    assert (project / "sub" / ".git").read_bytes() == b"gitdir: ../.git/modules/sub\n"


# -- 4. the patch of a turn, applied backwards and forwards -----------------------------------------


def _tb_bytes(home: Path, project: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The CLI with stdout a pipe, captured as bytes."""
    return subprocess.run(
        [sys.executable, "-m", "turnback", *args],
        cwd=project,
        env=cli_env(home, GIT_ENV),
        capture_output=True,
        timeout=120,
        check=False,
    )


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    return target


def _git_apply(folder: Path, patch: bytes, *flags: str) -> None:
    proc = subprocess.run(["git", "apply", *flags], cwd=folder, input=patch, capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr.decode()


def test_the_turn_patch_applies_backwards_and_forwards(tb: Tb, home: Path, project: Path, tmp_path: Path) -> None:
    (project / "empty.txt").write_bytes(b"")
    before = tree_state(project)
    before_copy = _copy(project, tmp_path / "before")
    session = start(tb)
    edited = tb("edit", "--session", session, "src/main.py", "--old", "print('hi')", "--new", "print('hello')")
    assert edited.rc == 0, edited.err
    assert tb("write", "--session", session, "docs/guide.md", stdin=b"still no final newline\nsecond").rc == 0
    assert tb("write", "--session", session, "logo.bin", stdin=bytes(range(255, -1, -1)) * 3 + b"\0tail").rc == 0
    assert tb("write", "--session", session, "assets/new.bin", stdin=b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\xff").rc == 0
    assert tb("rm", "--session", session, "src/pkg/crlf.txt").rc == 0
    run_exec(
        tb,
        session,
        "chmod +x src/main.py && chmod -x run.sh && ln -sfn docs/guide.md link-to-readme"
        " && ln -s ../README.md src/up-link && mkdir -p new/folder && printf 'a\\nno newline' > new/folder/file.txt"
        " && rm empty.txt && : > created-empty.txt",
    )
    assert tb("turn", "end", "--session", session).rc == 0
    after = tree_state(project)

    diff = _tb_bytes(home, project, "diff")
    assert diff.returncode == 0, diff.stderr
    assert diff.stderr == b""
    patch = diff.stdout
    for expected in (
        b"GIT binary patch",
        b"\\ No newline at end of file",
        b"new file mode 120000",
        b"old mode 100644\nnew mode 100755",
        b"old mode 100755\nnew mode 100644",
        b"deleted file mode 100644",
        b"+++ b/new/folder/file.txt",
        b"-one\r\n",
    ):
        assert expected in patch, expected
    assert not patch.startswith(b"\x1b") and b"\x1b[" not in patch  # plain into a pipe

    backwards = _copy(project, tmp_path / "after")
    _git_apply(backwards, patch, "-R")
    assert tree_state(backwards) == before

    _git_apply(before_copy, patch, "--check")
    _git_apply(before_copy, patch)
    assert tree_state(before_copy) == after


# -- 5. ignored files are listed, never shown ---------------------------------------------------------


def _ignored_project(project: Path) -> str:
    (project / ".gitignore").write_bytes(b".env\nsecrets/\n")
    init_repo(project)
    (project / ".env").write_bytes(b"API=old\n")
    return "tbmark" + uuid.uuid4().hex


def _marker_script(marker: str, target: str, tracked: str) -> str:
    """A command writing *marker* to *target* without the marker on its command line."""
    half = len(marker) // 2
    return f"printf '%s%s\\n' {marker[:half]} {marker[half:]} >> {target} && printf 'visible\\n' >> {tracked}"


def test_ignored_files_never_show_their_contents(tb: Tb, project: Path) -> None:
    marker = _ignored_project(project)
    outputs: list[Result] = []
    session = start(tb)
    outputs.append(run_exec(tb, session, _marker_script(marker, ".env", "README.md")))
    outputs.append(tb("write", "--session", session, "secrets/key.txt", stdin=f"KEY={marker}\n".encode()))
    outputs.append(run_exec(tb, session, _marker_script(marker, "secrets/exec.txt", "docs/guide.md"), "--json"))
    outputs.append(tb("write", "--session", session, "secrets/k2.txt", "--json", stdin=marker.encode()))
    outputs.append(tb("turn", "end", "--session", session))
    for written in (".env", "secrets/key.txt", "secrets/exec.txt", "secrets/k2.txt"):
        assert marker.encode() in (project / written).read_bytes(), written
    # A second turn to see the end of a turn in JSON too.
    assert tb("turn", "begin", "--session", session).rc == 0
    outputs.append(run_exec(tb, session, _marker_script(marker, ".env", "README.md")))
    outputs.append(tb("turn", "end", "--session", session, "--json"))
    (project / "secrets" / "key.txt").write_bytes(f"user edit {marker}\n".encode())  # a conflict for revert

    log = tb("log", "--json")
    calls = [call["id"] for turn in js(log)["turns"] for call in turn["calls"]]
    outputs += [log, tb("log")]
    for call in calls:
        outputs += [tb("show", call), tb("show", call, "--json")]
        outputs += [tb("revert", call, "--dry-run"), tb("revert", call, "--dry-run", "--json")]
    for turn in ("1", "2"):
        outputs += [tb("diff", turn), tb("diff", turn, "--json"), tb("diff", turn, "--stat")]
        outputs.append(tb("diff", turn, "--stat", "--json"))
    outputs += [tb("undo", "--dry-run"), tb("undo", "--dry-run", "--json"), tb("undo", "--yes")]
    outputs += [tb("undo", "--force", "--dry-run"), tb("undo", "--force", "--dry-run", "--json")]

    for result in outputs:
        assert result.rc == 0, (result.out, result.err)
        assert marker not in result.out and marker not in result.err, (result.out, result.err)

    diff = tb("diff", "1")
    ignored_lines = [
        f"changed .env {IGNORED}",
        f"new secrets/exec.txt {IGNORED}",
        f"new secrets/k2.txt {IGNORED}",
        f"new secrets/key.txt {IGNORED}",
    ]
    assert sorted(diff.err.splitlines()) == ignored_lines  # in the order of the turn's changes
    assert "+++ b/README.md" in diff.out and "+++ b/docs/guide.md" in diff.out
    assert ".env" not in diff.out and "secrets/" not in diff.out
    stat_lines = tb("diff", "1", "--stat").lines
    assert stat_lines[-5] == "" and sorted(stat_lines[-4:]) == ignored_lines
    files = {f["path"]: f["ignored"] for f in js(tb("diff", "1", "--json"))["files"]}
    assert files == {
        ".env": True,
        "README.md": False,
        "docs/guide.md": False,
        "secrets/exec.txt": True,
        "secrets/k2.txt": True,
        "secrets/key.txt": True,
    }


def test_show_lists_an_ignored_file_without_its_contents(tb: Tb, project: Path) -> None:
    marker = _ignored_project(project)
    session = start(tb)
    written = tb("write", "--session", session, "secrets/key.txt", "--json", stdin=f"KEY={marker}\n".encode())
    ran = run_exec(tb, session, _marker_script(marker, ".env", "README.md"), "--json")
    write_id, exec_id = js(written)["call"]["id"], js(ran)["call"]["id"]
    assert tb("turn", "end", "--session", session).rc == 0
    shown_write = tb("show", str(write_id))
    shown_exec = tb("show", str(exec_id))
    assert marker not in shown_write.out + shown_write.err
    assert marker not in shown_exec.out + shown_exec.err
    assert f"new secrets/key.txt {IGNORED}" in shown_write.lines
    assert f"modified .env {IGNORED}" in shown_exec.lines
    assert "+visible" in shown_exec.lines  # a file that is not ignored still shows its diff


# -- 6. diff --stat ------------------------------------------------------------------------------------


def test_diff_stat_lines(tb: Tb, project: Path) -> None:
    (project / "src" / "main.rs").write_bytes(b"fn main() {}\n")
    session = start(tb)
    assert tb("edit", "--session", session, "src/main.rs", "--old", "{}", "--new", "{ run() }").rc == 0
    assert tb("write", "--session", session, "notes.md", stdin=b"a note\n").rc == 0
    assert tb("turn", "end", "--session", session).rc == 0
    result = tb("diff", "--stat")
    assert (result.rc, result.err) == (0, "")
    assert result.out == (
        "code   +1  -1\n"
        "docs   +1\n"
        "total  +2  -1\n"
        "\n"
        "changed src/main.rs  +1 -1\n"
        "new     notes.md     +1\n"
        "2 files changed, +2 -1\n"
    )
    files = js(tb("diff", "--stat", "--json"))["files"]
    assert files == [
        {"path": "src/main.rs", "kind": "modified", "added": 1, "removed": 1, "ignored": False},
        {"path": "notes.md", "kind": "new", "added": 1, "removed": 0, "ignored": False},
    ]


def test_diff_of_a_turn_that_only_moved_refs_names_the_refs(tb: Tb, project: Path) -> None:
    base = init_repo(project)
    session = start(tb)
    run_exec(tb, session, "git commit -q --allow-empty -m 'an empty commit' && git tag v1")
    assert tb("turn", "end", "--session", session).rc == 0
    moved = git(project, "rev-parse", "HEAD")
    result = tb("diff", "1")
    assert (result.rc, result.out) == (0, "")  # a pipe still gets a plain (empty) patch
    assert (
        result.err
        == f"no files changed; refs moved: main {short(base)} -> {short(moved)}, tag v1 (none) -> {short(moved)}\n"
    )
    shown = js(tb("diff", "1", "--json"))
    assert (shown["files"], shown["patch"]) == ([], "")
    assert shown["refs"] == [
        {"name": "refs/heads/main", "before": base, "after": moved},
        {"name": "refs/tags/v1", "before": None, "after": moved},
    ]


# -- 7. the exec line, exit codes, --json ------------------------------------------------------------------


def test_exec_prints_one_line_after_the_command(tb: Tb, project: Path) -> None:
    old, new = ["l1", "l2", "l3"], ["l1", "X", "Y", "Z", "l3"]
    (project / "a.txt").write_text("".join(f"{line}\n" for line in old))
    (project / "old.txt").write_bytes(b"old\n")
    delta = list(difflib.ndiff(old, new))
    added, removed = sum(d.startswith("+ ") for d in delta), sum(d.startswith("- ") for d in delta)
    made = [f"n{i}.txt" for i in (3, 1, 4, 2)]
    session = start(tb)
    script = (
        "echo from-the-command && printf '"
        + "\\n".join(new)
        + "\\n' > a.txt && rm old.txt && "
        + " && ".join(f"echo {name} > {name}" for name in made)
    )
    result = run_exec(tb, session, script)
    items = ["deleted old.txt", f"changed a.txt +{added} -{removed}", f"new {sorted(made)[0]}"]
    expected = " · ".join(items) + f" (+{len(made) - 1} more)"
    assert expected == "deleted old.txt · changed a.txt +3 -1 · new n1.txt (+3 more)"
    assert result.lines == ["from-the-command", expected]
    assert result.err == ""


def test_exec_exit_codes_pass_through(tb: Tb, project: Path) -> None:
    session = start(tb)
    seven = tb("exec", "--session", session, "--", "sh", "-c", "exit 7")
    assert (seven.rc, seven.out, seven.err) == (7, "", "")
    killed = tb("exec", "--session", session, "--", "sh", "-c", "kill -9 $$")
    assert killed.rc == 128 + 9
    missing = tb("exec", "--session", session, "--", "no-such-command-for-turnback")
    assert (missing.rc, missing.out) == (127, "")
    assert len(missing.err.splitlines()) == 1
    assert missing.err.startswith("turnback: no-such-command-for-turnback")
    assert tb("turn", "end", "--session", session).rc == 0
    no_turn = tb("exec", "--session", session, "--", "sh", "-c", "touch never.txt")
    assert no_turn.rc == 125
    assert no_turn.err == "turnback: no turn is running in this session; begin one first (turnback turn begin)\n"
    assert not (project / "never.txt").exists()


def test_exec_json(tb: Tb, project: Path) -> None:
    session = start(tb)
    script = "echo to-stdout && echo to-stderr >&2 && printf 'j\\n' > j.txt && exit 3"
    result = tb("exec", "--session", session, "--json", "--", "sh", "-c", script)
    assert result.rc == 3
    assert result.out.count("\n") == 1
    data = js(result)
    assert data["schema"] == 1
    assert (data["exit"], data["line"]) == (3, "new j.txt")
    call = data["call"]
    assert call["changes"] == [{"path": "j.txt", "kind": "new"}]
    assert js(tb("show", str(call["id"]), "--json"))["call"]["id"] == call["id"]
    assert result.err.splitlines() == ["to-stdout", "to-stderr", "new j.txt"]


def test_exec_json_of_a_missing_command_is_one_object(tb: Tb, project: Path) -> None:
    session = start(tb)
    missing = tb("exec", "--session", session, "--json", "--", "no-such-command-for-turnback")
    assert missing.rc == 127
    assert json.loads(missing.out)["error"]["exit"] == 127

"""Git refs around a turn: read them without writing, move them back with compare-and-swap.

A turn may run git itself (``commit``, ``checkout -b``, ``tag``, ``stash``).
Undoing the turn puts back the refs the turn moved: HEAD, branches, tags and
``refs/stash``. Nothing else in ``.git`` is ours to touch: not the index, not
the objects, not the config. So refs are read only through git (loose and
packed refs alike, whatever the ref backend) and written only through git's
own locking, each write checked against the value the ref must hold now.

Reading runs git with ``GIT_OPTIONAL_LOCKS=0`` and only plumbing that never
refreshes the index, so a read leaves every file in ``.git`` as it was.

Writing (:func:`move_refs`) is one ``git update-ref -z --stdin`` transaction:
git locks every ref, compares each with its expected old value, and either
commits them all or none. Two things git cannot say in that transaction are
handled around it:

* An old value for HEAD is compared with the *resolved* id, so "detached at
  X" and "attached to main, main at X" look alike to git. While the
  transaction is prepared (HEAD locked), HEAD is read again and compared
  exactly; on a mismatch the transaction is aborted.
* git (2.39) cannot write a symbolic ref in a transaction, and refuses a
  transaction that names HEAD and also the branch HEAD points to. An attached
  HEAD is therefore set with ``git symbolic-ref`` after the transaction, and a
  detached HEAD that cannot share the transaction gets its own right after;
  each checks HEAD first, and if HEAD no longer holds what it must, the
  transaction is reversed (with the same compare-and-swap) and the move
  reports ``False``.

Every git process gets an environment without the inherited ``GIT_*``
variables that pick a repository, index or object store (a hook or an agent
may have set ``GIT_DIR`` or ``GIT_INDEX_FILE``), with ``LC_ALL=C``.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from turnback.catalog import Message
from turnback.errors import UnsafePathError
from turnback.model import ref_short_name as short_name
from turnback.model import ref_value_text as describe_value

RefValue = str
"""A 40- (or 64-) hex object id, or ``"ref: refs/heads/NAME"`` for an attached HEAD."""

HEAD = "HEAD"
SYMREF_PREFIX = "ref: "
REFLOG_MESSAGE = "turnback: undo"

# The refs a turn's git commands move and an undo may put back; nothing else is read or written.
_NAMESPACES = ("refs/heads/", "refs/tags/")
_STASH = "refs/stash"
_FIND_GIT_DIR = ("rev-parse", "--absolute-git-dir")
_SYMBOLIC_HEAD = ("symbolic-ref", "-q", HEAD)
# One record per ref, every field NUL-terminated: a ref name holds no NUL, so the split is exact whatever it holds.
_FOR_EACH_REF = ("for-each-ref", "--format=%(objectname)%00%(refname)%00%(symref)%00", *_NAMESPACES, _STASH)

_OBJECT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")

# Inherited variables kept: where git itself and the user's config live. The
# user's own git honours them, so turnback sees the repository as the user
# does (safe.directory, core.logAllRefUpdates). Every other GIT_* variable
# goes: GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_OBJECT_DIRECTORY,
# GIT_COMMON_DIR, GIT_NAMESPACE, GIT_CONFIG_PARAMETERS, GIT_TRACE, ...
_KEPT_GIT_VARIABLES = frozenset({"GIT_EXEC_PATH", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM"})


class RefMove(NamedTuple):
    """One ref to put back: it must hold *expect* now, and will hold *target*.

    ``expect=None`` means the ref must not exist; ``target=None`` deletes it.
    """

    name: str
    expect: RefValue | None
    target: RefValue | None


class _Outcome(NamedTuple):
    """How a transaction ended: committed, or not (with git's message when git refused)."""

    committed: bool
    message: str = ""


# -- running git -----------------------------------------------------------------------------


def git_env() -> dict[str, str]:
    env = {
        name: value for name, value in os.environ.items() if not name.startswith("GIT_") or name in _KEPT_GIT_VARIABLES
    }
    env["LC_ALL"] = "C"
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


def _decode(data: bytes) -> str:
    # Ref names are bytes to git; surrogateescape keeps any byte and gives it back unchanged.
    return data.decode("utf-8", "surrogateescape")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _message(proc: subprocess.CompletedProcess[bytes]) -> str:
    text = _decode(proc.stderr).strip() or _decode(proc.stdout).strip()
    return text or f"git exited with status {proc.returncode}"


def _start_git(root: str, command: list[str], *, stdin: int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    """Start git *command* in *root*, its output read through pipes; UnsafePathError when git cannot run at all."""
    try:
        return subprocess.Popen(
            command, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=git_env(), cwd=root
        )
    except OSError as exc:
        raise UnsafePathError(Message("git_cannot_run", path=root, error=str(exc.strerror or exc))) from exc


def _ended(proc: subprocess.Popen[bytes]) -> subprocess.CompletedProcess[bytes]:
    """*proc* run to its end, as ``subprocess.run`` does it (killed when this process is interrupted meanwhile)."""
    with proc:
        try:
            out, err = proc.communicate()
        except BaseException:
            proc.kill()
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _git(root: str, args: Sequence[str], *, gdir: str | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run one git command in *root* (against *gdir* when known) to its end."""
    return _ended(_start_git(root, ["git", f"--git-dir={gdir}", *args] if gdir is not None else ["git", *args]))


def _git_side_by_side(root: str, commands: Sequence[Sequence[str]]) -> list[subprocess.CompletedProcess[bytes]]:
    """Run the git *commands* in *root* at once, each finding the repository as :func:`_git` without a git dir
    does: a git process is some 2 ms here, most of it starting. The results in order. Only the last command may
    write more than a pipe holds (each is read to its end in turn)."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        for args in commands:
            started.append(_start_git(root, ["git", *args]))
    except UnsafePathError:
        for proc in started:
            proc.kill()
            proc.communicate()
        raise
    return [_ended(proc) for proc in started]


def _find_git_dir(root: str) -> str:
    return _git_dir_found(root, _git(root, _FIND_GIT_DIR))


def _git_dir_found(root: str, proc: subprocess.CompletedProcess[bytes]) -> str:
    """The git dir that ``git rev-parse --absolute-git-dir`` in *root* answered (*proc*)."""
    if proc.returncode != 0:
        raise UnsafePathError(Message("not_git_repository", path=root, error=_message(proc)))
    path = os.fsdecode(proc.stdout.removesuffix(b"\n"))
    if not os.path.isabs(path):
        raise UnsafePathError(Message("git_dir_not_absolute", path=root, gdir=repr(path)))
    return path


# -- reading ---------------------------------------------------------------------------------


def _may_be_in_repository(root: str) -> bool:
    """Whether a ``.git`` exists at *root* or above (or ``GIT_DIR`` could name one): cheap, before running git."""
    current = os.path.abspath(root)
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            return True
        parent = os.path.dirname(current)
        if parent == current:
            return False
        current = parent


def git_dir(root: str) -> str | None:
    """The absolute git dir of the repository holding *root* (a worktree folder or one inside it).

    ``None`` when *root* is in no git repository, does not exist, or git is
    not installed: a project without git simply has no refs to keep.
    """
    if not _may_be_in_repository(root):
        return None
    try:
        return _find_git_dir(root)
    except UnsafePathError:
        return None


def _read_head(root: str, gdir: str) -> RefValue:
    return _head_found(root, gdir, _git(root, _SYMBOLIC_HEAD, gdir=gdir))


def _head_found(root: str, gdir: str, proc: subprocess.CompletedProcess[bytes]) -> RefValue:
    """HEAD, from what ``git symbolic-ref -q HEAD`` answered (*proc*); detached, its commit (one git more)."""
    if proc.returncode == 0:
        return SYMREF_PREFIX + _decode(proc.stdout.removesuffix(b"\n"))
    if proc.returncode != 1:
        raise UnsafePathError(Message("git_head_unreadable", gdir=gdir, error=_message(proc)))
    proc = _git(root, ["rev-parse", "-q", "--verify", HEAD], gdir=gdir)
    value = _decode(proc.stdout).strip()
    if proc.returncode != 0 or not _OBJECT_ID.fullmatch(value):
        raise UnsafePathError(Message("git_head_unknown", gdir=gdir, error=_message(proc)))
    return value


def _read_refs_in(root: str, gdir: str) -> dict[str, RefValue]:
    refs = _refs_listed(gdir, _git(root, _FOR_EACH_REF, gdir=gdir))
    refs[HEAD] = _read_head(root, gdir)
    return refs


def _refs_listed(gdir: str, proc: subprocess.CompletedProcess[bytes]) -> dict[str, RefValue]:
    """Every branch, tag and the stash, from what ``git for-each-ref`` answered (*proc*)."""
    if proc.returncode != 0:
        raise UnsafePathError(Message("git_refs_unreadable", gdir=gdir, error=_message(proc)))
    refs: dict[str, RefValue] = {}
    for record in proc.stdout.split(b"\0\n"):
        if not record:
            continue
        fields = record.split(b"\0")
        if len(fields) != 3:
            raise UnsafePathError(Message("git_ref_form_unknown", gdir=gdir, record=repr(record)))
        oid, name, symref = (_decode(field) for field in fields)
        if symref:
            # An alias of another ref (refs/heads/master -> main) moves with its
            # target; moving it as well would move the target twice.
            continue
        if not _OBJECT_ID.fullmatch(oid):
            raise UnsafePathError(Message("git_ref_oid_unknown", name=name, gdir=gdir, oid=repr(oid)))
        refs[name] = oid
    return refs


def read_refs(root: str) -> dict[str, RefValue] | None:
    """HEAD, every branch, every tag and ``refs/stash`` of *root*'s repository; ``None`` when there is none.

    HEAD is ``"ref: refs/heads/x"`` when attached (also on a branch with no
    commit yet, which then has no entry of its own) and the commit id when
    detached. A tag is its ref's own object id (an annotated tag's tag object,
    not the commit). Loose and packed refs read alike. Nothing in ``.git`` is
    written: no index refresh, no lock file.
    """
    if not _may_be_in_repository(root):
        return None
    try:
        found, head, listed = _git_side_by_side(root, [_FIND_GIT_DIR, _SYMBOLIC_HEAD, _FOR_EACH_REF])
        gdir = _git_dir_found(root, found)
    except UnsafePathError:
        return None  # as git_dir: no repository, or no git
    refs = _refs_listed(gdir, listed)
    refs[HEAD] = _head_found(root, gdir, head)
    return refs


# -- planning --------------------------------------------------------------------------------


def ref_moves(before: Mapping[str, RefValue], after: Mapping[str, RefValue]) -> list[RefMove]:
    """The moves that take the refs from *after* back to *before*, by name, HEAD last.

    Each move expects the *after* value and puts back the *before* value, so
    a ref that moved again since *after* was read is not touched.
    """
    names = sorted((set(before) | set(after)) - {HEAD})
    if HEAD in before or HEAD in after:
        names.append(HEAD)
    return [
        RefMove(name, expect=after.get(name), target=before.get(name))
        for name in names
        if before.get(name) != after.get(name)
    ]


# -- writing ---------------------------------------------------------------------------------


def _is_symbolic(value: RefValue | None) -> bool:
    return value is not None and value.startswith(SYMREF_PREFIX)


def _check_move(move: RefMove) -> None:
    """Refuse a move turnback never plans: another namespace, a malformed value, a deleted HEAD."""
    if move.name == HEAD:
        if move.target is None:
            raise ValueError("HEAD cannot be deleted")
        values = (move.expect, move.target)
        for value in values:
            if value is None:
                continue
            if _is_symbolic(value):
                if not value[len(SYMREF_PREFIX) :].startswith("refs/") or "\0" in value:
                    raise ValueError(f"HEAD value {value!r} does not name a ref")
            elif not _OBJECT_ID.fullmatch(value):
                raise ValueError(f"HEAD value {value!r} is not an object id")
        return
    if not (move.name == _STASH or move.name.startswith(_NAMESPACES)) or "\0" in move.name:
        raise ValueError(f"{move.name!r} is not a branch, tag or the stash")
    for value in (move.expect, move.target):
        if value is not None and not _OBJECT_ID.fullmatch(value):
            raise ValueError(f"{move.name} value {value!r} is not an object id")


def _zero(oid: str) -> str:
    """The zero id ("must not exist") of the object format *oid* belongs to (SHA-1 or SHA-256)."""
    return "0" * len(oid)


def _ref_line(move: RefMove) -> bytes:
    """One ``update-ref -z`` command: put *target* there if the ref holds *expect*."""
    name = _encode(move.name)
    if move.target is None:
        assert move.expect is not None  # a move from nothing to nothing is filtered out earlier
        return b"delete " + name + b"\0" + _encode(move.expect) + b"\0"
    old = move.expect if move.expect is not None else _zero(move.target)
    return b"update " + name + b"\0" + _encode(move.target) + b"\0" + _encode(old) + b"\0"


def _head_line(move: RefMove) -> bytes:
    """Detach HEAD at ``move.target``, never writing through to the branch HEAD points to.

    git compares an old value for HEAD with the resolved id, which cannot tell
    attached from detached, so HEAD is also compared exactly while it is
    locked. An attached HEAD expected has no id to give: the old value is left
    out and that exact comparison is the whole check.
    """
    assert move.target is not None
    old = b"" if move.expect is None or _is_symbolic(move.expect) else _encode(move.expect)
    return b"option no-deref\0update HEAD\0" + _encode(move.target) + b"\0" + old + b"\0"


def _exchange(proc: subprocess.Popen[bytes], data: bytes, reply: bytes) -> bool:
    """Send *data* to ``update-ref --stdin`` and wait for its *reply*; False when git stopped instead."""
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(data)
        proc.stdin.flush()
    except BrokenPipeError:
        return False
    return proc.stdout.readline().removesuffix(b"\n") == reply


def _transaction(
    root: str,
    gdir: str,
    lines: Sequence[bytes],
    *,
    create_reflog: bool = False,
    check_locked: Callable[[], bool] | None = None,
) -> _Outcome:
    """Run *lines* as one ``update-ref`` transaction: all of them, or none.

    ``prepare`` locks every ref and checks every old value; then
    *check_locked* runs while the locks are held, and the transaction is
    committed only if it returns True.
    """
    command = ["git", f"--git-dir={gdir}", "update-ref", "-z", "--stdin", "-m", REFLOG_MESSAGE]
    if create_reflog:
        command.append("--create-reflog")
    proc = _start_git(root, command, stdin=subprocess.PIPE)
    committed = False
    checked = True
    try:
        if _exchange(proc, b"start\0", b"start: ok") and _exchange(
            proc, b"".join(lines) + b"prepare\0", b"prepare: ok"
        ):
            checked = check_locked is None or check_locked()
            if checked:
                committed = _exchange(proc, b"commit\0", b"commit: ok")
            else:
                _exchange(proc, b"abort\0", b"abort: ok")
    finally:
        # Closing stdin ends the session; an uncommitted transaction is aborted by git.
        _, err = proc.communicate()
    if committed and proc.returncode == 0:
        return _Outcome(True)
    if not checked:
        return _Outcome(False)
    return _Outcome(False, _decode(err).strip() or f"git update-ref exited with status {proc.returncode}")


def _expectations_hold(root: str, gdir: str, moves: Sequence[RefMove]) -> bool:
    refs = _read_refs_in(root, gdir)
    return all(refs.get(move.name) == move.expect for move in moves)


def _put_refs(root: str, gdir: str, moves: Sequence[RefMove], *, check_head: RefMove | None = None) -> bool:
    """One transaction for *moves* (a HEAD move among them detaches HEAD); False on a CAS mismatch.

    A refused transaction whose expectations all still hold failed for
    another reason (a stale lock file, a name clash), which is an error.
    """
    lines: list[bytes] = []
    for move in moves:
        if move.name == HEAD:
            lines.append(_head_line(move))
        else:
            lines.append(_ref_line(move))
    check: Callable[[], bool] | None = None
    if check_head is not None:
        expected = check_head.expect

        def check() -> bool:
            return _read_head(root, gdir) == expected

    # Without a reflog a recreated refs/stash is not in `git stash list`.
    create_reflog = any(move.name == _STASH and move.expect is None and move.target is not None for move in moves)
    outcome = _transaction(root, gdir, lines, create_reflog=create_reflog, check_locked=check)
    if outcome.committed:
        return True
    if not outcome.message or not _expectations_hold(root, gdir, moves):
        return False
    raise UnsafePathError(Message("git_refused_refs", gdir=gdir, error=outcome.message))


def _set_symbolic_head(root: str, gdir: str, move: RefMove) -> bool:
    """Attach HEAD to the branch of ``move.target`` if HEAD holds ``move.expect`` just before.

    ``git symbolic-ref`` has no old value, so HEAD is read again right before
    it; the window left is the few milliseconds between the two commands.
    """
    assert move.target is not None
    if _read_head(root, gdir) != move.expect:
        return False
    proc = _git(root, ["symbolic-ref", "-m", REFLOG_MESSAGE, HEAD, move.target[len(SYMREF_PREFIX) :]], gdir=gdir)
    if proc.returncode == 0:
        return True
    if _read_head(root, gdir) != move.expect:
        return False
    raise UnsafePathError(Message("git_refused_head", gdir=gdir, error=_message(proc)))


def _move_head_alone(root: str, gdir: str, move: RefMove) -> bool:
    if _is_symbolic(move.target):
        return _set_symbolic_head(root, gdir, move)
    return _put_refs(root, gdir, [move], check_head=move)


def move_refs(root: str, moves: Sequence[RefMove]) -> bool:
    """Apply *moves* all or none; False (and nothing changed) when any ref no longer holds its ``expect``.

    Branches, tags, the stash and a HEAD to detach go in one ``update-ref``
    transaction, each with its expected old value. An attached HEAD is set
    with ``git symbolic-ref`` after it; HEAD moves in a step of its own also
    when it is attached to a branch the transaction moves (git refuses both
    in one). If HEAD turns out to have changed by then, the transaction is
    reversed and the result is False. Raises :class:`UnsafePathError` when git
    cannot run, *root* is in no repository, or git refuses for a reason other
    than a changed ref (the message says which); ``ValueError`` for a move
    outside HEAD, branches, tags and the stash.
    """
    gdir = _find_git_dir(root)
    pending = [move for move in moves if move.expect != move.target]
    for move in pending:
        _check_move(move)
    names = [move.name for move in pending]
    if len(set(names)) != len(names):
        raise ValueError("a ref is named by more than one move")
    refs = [move for move in pending if move.name != HEAD]
    head = next((move for move in pending if move.name == HEAD), None)
    if head is not None and _read_head(root, gdir) != head.expect:
        # Checked again under the lock or right before HEAD is set; this early
        # look only spares moving the refs and reversing them.
        return False
    together = (
        head is not None
        and not _is_symbolic(head.target)
        and not (_is_symbolic(head.expect) and any(SYMREF_PREFIX + move.name == head.expect for move in refs))
    )
    if together:
        assert head is not None
        return _put_refs(root, gdir, [*refs, head], check_head=head)
    if refs and not _put_refs(root, gdir, refs):
        return False
    if head is None:
        return True
    try:
        if _move_head_alone(root, gdir, head):
            return True
    except UnsafePathError:
        _reverse(root, gdir, refs)
        raise
    # HEAD changed after the refs moved: reverse them so that nothing changed.
    _reverse(root, gdir, refs)
    return False


def _reverse(root: str, gdir: str, done: Sequence[RefMove]) -> None:
    """Take back moves that were committed, with the same compare-and-swap."""
    reverse = [RefMove(move.name, expect=move.target, target=move.expect) for move in done]
    if reverse and not _put_refs(root, gdir, reverse):
        raise UnsafePathError(Message("git_head_stuck", gdir=gdir))


# -- ignored files ---------------------------------------------------------------------------


def ignored_paths(root: str, paths: Sequence[str], *, scratch_git_dir: str) -> set[str]:
    """Which of *paths* (relative to *root*) git ignores: every ``.gitignore``, info/exclude, core.excludesFile.

    In a repository git answers for the repository (a tracked file is not
    ignored). Elsewhere an empty scratch repository (*scratch_git_dir*, in
    turnback's store, never in the project) lets git answer for the
    ``.gitignore`` files alone. :class:`UnsafePathError` when git cannot run.
    """
    if not paths:
        return set()
    if git_dir(root) is not None:
        command = ["git", "check-ignore", "--stdin", "-z"]
    else:
        if not os.path.isdir(scratch_git_dir):
            made = _git(root, ["init", "--bare", "-q", scratch_git_dir])
            if made.returncode != 0:
                raise UnsafePathError(Message("git_scratch_failed", error=_message(made)))
        command = ["git", f"--git-dir={scratch_git_dir}", f"--work-tree={root}", "check-ignore", "--stdin", "-z"]
        command.append("--no-index")
    try:
        proc = subprocess.run(
            command,
            input=b"".join(os.fsencode(path) + b"\0" for path in paths),
            capture_output=True,
            env=git_env(),
            cwd=root,
            check=False,
        )
    except OSError as exc:
        raise UnsafePathError(Message("git_cannot_run", path=root, error=str(exc.strerror or exc))) from exc
    if proc.returncode not in (0, 1):
        raise UnsafePathError(Message("git_check_ignore_failed", path=root, error=_message(proc)))
    return {os.fsdecode(item) for item in proc.stdout.split(b"\0") if item}


__all__ = [
    "HEAD",
    "RefMove",
    "RefValue",
    "describe_value",
    "git_dir",
    "ignored_paths",
    "move_refs",
    "read_refs",
    "ref_moves",
    "short_name",
]

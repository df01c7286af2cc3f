"""The 1,000-file undo of ``sidebyside.py undo-many``, undone by this checkout's turnback and by an earlier one's.

    git archive main src | tar -x -C /tmp/main-src
    .venv/bin/python benchmarks/undo_before.py --before /tmp/main-src/src --files 10000 --rounds 3

Each round records the same turn (one command editing 800 files, creating 100, a tenth of them in 10 new
folders, and deleting 100) in two identical copies of the tree, each with a store of its own, with this
checkout's code; a third copy gets the same command under a shadow git repository. After ``sync`` (untimed),
each side undoes it, who goes first rotating round by round: turnback's ``plan_undo`` + ``apply`` in a process
of its own (``PYTHONPATH`` the ``--before`` folder, or this checkout's ``src``; the process start and the
store's opening are not timed, what a CLI run would also decode, such as the stat cache, is), and git's
``clean -fdq`` + ``reset -q --hard``. Each tree is checked byte for byte against the tree before the turn.
It prints each round, the medians, the ratios (after/before, and each to git) and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from benchutil import positive, temp_base
from sidebyside import (
    KEY_SECRET,
    ShadowGit,
    TextSource,
    TreeInfo,
    TurnbackSide,
    copy_project,
    manifest,
    many_files_change,
    prepare_tree,
    progress,
    require_same,
    timed,
    write_many_files_change,
)

HERE_SRC = Path(__file__).resolve().parent.parent / "src"
# What a child process runs: the undo of turns from NUMBER in the store at HOME, timed, as one JSON line.
CHILD = """
import json, sys, time
import turnback
home, number = sys.argv[1], int(sys.argv[2])
engine = turnback.Engine.open(home, key_secret=sys.argv[3], try_keyring=False)
session = engine.store.sessions()[0]
start = time.perf_counter()
plan = engine.plan_undo(session.id, from_turn=number)
planned = time.perf_counter()
result = engine.apply(plan)
done = time.perf_counter()
left = sum(1 for row in result.plan.rows if row.status != "done")
print(json.dumps({"plan_s": planned - start, "apply_s": done - planned, "left": left}))
"""


def record(where: Path, master: Path, info: TreeInfo, text: TextSource, rng_seed: str) -> tuple[Path, int]:
    """A copy of the tree at *where* with the many-files turn recorded in a store beside it: (store, turn number)."""
    tree, store = where / "tree", where / "store"
    copy_project(master, tree, info)
    side = TurnbackSide(store, tree)
    try:
        side.scan()
        side.wait_adopted()
        change, _ = many_files_change(info, random.Random(rng_seed), text, tree)
        turn = side.begin_turn("many files")
        call_id = side.begin_command()
        write_many_files_change(tree, change)
        side.finish_command(call_id)
        side.end_turn()
    finally:
        side.close()
    return store, turn


def undo_in_child(src: Path, store: Path, turn: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(src))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(store), str(turn), KEY_SECRET], env=env, capture_output=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the undo with {src} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    figures: dict[str, float] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    if figures["left"]:
        raise RuntimeError(f"the undo with {src} left {figures['left']:.0f} rows undone")
    return figures


def one_round(
    number: int, master: Path, info: TreeInfo, base: Path, text: TextSource, seed: int, before_src: Path
) -> dict[str, float]:
    where = base / f"round-{number}"
    try:
        return _timed_round(number, where, master, info, text, seed, before_src)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _timed_round(
    number: int, where: Path, master: Path, info: TreeInfo, text: TextSource, seed: int, before_src: Path
) -> dict[str, float]:
    rng_seed = f"undo-many:{seed}:{info.label}:{number}"
    sides = {"before": where / "before", "after": where / "after"}
    recorded = {name: record(folder, master, info, text, rng_seed) for name, folder in sides.items()}
    git_tree = where / "git" / "tree"
    copy_project(master, git_tree, info)
    expected = manifest(git_tree)
    git = ShadowGit(where / "git" / "shadow.git", git_tree)
    git.init()
    git.checkpoint()
    start_sha = git.head()
    change, _ = many_files_change(info, random.Random(rng_seed), text, git_tree)
    write_many_files_change(git_tree, change)
    git.checkpoint()
    os.sync()
    figures: dict[str, float] = {}
    sources = {"before": before_src, "after": HERE_SRC}

    def undo(name: str) -> None:
        if name == "git":
            figures["git_s"] = timed(lambda: git.undo(start_sha))[0]
            return
        figures.update({f"{name}_{key}": value for key, value in undo_in_child(sources[name], *recorded[name]).items()})

    order = ["before", "after", "git"]
    order = order[number % 3 :] + order[: number % 3]
    for name in order:
        undo(name)
    for name, folder in sides.items():
        require_same(expected, manifest(folder / "tree"), f"the undo with the {name} code")
    require_same(expected, manifest(git_tree), "shadow git's undo", hollow_may_go=True)
    for name in ("before", "after"):
        figures[f"{name}_s"] = figures[f"{name}_plan_s"] + figures[f"{name}_apply_s"]
    progress(
        f"  round {number + 1} ({' '.join(order)}): before {figures['before_s']:.3f} s"
        f" (plan {figures['before_plan_s']:.3f}), after {figures['after_s']:.3f} s"
        f" (plan {figures['after_plan_s']:.3f}), git {figures['git_s']:.3f} s"
    )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--before", required=True, type=Path, help="a src folder of the turnback to compare with")
    parser.add_argument("--files", type=int, default=10_000, help="tree size (default 10,000)")
    parser.add_argument("--rounds", type=positive, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", metavar="DIR", help="make the temp folder in DIR")
    args = parser.parse_args()
    if not (args.before / "turnback" / "__init__.py").is_file():
        parser.error(f"{args.before} holds no turnback package")
    load_start = os.getloadavg()
    text = TextSource(args.seed)
    rounds = []
    with temp_base(args.dir, "turnback-undo-before-") as base:
        master, info = prepare_tree(base, args.files, None, args.seed, text, plain=False)
        for number in range(args.rounds):
            rounds.append(one_round(number, master, info, base, text, args.seed, args.before.resolve()))
        load_end = os.getloadavg()
        report(rounds, info, load_start, load_end)  # before the temp folder goes: that takes minutes on a busy disk
    return 0


def report(
    rounds: list[dict[str, float]], info: TreeInfo, load_start: tuple[float, ...], load_end: tuple[float, ...]
) -> None:
    median = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    print(f"{os.cpu_count()} CPUs · load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end")
    print(f"{info.files:,} files; the 1,000-file turn; medians of {len(rounds)} rounds:")
    for name in ("before", "after"):
        print(
            f"  {name:6}  {median[f'{name}_s']:.3f} s (plan {median[f'{name}_plan_s']:.3f} s,"
            f" apply {median[f'{name}_apply_s']:.3f} s)  git/turnback {median['git_s'] / median[f'{name}_s']:.2f}×"
        )
    print(f"  git     {median['git_s']:.3f} s")
    ratios = [r["after_s"] / r["before_s"] for r in rounds]
    print(f"  after/before per round: {', '.join(f'{x:.2f}' for x in ratios)} (target: git/turnback ≥ 10×)")


if __name__ == "__main__":
    sys.exit(main())

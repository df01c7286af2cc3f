"""The line diff: trimming what both sides share before matching gives a valid diff, hunked as difflib hunks."""

from __future__ import annotations

import difflib
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from turnback.render.diff import _grouped, _opcodes, diff_bytes

LINES = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "d\n", "e\n", "f\n", "tail"]), max_size=40)


@settings(max_examples=400, deadline=None)
@given(LINES, LINES)
def test_the_opcodes_turn_one_side_into_the_other(a: list[str], b: list[str]) -> None:
    codes = _opcodes(a, b)
    rebuilt: list[str] = []
    next_a = next_b = 0
    for tag, i1, i2, j1, j2 in codes:
        assert (i1, j1) == (next_a, next_b)
        if tag == "equal":
            assert a[i1:i2] == b[j1:j2]
        rebuilt += b[j1:j2]
        next_a, next_b = i2, j2
    assert (next_a, next_b) == (len(a), len(b))
    assert rebuilt == b
    assert not any(x[0] == y[0] == "equal" for x, y in itertools.pairwise(codes))


@settings(max_examples=400, deadline=None)
@given(LINES, LINES)
def test_hunks_are_grouped_as_difflib_groups_them(a: list[str], b: list[str]) -> None:
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    assert _grouped(matcher.get_opcodes(), 3) == [list(group) for group in matcher.get_grouped_opcodes(3)]


def test_one_line_changed_in_a_long_file_is_one_hunk() -> None:
    old = b"".join(b"line %d\n" % i for i in range(20000))
    new = old.replace(b"line 10000\n", b"line ten thousand\n")
    diff = diff_bytes(old, new)
    assert (diff.added, diff.removed) == (1, 1)
    assert diff.lines[0] == "@@ -9998,7 +9998,7 @@"

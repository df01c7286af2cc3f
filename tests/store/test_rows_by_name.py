"""The store reads every row by column name, never by position (issue 14): a column added or moved in a
migration cannot shift what a query reads."""

from __future__ import annotations

import ast
from pathlib import Path

STORE = Path(__file__).resolve().parents[2] / "src" / "turnback" / "store"


def _rows_read_by_position(path: Path) -> list[str]:
    """``row[0]``-like reads in *path*: a subscript by an integer of a name that says it is a row."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id.lower().endswith("row")  # a row, not a list of rows (rows[0] is the first)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, int)
        ):
            found.append(f"{path.relative_to(STORE)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_query_in_the_store_reads_a_row_by_position() -> None:
    assert [hit for path in sorted(STORE.rglob("*.py")) for hit in _rows_read_by_position(path)] == []

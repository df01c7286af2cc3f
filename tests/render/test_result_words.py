"""What a result line counts: files and folders apart, in every language (issue 14: "7 files restored" counted
a folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.history.helpers import new_session

UNDONE = {
    "en": "undone: 3 files restored, 2 folders restored",
    "zh-CN": "已撤销：恢复了 3 个文件、恢复了 2 个文件夹",
    "ja": "取り消しました：3 個のファイルを復元、2 個のフォルダーを復元",
}


@pytest.mark.parametrize("lang", sorted(UNDONE))
def test_an_undo_that_puts_back_a_removed_folder_counts_its_files_and_folders_apart(
    cli: Any, project: Path, lang: str
) -> None:
    (project / "kept" / "sub").mkdir(parents=True)
    for name in ("kept/a.txt", "kept/sub/b.txt", "kept/sub/c.txt"):
        (project / name).write_bytes(name.encode())
    sid = new_session(cli)
    assert cli("turn", "begin", "--session", sid, "--message", "remove kept/").rc == 0
    assert cli("exec", "--session", sid, "--", "rm", "-r", "kept").rc == 0
    assert cli("turn", "end", "--session", sid).rc == 0
    undone = cli("undo", "--session", sid, "--yes", "--lang", lang)
    assert undone.rc == 0, undone.err
    assert any(line.startswith(UNDONE[lang]) for line in undone.lines), undone.lines
    assert (project / "kept" / "sub" / "c.txt").read_bytes() == b"kept/sub/c.txt"

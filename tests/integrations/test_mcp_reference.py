"""``turnback mcp`` side by side with the reference filesystem server (``@modelcontextprotocol/server-filesystem``,
pinned, installed from npm into the test cache): the same calls on identical trees, asserting that they agree
where turnback means to agree and that they differ where turnback means to differ (it refuses ambiguous and
fuzzy edits)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

import turnback
from tests import npmcache
from tests.conftest import tree_state
from tests.integrations.test_mcp import drive, is_error, ok, refused, serve

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters

T = TypeVar("T")
REFERENCE_PACKAGE = "@modelcontextprotocol/server-filesystem"
REFERENCE_VERSION = "2026.8.31"
TURNBACK_ONLY = {"delete_file", "run_command"}


def _reference_entry(folder: Path) -> Path | None:
    entry = folder / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
    package = entry.parent.parent / "package.json"
    if entry.is_file() and package.is_file() and json.loads(package.read_text())["version"] == REFERENCE_VERSION:
        return entry
    return None


@pytest.fixture(scope="session")
def reference_server() -> Path:
    if shutil.which("node") is None:
        pytest.skip("node is not installed (CI installs Debian's nodejs and npm): cannot run the reference server")
    folder = npmcache.cache_dir(f"server-filesystem-{REFERENCE_VERSION}")
    return npmcache.npm_install(REFERENCE_PACKAGE, REFERENCE_VERSION, folder, _reference_entry)


def make_tree(root: Path) -> Path:
    """The tree both servers get: text files at several depths, dot-files, a node_modules, a link inside."""
    files = {
        "a.txt": "top\n",
        "b.md": "# b\n",
        "notes.txt.bak": "old\n",
        ".hidden.txt": "dot\n",
        "src/c.txt": "c\n",
        "src/deep/d.txt": "d\n",
        "src/deep/e.py": "print('e')\n",
        "node_modules/pkg/f.txt": "f\n",
        "docs/guide.md": "guide\n",
        "docs/sub/g.txt": "g\n",
        "twice.txt": "same\nsame\n",
        "indented.py": "def f():\n    return 1\n",
        "pic.png": "",
        "song.mp3": "",
        "blob.bin": "",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    (root / "song.mp3").write_bytes(b"ID3\x00\x01")
    (root / "blob.bin").write_bytes(bytes(range(256)))
    (root / "link.txt").symlink_to("src/c.txt")
    return root


class Pair:
    """One tree per server, built alike; *both* runs the same body against each and returns both answers."""

    def __init__(self, tmp_path: Path, home: Path, reference_server: Path):
        self.tmp_path = tmp_path
        self.home = home
        self.entry = reference_server
        self.ref_root = Path(os.path.realpath(make_tree(self._folder("reference"))))
        self.tb_root = Path(os.path.realpath(make_tree(self._folder("turnback"))))

    def _folder(self, name: str) -> Path:
        folder = self.tmp_path / name
        folder.mkdir()
        return folder

    def reference(self, body: Callable[[ClientSession], Awaitable[T]]) -> T:
        params = StdioServerParameters(
            command="node", args=[str(self.entry), str(self.ref_root)], cwd=str(self.ref_root)
        )
        return drive(params, self.tmp_path / "reference.err", body)

    def turnback(self, body: Callable[[ClientSession], Awaitable[T]]) -> T:
        return serve(self.home, self.tb_root, self.tmp_path / "turnback.err", body)

    def both(self, body: Callable[[ClientSession, Path], Awaitable[T]]) -> tuple[T, T]:
        return self.reference(lambda s: body(s, self.ref_root)), self.turnback(lambda s: body(s, self.tb_root))


@pytest.fixture
def pair(tmp_path: Path, home: Path, reference_server: Path) -> Pair:
    return Pair(tmp_path, home, reference_server)


def test_the_same_tools_titles_and_annotations_and_a_version(pair: Pair) -> None:
    async def body(session: ClientSession, root: Path) -> tuple[dict[str, Any], str]:
        listed = await session.list_tools()
        tools = {
            tool.name: (tool.title, tool.annotations.model_dump(exclude_none=True) if tool.annotations else None)
            for tool in listed.tools
        }
        version = (await session.initialize()).server_info.version  # the handshake done, its answer kept
        return tools, version

    (ref_tools, _), (tb_tools, tb_version) = pair.both(body)
    assert set(tb_tools) - set(ref_tools) == TURNBACK_ONLY
    assert set(ref_tools) <= set(tb_tools)
    for name in ref_tools:
        assert tb_tools[name] == ref_tools[name], name
    assert tb_version == turnback.__version__
    assert tb_tools["run_command"][1]["read_only_hint"] is False  # type: ignore[index]


SEARCHES: list[tuple[str, str, list[str]]] = [
    (".", "**/*.txt", []),
    (".", "*.txt", []),
    (".", "**/*.{md,txt}", []),
    (".", "src/**", []),
    (".", "docs", []),
    (".", "**/.hidden*", []),
    (".", "**/*.txt", ["node_modules"]),
    (".", "**/*.txt", ["**/node_modules/**"]),
    (".", "**/*.txt", ["node_modules/**", "docs/**"]),
    (".", "**/*", ["*.txt"]),
    ("src", "*.txt", []),
    ("src", "**/*.txt", ["deep/**"]),
]


@pytest.mark.parametrize(("folder", "pattern", "exclude"), SEARCHES)
def test_search_files_finds_what_the_reference_finds(pair: Pair, folder: str, pattern: str, exclude: list[str]) -> None:
    async def body(session: ClientSession, root: Path) -> list[str]:
        found = await ok(session, "search_files", path=folder, pattern=pattern, excludePatterns=exclude)
        return sorted(os.path.relpath(line, root) for line in found.splitlines() if line != "No matches found")

    ref_found, tb_found = pair.both(body)
    assert tb_found == ref_found
    if pattern == "**/*.txt" and not exclude:
        assert "a.txt" in tb_found  # a top-level file: globstar matches no folder too


@pytest.mark.parametrize("exclude", [["node_modules"], ["*.txt"], ["**/deep"], ["sub"]])
def test_directory_tree_excludes_as_the_reference_does(pair: Pair, exclude: list[str]) -> None:
    def canonical(nodes: list[dict[str, Any]]) -> list[Any]:
        return sorted((n["name"], n["type"], canonical(n.get("children", []))) for n in nodes)

    async def body(session: ClientSession, root: Path) -> list[Any]:
        return canonical(json.loads(await ok(session, "directory_tree", path=".", excludePatterns=exclude)))

    ref_tree, tb_tree = pair.both(body)
    assert tb_tree == ref_tree


def test_reads_agree_listing_with_sizes_multiple_files_and_media(pair: Pair) -> None:
    async def body(session: ClientSession, root: Path) -> tuple[str, str, str, list[dict[str, Any]]]:
        sizes = await ok(session, "list_directory_with_sizes", path="src/deep")
        by_size = await ok(session, "list_directory_with_sizes", path="src", sortBy="size")
        several = await ok(session, "read_multiple_files", paths=["a.txt", "src/c.txt", "missing.txt"])
        media = []
        for name in ("pic.png", "song.mp3", "blob.bin"):
            result = await session.call_tool("read_media_file", {"path": name})
            assert not is_error(result), result
            block = result.content[0].model_dump(exclude_none=True)
            if block["type"] == "resource":
                block["resource"] = {k: v for k, v in block["resource"].items() if k != "uri"}
            media.append(block)
        return sizes, by_size, several.split("\n---\n")[0:2], media  # type: ignore[return-value]

    ref, tb = pair.both(body)
    assert tb[0] == ref[0]
    assert tb[1] == ref[1]
    assert tb[2] == ref[2]
    assert tb[3] == ref[3]
    assert tb[3][0] == {"type": "image", "data": "iVBORw0KGgoA/w==", "mime_type": "image/png"}


def test_a_move_onto_an_existing_file_is_refused_by_both_and_folders_move(pair: Pair) -> None:
    async def body(session: ClientSession, root: Path) -> tuple[str, str]:
        onto = await refused(session, "move_file", source="a.txt", destination="b.md")
        moved = await ok(session, "move_file", source="docs", destination="manual")
        return onto, moved

    (ref_onto, ref_moved), (tb_onto, tb_moved) = pair.both(body)
    assert "Destination already exists" in ref_onto and "Destination already exists" in tb_onto
    assert tb_moved == ref_moved == "Successfully moved docs to manual"
    for root in (pair.ref_root, pair.tb_root):
        assert (root / "a.txt").read_text() == "top\n" and (root / "b.md").read_text() == "# b\n"
        assert (root / "manual" / "sub" / "g.txt").read_text() == "g\n" and not (root / "docs").exists()


def test_home_windows_and_url_paths_make_no_folders_in_the_root(pair: Pair) -> None:
    paths = ["~/x.txt", "C:\\evil.txt", "C:/evil.txt", "file:///etc/evil.txt"]

    async def body(session: ClientSession, root: Path) -> list[bool]:
        answers = []
        for path in paths:
            result = await session.call_tool("write_file", {"path": path, "content": "x"})
            answers.append(is_error(result))
        return answers

    ref_before, tb_before = tree_state(pair.ref_root), tree_state(pair.tb_root)
    ref_refused, tb_refused = pair.both(body)
    assert ref_refused[:3] == [True, True, True]  # the reference refuses ~ (outside) and drives; not file:
    assert tb_refused == [True, True, True, True]
    assert tree_state(pair.tb_root) == tb_before
    assert ref_before is not None


def test_a_link_inside_the_root_is_followed_like_the_reference(pair: Pair) -> None:
    async def body(session: ClientSession, root: Path) -> tuple[str, str]:
        read = await ok(session, "read_text_file", path="link.txt")
        await ok(session, "write_file", path="link.txt", content="through the link\n")
        info = await ok(session, "get_file_info", path="link.txt")
        kinds = "\n".join(line for line in info.splitlines() if line.startswith(("isFile", "isDirectory")))
        return read, kinds

    ref, tb = pair.both(body)
    assert tb == ref == ("c\n", "isDirectory: false\nisFile: true")
    for root in (pair.ref_root, pair.tb_root):
        assert (root / "link.txt").is_symlink()
        assert (root / "src" / "c.txt").read_text() == "through the link\n"


def test_ambiguous_and_fuzzy_edits_are_applied_by_the_reference_and_refused_by_turnback(pair: Pair) -> None:
    async def body(session: ClientSession, root: Path) -> tuple[bool, bool]:
        twice = await session.call_tool(
            "edit_file", {"path": "twice.txt", "edits": [{"oldText": "same", "newText": "x"}]}
        )
        fuzzy = await session.call_tool(
            "edit_file", {"path": "indented.py", "edits": [{"oldText": "return 1", "newText": "return 2"}]}
        )
        spaced = await session.call_tool(
            "edit_file", {"path": "indented.py", "edits": [{"oldText": "def f():\n  return 2", "newText": "y"}]}
        )
        return is_error(twice), is_error(fuzzy) or is_error(spaced)

    (ref_twice, ref_fuzzy), (tb_twice, tb_fuzzy) = pair.both(body)
    assert (ref_twice, ref_fuzzy) == (False, False)
    assert (tb_twice, tb_fuzzy) == (True, True)
    assert (pair.ref_root / "twice.txt").read_text() == "x\nsame\n"
    assert (pair.tb_root / "twice.txt").read_text() == "same\nsame\n"

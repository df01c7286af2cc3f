"""A call's recorded arguments as ``show --input`` may show them.

A call's input is kept as the agent sent it (its start, when long): for a file
that ``.gitignore`` ignores it carries the very contents that turnback never
shows. Which file a call is about is read from the arguments themselves, by
the names of their keys (``file_path``, ``notebook_path``, ``path``,
``source``/``destination``...), whatever the tool and whether or not it
changed anything; when one of them is ignored, every other value (the
content, ``old_string``, ``new_string``, ``new_source``, each of ``edits``...)
is replaced by a marker, and only the paths and the flags stay.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from turnback.catalog import say
from turnback.render.text import IGNORED


def hidden() -> str:
    """The marker that stands for a value of the arguments that is not shown, in the current language."""
    return say("input_value_hidden", why=IGNORED)


def unreadable() -> str:
    """What stands for arguments whose paths cannot all be read (clipped text), in the current language."""
    return say("input_unreadable")


# Key names (lower case, without "_" and "-") that name a path, whatever the tool: these are read, and kept.
_PATH_NAMES = frozenset({"source", "destination", "src", "dst", "dest", "from", "to", "target", "file", "files"})
_PATH_ENDINGS = ("path", "paths", "filename", "filenames")
# A string pair in JSON text, to read the paths of arguments whose text was clipped.
_PAIR = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:\s*"((?:[^"\\]|\\.)*)"')
# What the capture appends to arguments it clipped (capture.calls._clip).
_CLIPPED = re.compile(r"… \(\d+ more characters\)\Z")


def is_path_key(key: str) -> bool:
    name = key.lower().replace("_", "").replace("-", "")
    return name in _PATH_NAMES or name.endswith(_PATH_ENDINGS)


def _named(value: Any) -> Iterator[str]:
    """Every string under a path key of *value*, at any depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not is_path_key(str(key)):
                yield from _named(item)
            elif isinstance(item, str):
                yield item
            elif isinstance(item, list):
                yield from (path for path in item if isinstance(path, str))
    elif isinstance(value, list):
        for item in value:
            yield from _named(item)


def parsed(raw: str) -> dict[str, Any] | None:
    """The arguments as a JSON object, or ``None`` when they are not one (clipped, or not JSON)."""
    try:
        arguments = json.loads(raw)
    except ValueError:
        return None
    return arguments if isinstance(arguments, dict) else None


def named_paths(raw: str) -> list[str] | None:
    """The paths the arguments name, as written; from clipped text, those of its complete pairs.

    ``None`` when clipped text shows no path at all: the path may be in the part that was cut off.
    """
    arguments = parsed(raw)
    if arguments is not None:
        return list(dict.fromkeys(_named(arguments)))
    found = []
    for key, value in _PAIR.findall(raw):
        try:
            key_text, value_text = json.loads(f'"{key}"'), json.loads(f'"{value}"')
        except ValueError:
            continue
        if is_path_key(key_text):
            found.append(value_text)
    if not found and _CLIPPED.search(raw):
        return None
    return list(dict.fromkeys(found))


def _masked(value: Any, marker: str, *, under_path: bool = False) -> Any:
    if isinstance(value, dict):
        return {key: _masked(item, marker, under_path=is_path_key(str(key))) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked(item, marker, under_path=under_path) for item in value]
    if isinstance(value, bool) or value is None or (under_path and isinstance(value, str)):
        return value
    return marker


def without_contents(raw: str) -> str:
    """*raw* with every value but paths and flags replaced by :func:`hidden` (all of it when it is not JSON)."""
    arguments = parsed(raw)
    if arguments is None:
        return hidden()
    return json.dumps(_masked(arguments, hidden()), ensure_ascii=False)


__all__ = ["hidden", "is_path_key", "named_paths", "parsed", "unreadable", "without_contents"]

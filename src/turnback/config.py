"""Settings from ``config.toml`` in the store folder (never inside a project).

Only keys turnback knows are read; a malformed file or a bad value is
reported with the key it concerns.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from typing import Any

from turnback.errors import UsageError

CONFIG_NAME = "config.toml"


MODES = ("auto", "full", "manual", "cautious")


@dataclass(frozen=True, slots=True)
class Config:
    diff_lines: int = 20
    groups: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())
    max_file_mib: int = 16
    exclude: tuple[str, ...] = ()
    home_max_files: int = 2000
    home_max_mib: int = 256
    mode: str = "auto"

    @property
    def max_file_bytes(self) -> int:
        return self.max_file_mib << 20


def _int(value: Any, key: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"config.toml: {key} must be a whole number of at least {minimum}")
    return value


def load_config(home: str) -> Config:
    path = os.path.join(home, CONFIG_NAME)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        return Config()
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from exc
    render = data.get("render", {})
    diff_lines = _int(render.get("diff_lines", 20), "render.diff_lines")
    groups: list[tuple[str, tuple[str, ...]]] = []
    for name, globs in data.get("diff", {}).get("groups", {}).items():
        if not isinstance(globs, list) or not all(isinstance(g, str) for g in globs):
            raise UsageError(f"config.toml: diff.groups.{name} must be a list of globs")
        groups.append((name, tuple(globs)))
    snapshot = data.get("snapshot", {})
    exclude = snapshot.get("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(g, str) for g in exclude):
        raise UsageError("config.toml: snapshot.exclude must be a list of globs")
    mode = data.get("mode", "auto")
    if mode not in MODES:
        raise UsageError(f"config.toml: mode must be one of {', '.join(MODES)}, not {mode!r}")
    return Config(
        diff_lines=diff_lines,
        groups=tuple(groups),
        max_file_mib=_int(snapshot.get("max_file_mib", 16), "snapshot.max_file_mib", minimum=1),
        exclude=tuple(exclude),
        home_max_files=_int(snapshot.get("home_max_files", 2000), "snapshot.home_max_files"),
        home_max_mib=_int(snapshot.get("home_max_mib", 256), "snapshot.home_max_mib"),
        mode=mode,
    )


__all__ = ["CONFIG_NAME", "MODES", "Config", "load_config"]

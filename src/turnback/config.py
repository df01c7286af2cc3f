"""Settings from ``config.toml`` in the store folder (never inside a project).

Top-level keys apply everywhere; a ``[project."/real/path/of/root"]`` table
overrides them for one project. So an agent's file tools, which never write
the store, can never change what turnback does. Only known keys are read,
and a bad value is reported with its key.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import tomllib
from collections.abc import Callable
from typing import Any, NamedTuple

from turnback.catalog import Message
from turnback.errors import UsageError
from turnback.paths import is_database_url

CONFIG_NAME = "config.toml"
MODES = ("auto", "full", "manual", "cautious")
LANGS = ("en", "zh-CN", "ja")


class Config(NamedTuple):
    diff_lines: int = 20
    groups: tuple[tuple[str, tuple[str, ...]], ...] = ()
    max_file_mib: int = 16
    exclude: tuple[str, ...] = ()
    home_max_files: int = 2000
    home_max_mib: int = 256
    snapshot_max_mib: int = 2048
    store_max_mib: int = 32
    mode: str = "auto"
    lang: str = "en"
    mcp_turn_gap_s: float = 30.0
    store_url: str | None = None  # a PostgreSQL database shared by many hosts, instead of the local SQLite file
    watch_auto_paths: int = 20_000  # a long-lived process starts the watcher of a project this big; 0: never
    watch_idle_s: float = 600.0  # an automatically started watcher ends after this long without a scan

    @property
    def max_file_bytes(self) -> int:
        return self.max_file_mib << 20


class _Key(NamedTuple):
    """A key of config.toml: where it goes in Config, how a value is checked, whether a project may override it."""

    attribute: str
    check: Callable[[Any, str], Any]
    per_project: bool = True


def _whole(minimum: int) -> Callable[[Any, str], int]:
    def check(value: Any, key: str) -> int:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise UsageError(Message("config_whole_number", key=key, minimum=minimum))
        return value

    return check


def _choice(choices: tuple[str, ...]) -> Callable[[Any, str], str]:
    def check(value: Any, key: str) -> str:
        if value not in choices:
            raise UsageError(
                Message("config_choice", key=key, choices=Message("comma_list", items=choices), value=repr(value))
            )
        return str(value)

    return check


def _seconds(value: Any, key: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if isinstance(value, bool) or seconds < 0:
        raise UsageError(Message("config_seconds", key=key))
    return seconds


def _globs(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        text = value.strip()
        value = json.loads(text) if text.startswith("[") else [g.strip() for g in text.split(",") if g.strip()]
    if not isinstance(value, list) or not all(isinstance(g, str) and g for g in value):
        raise UsageError(Message("config_globs", key=key))
    return tuple(value)


def _database_url(value: Any, key: str) -> str:
    if not isinstance(value, str) or not is_database_url(value.strip()):
        raise UsageError(Message("pg_config_store_url", key=key))
    return value.strip()


KEYS: dict[str, _Key] = {
    "render.diff_lines": _Key("diff_lines", _whole(0)),
    "snapshot.max_file_mib": _Key("max_file_mib", _whole(1)),
    "snapshot.exclude": _Key("exclude", _globs),
    "snapshot.home_max_files": _Key("home_max_files", _whole(0)),
    "snapshot.home_max_mib": _Key("home_max_mib", _whole(0)),
    "snapshot.max_mib": _Key("snapshot_max_mib", _whole(1)),
    "store.max_mib": _Key("store_max_mib", _whole(1), per_project=False),
    "mode": _Key("mode", _choice(MODES)),
    "lang": _Key("lang", _choice(LANGS)),
    "mcp.turn_gap_s": _Key("mcp_turn_gap_s", _seconds),
    "store.url": _Key("store_url", _database_url, per_project=False),
    "watch.auto_paths": _Key("watch_auto_paths", _whole(0)),
    "watch.idle_s": _Key("watch_idle_s", _seconds),
}
GROUP_PREFIX = "diff.groups."


def _read(home: str) -> dict[str, Any]:
    path = os.path.join(home, CONFIG_NAME)
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(Message("config_not_toml", path=path, error=str(exc))) from exc


def _lookup(table: dict[str, Any], dotted: str) -> Any:
    node: Any = table
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _apply(values: dict[str, Any], table: dict[str, Any], *, project: bool) -> None:
    for key, spec in KEYS.items():
        if project and not spec.per_project:
            continue
        value = _lookup(table, key)
        if value is not None:
            values[spec.attribute] = spec.check(value, key)
    groups = _lookup(table, "diff.groups")
    if isinstance(groups, dict):
        merged = dict(values.get("groups", ()))
        for name, globs in groups.items():
            merged[name] = _globs(globs, GROUP_PREFIX + name)
        values["groups"] = tuple(merged.items())


def _unknown_key(key: str) -> Message:
    return Message(
        "config_unknown_key", key=repr(key), known=Message("comma_list", items=(*KEYS, GROUP_PREFIX + "NAME"))
    )


def configured_language(home: str) -> str | None:
    """``lang`` as config.toml sets it (None when it does not): the default language falls to the locale."""
    value = _read(home).get("lang")
    return None if value is None else str(KEYS["lang"].check(value, "lang"))


def configured_store_url(home: str) -> str | None:
    """``store.url`` as config.toml sets it (None when it does not: the store is the folder's SQLite file)."""
    value = _lookup(_read(home), "store.url")
    return None if value is None else _database_url(value, "store.url")


def load_config(home: str, project_root: str | None = None) -> Config:
    """The settings that apply (to the project at *project_root*, when given)."""
    data = _read(home)
    values: dict[str, Any] = {}
    _apply(values, data, project=False)
    if project_root is not None:
        override = _lookup(data, "project")
        table = override.get(project_root) if isinstance(override, dict) else None
        if isinstance(table, dict):
            _apply(values, table, project=True)
    return Config(**values)


def config_value(home: str, key: str, project_root: str | None = None) -> Any:
    """The value of *key* that applies (a project's own, else the store-wide one, else the default)."""
    config = load_config(home, project_root)
    if key.startswith(GROUP_PREFIX):
        return list(dict(config.groups).get(key[len(GROUP_PREFIX) :], ()))
    if key not in KEYS:
        raise UsageError(_unknown_key(key))
    value = getattr(config, KEYS[key].attribute)
    return list(value) if isinstance(value, tuple) else value


def set_config_value(home: str, key: str, raw: str, project_root: str | None = None) -> Any:
    """Check *raw* for *key* and write it to config.toml (atomically, keeping the file's comments)."""
    import tomlkit  # only here: reading config needs nothing but tomllib

    if key.startswith(GROUP_PREFIX) and len(key) > len(GROUP_PREFIX):
        value: Any = list(_globs(raw, key))
    elif key in KEYS:
        spec = KEYS[key]
        if project_root is not None and not spec.per_project:
            raise UsageError(Message("config_store_wide", key=key))
        checked = spec.check(raw, key)
        value = list(checked) if isinstance(checked, tuple) else checked
    else:
        raise UsageError(_unknown_key(key))
    path = os.path.join(home, CONFIG_NAME)
    try:
        with open(path, encoding="utf-8") as handle:
            document = tomlkit.parse(handle.read())
    except FileNotFoundError:
        document = tomlkit.document()
    node: Any = document
    if project_root is not None:
        node = node.setdefault("project", tomlkit.table(is_super_table=True))
        node = node.setdefault(project_root, tomlkit.table())
    *parents, leaf = key.split(".")
    for part in parents:
        node = node.setdefault(part, tomlkit.table())
    node[leaf] = value
    fd, temp = tempfile.mkstemp(dir=home, prefix=".config-", suffix=".toml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(tomlkit.dumps(document))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    load_config(home, project_root)  # refuse to leave a file turnback itself cannot read
    return value


__all__ = [
    "CONFIG_NAME",
    "KEYS",
    "LANGS",
    "MODES",
    "Config",
    "config_value",
    "configured_language",
    "configured_store_url",
    "load_config",
    "set_config_value",
]

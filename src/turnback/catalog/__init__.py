"""Outcomes as data, and the one place they are worded.

The engine never builds a sentence for a user: it returns a :class:`Message`, a
stable snake_case ``code`` with typed parameters (a path, a count, a call id, a
flag, another message). :func:`word` turns one into text in a language, from the
catalog files next to this module (``en.toml``, ``zh-CN.toml``, ``ja.toml``).

Why one TOML file per language rather than gettext ``.po`` files: a code, not the
English text, is the key, so rewording English changes nothing else; ``tomllib``
reads them (no Babel, no compile step, nothing to keep in sync with a binary
``.mo``); the three languages need two plural categories at most (English
``one``/``other``; Chinese and Japanese have one form), which a table per entry
says plainly; and the web page and TUI read the same files. Each file is loaded
once per process, when the first message in that language is worded, so a hook
that words nothing never reads one.

This package is a leaf: it imports nothing from turnback, so the lowest layers
(errors, model) can hold messages, and ``str()`` of an error is its English text.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, Final

LANGUAGES: Final = ("en", "zh-CN", "ja")
"""The languages turnback speaks, as ``--lang`` and ``TURNBACK_LANG`` name them."""

language: ContextVar[str] = ContextVar("turnback_language", default="en")
"""The language front ends word in: set once by the CLI, per request by a server."""


class Message:
    """An outcome: a stable ``code`` and its parameters, worded only by :func:`word`.

    A parameter is a string, an int, another message, or a tuple of messages
    (worded and joined by the language's list separator). Messages compare
    equal by code and parameters and survive a JSON round trip
    (:meth:`to_json` / :meth:`from_json`), so plan rows keep them in the store.
    """

    __slots__ = ("code", "params")

    code: str
    params: Mapping[str, object]

    def __init__(self, code: str, /, **params: object) -> None:
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "params", MappingProxyType(params))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a Message is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Message) and other.code == self.code and dict(other.params) == dict(self.params)

    def __hash__(self) -> int:
        return hash((self.code, tuple(sorted((key, _hashable(value)) for key, value in self.params.items()))))

    def __repr__(self) -> str:
        params = ", ".join(f"{key}={value!r}" for key, value in self.params.items())
        return f"Message({self.code!r}{', ' if params else ''}{params})"

    def __str__(self) -> str:
        return word(self, "en")

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "params": {key: _param_to_json(value) for key, value in self.params.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Message:
        params = data.get("params") or {}
        return cls(str(data["code"]), **{str(key): _param_from_json(value) for key, value in params.items()})

    def dumps(self) -> str:
        """The message as one line of JSON: how a store column or a snapshot entry keeps it as text."""
        import json  # here: a hook that keeps no message never imports it

        return json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def loads(cls, text: str) -> Message:
        """A message kept by :meth:`dumps`; text an older turnback kept as an English sentence is a ``plain`` one."""
        if text.startswith('{"code":'):
            import json

            try:
                return cls.from_json(json.loads(text))
            except (ValueError, KeyError, TypeError):
                pass
        return cls("plain", text=text)


def _hashable(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


def _param_to_json(value: object) -> object:
    if isinstance(value, Message):
        return {"message": value.to_json()}
    if isinstance(value, tuple | list):
        return {"messages": [_param_to_json(item) for item in value]}
    return value


def _param_from_json(value: object) -> object:
    if isinstance(value, dict):
        if "message" in value:
            return Message.from_json(value["message"])
        if "messages" in value:
            return tuple(_param_from_json(item) for item in value["messages"])
    return value


class Entry:
    """One code's text in one language: a single form, or a form per plural category."""

    __slots__ = ("forms", "separator", "when")

    def __init__(self, forms: Mapping[str, str], when: str | None, separator: str | None = None):
        self.forms = forms
        self.when = when
        self.separator = separator  # joins a tuple parameter's items (the language's list separator if None)

    def form(self, lang: str, count: object) -> str:
        if "text" in self.forms:
            return self.forms["text"]
        category = plural_category(lang, count)
        return self.forms.get(category) or self.forms["other"]


def plural_category(lang: str, count: object) -> str:
    """The CLDR plural category of *count*: English has ``one`` and ``other``; Chinese and Japanese only ``other``."""
    if lang == "en" and count == 1:
        return "one"
    return "other"


@functools.cache
def entries(lang: str) -> Mapping[str, Entry]:
    """Every code of *lang*'s catalog file."""
    if lang not in LANGUAGES:
        raise ValueError(f"no catalog for {lang!r}")
    import tomllib  # here, not at the top: a process that words nothing (a hook) never pays for it

    with open(os.path.join(os.path.dirname(__file__), f"{lang}.toml"), "rb") as catalog:
        raw = tomllib.load(catalog)
    table: dict[str, Entry] = {}
    for code, value in raw.items():
        if isinstance(value, str):
            table[code] = Entry({"text": value}, None)
        else:
            forms = {key: text for key, text in value.items() if key not in ("when", "separator")}
            table[code] = Entry(forms, value.get("when"), value.get("separator"))
    return MappingProxyType(table)


def word(message: Message | str, lang: str | None = None) -> str:
    """*message* in *lang* (default: the current :data:`language`); a plain string is returned as it is."""
    if isinstance(message, str):
        return message
    lang = lang or language.get()
    table = entries(lang)
    entry = table.get(message.code) or entries("en")[message.code]
    template = entry.form(lang, message.params.get("count"))
    separator = entry.separator if entry.separator is not None else table["list_separator"].form(lang, None)
    values = {key: _worded(value, lang, separator) for key, value in message.params.items()}
    return template.format_map(values)


def _worded(value: object, lang: str, separator: str) -> object:
    if isinstance(value, Message):
        return word(value, lang)
    if isinstance(value, tuple | list):
        return separator.join(str(_worded(item, lang, separator)) for item in value)
    return value


def say(code: str, /, **params: object) -> str:
    """The message *code* with *params*, worded in the current language (a front end's or render's shorthand)."""
    return word(Message(code, **params))


def join(messages: Iterable[Message | str], lang: str | None = None) -> str:
    """Messages worded and joined as clauses of one line (``a; b`` in English)."""
    lang = lang or language.get()
    separator = entries(lang)["list_separator"].form(lang, None)
    return separator.join(word(item, lang) for item in messages)


def choose_language(value: str | None) -> str | None:
    """*value* as one of :data:`LANGUAGES` (case and ``_`` forgiven), None when it names none of them."""
    if value is None:
        return None
    wanted = value.strip().replace("_", "-").lower()
    for lang in LANGUAGES:
        if wanted == lang.lower() or (lang != "en" and wanted == lang.split("-")[0].lower()):
            return lang
    return None


def language_of_locale(values: Iterable[str | None]) -> str:
    """The language of the first set locale variable (``LC_ALL``, ``LC_MESSAGES``, ``LANG``): zh_*, ja_* or English."""
    for value in values:
        if not value:
            continue
        name = value.split(".")[0].split("@")[0].lower()
        if name.startswith("zh"):
            return "zh-CN"
        if name.startswith("ja"):
            return "ja"
        return "en"
    return "en"


__all__ = [
    "LANGUAGES",
    "Entry",
    "Message",
    "choose_language",
    "entries",
    "join",
    "language",
    "language_of_locale",
    "plural_category",
    "say",
    "word",
]

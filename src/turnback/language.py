"""Which language a front end words its messages in.

``--lang`` (a front end's own flag), else ``TURNBACK_LANG``, else ``lang`` in
config.toml, else the locale (``LC_ALL``, ``LC_MESSAGES``, ``LANG``: ``zh_*`` is
简体中文, ``ja_*`` 日本語), else English. A flag or variable that names none of
the three languages is a usage error naming them, never a silent fall back.
"""

from __future__ import annotations

from turnback.catalog import LANGUAGES, Message, choose_language, language_of_locale
from turnback.config import configured_language
from turnback.errors import UsageError
from turnback.home import env_language, locale_settings


def pick_language(flag: str | None, home: str | None) -> str:
    """The language to word messages in, for a front end given *flag* (``--lang``) and the store folder *home*."""
    for value, source in ((flag, "--lang"), (env_language(), "TURNBACK_LANG")):
        if value is None:
            continue
        chosen = choose_language(value)
        if chosen is None:
            raise UsageError(
                Message("unknown_language", value=value, source=source, known=Message("comma_list", items=LANGUAGES))
            )
        return chosen
    configured = configured_language(home) if home else None
    return configured or language_of_locale(locale_settings())


__all__ = ["pick_language"]

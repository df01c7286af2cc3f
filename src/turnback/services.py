"""Configuration files a running service loads, and the check its own tool offers.

Reverting such a file changes the file only: a service that already loaded
the changed version keeps using it until it is reloaded. So the result of a
revert names the service's own check, to run before reloading it.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

from turnback.catalog import Message

# (glob on the absolute or project path, service, its check); the first match wins.
_SERVICES: tuple[tuple[str, str, str], ...] = (
    ("*nginx/*", "nginx", "nginx -t"),
    ("*nginx.conf", "nginx", "nginx -t"),
    ("*sshd_config*", "sshd", "sshd -t"),
    ("*ssh/sshd_config.d/*", "sshd", "sshd -t"),
    ("*sudoers", "sudo", "visudo -c"),
    ("*sudoers.d/*", "sudo", "visudo -c"),
    ("*systemd/*.service", "systemd", "systemd-analyze verify UNIT, then systemctl daemon-reload"),
    ("*systemd/*.timer", "systemd", "systemd-analyze verify UNIT, then systemctl daemon-reload"),
    ("*systemd/*.socket", "systemd", "systemd-analyze verify UNIT, then systemctl daemon-reload"),
    ("*crontab", "cron", "crontab -l (and check the cron log after the next run)"),
    ("*cron.d/*", "cron", "crontab -l (and check the cron log after the next run)"),
    ("*apache2/*", "Apache", "apachectl configtest"),
    ("*httpd/*", "Apache", "apachectl configtest"),
    ("*haproxy*.cfg", "HAProxy", "haproxy -c -f FILE"),
    ("*Caddyfile", "Caddy", "caddy validate"),
    ("*postgresql.conf", "PostgreSQL", "pg_ctl reload after checking the server log"),
)


_WILDCARDS = re.compile(r"\*|\?|\[[^\]]*\]")  # ``*``, ``?``, a ``[...]`` class


def fixed_part(glob: str) -> str:
    """The longest part of *glob* without a wildcard: every path the glob matches holds it."""
    return max(_WILDCARDS.split(glob), key=len)


# Most paths an undo restores hold no glob's fixed part, and are told so by one search, not a match per glob (an
# undo of 1,000 files asked 16,000 matches: 6 ms).
_ANY_SERVICE = re.compile("|".join(re.escape(fixed_part(glob)) for glob, _, _ in _SERVICES))


def service_note(path: str) -> Message | None:
    """What to tell a user who reverted *path*, when a service loads it; ``None`` otherwise."""
    if _ANY_SERVICE.search(path) is None:
        return None
    for glob, service, check in _SERVICES:
        if fnmatchcase(path, glob):
            return Message("service_may_use_old", path=path, service=service, check=check)
    return None


__all__ = ["fixed_part", "service_note"]

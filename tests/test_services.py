"""Which reverted paths name a service's check: each glob's paths, and paths no service loads.

The answer must be what trying every glob in order gives (the first match wins); ``service_note`` first
rules out, in one search, the paths that hold no glob's fixed part.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest

from turnback.services import _SERVICES, fixed_part, service_note


def first_match(path: str) -> str | None:
    return next((service for glob, service, _ in _SERVICES if fnmatchcase(path, glob)), None)


PATHS = [glob.replace("*", "") for glob, _, _ in _SERVICES] + [
    glob.replace("*", "/etc/x/", 1).replace("*", "y") for glob, _, _ in _SERVICES
]


@pytest.mark.parametrize("path", PATHS)
def test_each_service_s_paths_name_the_first_matching_service_and_its_check(path: str) -> None:
    note = service_note(path)
    assert note is not None
    service = first_match(path)
    (check,) = {check for _, name, check in _SERVICES if name == service}
    assert (note.code, note.params) == ("service_may_use_old", {"path": path, "service": service, "check": check})


@pytest.mark.parametrize(
    "path",
    ["README.md", "src/main.py", "docs/systemd.md", "nginx", "etc/ssh/ssh_config", "cron", "postgresql.conf.bak"],
)
def test_paths_no_service_loads_name_none(path: str) -> None:
    assert first_match(path) is None
    assert service_note(path) is None


@pytest.mark.parametrize(
    ("glob", "matching", "part"),
    [
        ("*haproxy?.cfg", "etc/haproxy2.cfg", "haproxy"),
        ("*sshd_config[._]d/*", "etc/ssh/sshd_config.d/x.conf", "sshd_config"),
        ("*nginx/*", "/etc/nginx/sites", "nginx/"),
    ],
)
def test_a_glob_s_fixed_part_is_cut_at_every_wildcard_and_held_by_what_it_matches(
    glob: str, matching: str, part: str
) -> None:
    assert fnmatchcase(matching, glob)
    assert fixed_part(glob) == part and part in matching

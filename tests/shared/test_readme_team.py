"""README.md's five commands that set up a team's shared store run as printed, against the test server (its
address, user and a new database in place of the README's), on two hosts: each sees the other's session."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from tests.cli.test_readme import BLOCKS, TEAM_SETUP
from tests.conftest import ROOT, cli_env
from tests.pgserver import SUPERUSER, PgServer


def test_the_team_setup_runs_as_printed(pg_server: PgServer, tmp_path: Path, project: Path) -> None:
    (block,) = [block for block in BLOCKS if block.commands[0] == TEAM_SETUP]
    database = f"team_{secrets.token_hex(4)}"
    here = {
        TEAM_SETUP: f"{pg_server.bin}/createdb -h 127.0.0.1 -p {pg_server.port} -U {SUPERUSER} {database}",
        "postgresql://agent@db.internal:5432/turnback": f"postgresql://{SUPERUSER}@127.0.0.1:{pg_server.port}/{database}",
    }
    create, *each_host = block.commands
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "turnback").write_text(f'#!/bin/sh\nPYTHONPATH={ROOT / "src"} exec {sys.executable} -m turnback "$@"\n')
    (bin_dir / "turnback").chmod(0o755)
    users_home = tmp_path / "user"
    (users_home / ".config" / "turnback").mkdir(parents=True)
    (users_home / ".config" / "turnback" / "team-key").write_text("the-team-secret-0123456789\n")

    def on(host: str, *commands: str) -> subprocess.CompletedProcess[str]:
        script = "\n".join(commands)
        for printed, local in here.items():
            script = script.replace(printed, local)
        env = cli_env(tmp_path / f"store-{host}", {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
        env.update({"HOME": str(users_home), "TURNBACK_HOST_ID": host})
        del env["TURNBACK_KEY"]  # the README's export gives it
        ran = subprocess.run(["bash", "-ec", script], cwd=project, env=env, capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr
        return ran

    on("laptop", create)
    on("laptop", *each_host, "turnback session new --title 'from the laptop'")
    listed = on("server", *each_host)
    assert "from the laptop" in listed.stdout  # the other host lists the laptop's session

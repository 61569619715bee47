"""A PostgreSQL server of the test's own: initdb in a folder of its own, listening on a free port of
127.0.0.1 only, with a password, stopped and removed at the end. PostgreSQL refuses to run as
root, so a root test (CI) runs it as the `postgres` user of Debian's package (or nobody)."""
from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support.as_user import NOBODY
from tests.support.queueing import free_port


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.fail("PostgreSQL is not installed: scripts/services installs it (scripts/test runs it)")
    return Path(found[-1]).parent


class PostgresServer:
    def __init__(self):
        bindir = _bindir()
        self.folder = Path(tempfile.mkdtemp(prefix="grader-pg-"))
        self.port, self.password = free_port(), secrets.token_hex(16)
        self._as = []
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam("postgres")
                uid, gid = entry.pw_uid, entry.pw_gid
            except KeyError:
                uid = gid = NOBODY
            os.chown(self.folder, uid, gid)
            self._as = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
        password_file = self.folder / "password"
        password_file.write_text(self.password)
        if self._as:
            os.chown(password_file, uid, gid)
        self.data, self.log = self.folder / "data", self.folder / "postgres.log"
        self._run(bindir / "initdb", "-D", self.data, "-U", "grader", "--auth=scram-sha-256",
                  f"--pwfile={password_file}", "--no-sync")
        self.pg_ctl = bindir / "pg_ctl"
        self._run(self.pg_ctl, "-D", self.data, "-l", self.log, "-w", "-t", "60", "-o",
                  f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        self.url = f"postgresql+psycopg://grader:{self.password}@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv) -> None:
        proc = subprocess.run([*self._as, *map(str, argv)], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise AssertionError(f"{argv[0]} failed ({proc.returncode}): {proc.stderr}{proc.stdout}\n{log}")

    def stop(self) -> None:
        try:
            self._run(self.pg_ctl, "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

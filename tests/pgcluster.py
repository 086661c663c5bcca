"""A throwaway PostgreSQL cluster for the store tests: ``initdb`` and ``pg_ctl`` from Debian's
``postgresql`` package (/usr/lib/postgresql/*/bin, installed by scripts/test) into a temp dir,
listening on 127.0.0.1 on a free port with password (SCRAM) login, torn down at the end.

initdb refuses to run as root: as root the cluster is made and run as the unprivileged
``postgres`` user (``runuser``), which owns its folder. When no PostgreSQL is installed the
tests that need it are skipped — except with ``CI=true``, where they fail (CI installs it, so
absence there is a broken set-up, not a reason to test less; as in tests/realcli.py).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

USER, PASSWORD = "andon", "s3cret-pw"


def bindir() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                   else 0)
    return found[-1].parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """One running server; ``url(db)`` names a database on it with the test password."""

    def __init__(self, bin_: Path):
        self.bin = bin_
        # as root, in /tmp itself: the postgres user must be able to reach its folder,
        # and $TMPDIR may be a folder only root can enter
        self.root = Path(tempfile.mkdtemp(prefix="andon-pg-",
                                          dir="/tmp" if os.geteuid() == 0 else None))
        self.data = self.root / "data"
        self.port = _free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self.as_user:
            os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
        self._run("initdb", "-D", str(self.data), "-U", USER, "--auth-local=trust",
                  "--auth-host=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8")
        with open(self.data / "postgresql.conf", "a") as f:
            # test speed: no fsync; the socket in our own folder (no /var/run needed)
            f.write(f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                    f"unix_socket_directories = '{self.root}'\nfsync = off\n"
                    "synchronous_commit = off\nfull_page_writes = off\nmax_connections = 60\n")
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        proc = subprocess.run([*self.as_user, str(self.bin / tool), *args],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode:
            log = self.root / "log"
            raise RuntimeError(f"{tool} {' '.join(args)}: exit {proc.returncode}\n"
                               f"{proc.stdout}{proc.stderr}"
                               f"{log.read_text() if log.exists() else ''}")

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def restart(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-m", "fast",
                  "-w", "restart")

    def url(self, db: str = "postgres", password: str = PASSWORD) -> str:
        return f"postgresql://{USER}:{password}@127.0.0.1:{self.port}/{db}"

    def new_database(self) -> str:
        """A fresh, empty schema in the database ``postgres``, as a URL whose connections
        use it (``search_path``): what a new database is to the store, made in milliseconds
        rather than the second CREATE DATABASE takes."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as c:
            c.execute(f"CREATE SCHEMA {name}")
        return self.url() + f"?options=-csearch_path%3D{name}"

    def destroy(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def cluster_or_skip() -> Cluster:
    """A new cluster; skip (fail with CI=true) when PostgreSQL or psycopg is missing."""
    bin_ = bindir()
    why = None
    if bin_ is None:
        why = "PostgreSQL is not installed (/usr/lib/postgresql/*/bin): run scripts/test"
    else:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            why = "psycopg is not installed: pip install -e '.[test]'"
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    assert bin_ is not None
    return Cluster(bin_)

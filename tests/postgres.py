"""A throwaway PostgreSQL server for tests: initdb in a temporary directory, a free local
port, trust authentication; always stopped (pg_ctl stop -m immediate) and removed.

initdb refuses to run as root, so as root (CI, containers) the server runs as the
'postgres' user Debian's package creates (else 'nobody'), owning its temporary directory.

Where PostgreSQL is missing, ``require_postgres`` installs Debian's ``postgresql`` package
(as root, with apt-get: CI's machines come without it); elsewhere the tests that need it
are skipped, or fail under CI (CI=true), where a skipped database test would hide a gap.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass

from tests.ports import free_port


def postgres_bin() -> str | None:
    """The directory of initdb and pg_ctl: on PATH, else Debian's /usr/lib/postgresql/<v>/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return os.path.dirname(os.path.realpath(found))
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return os.path.dirname(candidates[-1]) if candidates else None


def require_postgres() -> str:
    """The directory of initdb and pg_ctl, installing Debian's postgresql where it is missing
    (as root); skips the calling test where it cannot be had, fails it under CI."""
    from tests.conftest import unavailable

    found = postgres_bin()
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        import fcntl

        with open(os.path.join(tempfile.gettempdir(), "streamsql-apt.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one test process installs, the others wait for it
            found = postgres_bin() or _install_postgres()
    if found is None:
        message = "PostgreSQL's initdb and pg_ctl are not installed (apt-get install postgresql)"
        unavailable(message)
    return found


def _install_postgres() -> str | None:
    """apt-get install postgresql; the directory of its initdb, or None (and why, in the test's
    skip or failure)."""
    from tests.conftest import unavailable

    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE,
             "env": {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}}
    update = subprocess.run(["apt-get", "update", "-qq"], **quiet)
    install = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "postgresql"], **quiet)
    found = postgres_bin()
    if found is None:
        detail = (install.stderr or update.stderr).decode(errors="replace").strip().splitlines()[-1:]
        message = f"apt-get install postgresql did not provide initdb: {' '.join(detail)}"
        unavailable(message)
    return found


def _run_as() -> dict:
    """subprocess arguments to drop root, when we are root."""
    if os.geteuid() != 0:
        return {}
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    raise RuntimeError("running as root and no 'postgres' or 'nobody' user to run PostgreSQL as")


@dataclass
class Server:
    port: int
    directory: str

    def url(self, database: str) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres"):
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=database, autocommit=True)

    def create_database(self, name: str) -> None:
        with self.connect() as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
            connection.execute(f'CREATE DATABASE "{name}"')


@contextmanager
def postgres_server(bin_dir: str, settings: dict[str, str] | None = None):
    """A throwaway server on a free loopback port; ``settings``: more server settings (-c)."""
    directory = tempfile.mkdtemp(prefix="streamsql-pg-")
    data, log = os.path.join(directory, "data"), os.path.join(directory, "log")
    as_user = _run_as()
    if as_user:
        os.chown(directory, as_user["user"], as_user["group"])
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    pg_ctl = os.path.join(bin_dir, "pg_ctl")
    started = False
    try:
        subprocess.run([os.path.join(bin_dir, "initdb"), "-D", data, "--auth=trust", "-U", "postgres", "-E", "UTF8",
                        "--no-sync"], check=True, capture_output=True, env=env, cwd=directory, **as_user)
        port = free_port()
        options = (f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c fsync=off"
                   " -c synchronous_commit=off -c full_page_writes=off -c max_connections=50"
                   + "".join(f" -c {key}={value}" for key, value in (settings or {}).items()))
        result = subprocess.run([pg_ctl, "-D", data, "-o", options, "-l", log, "-w", "-t", "60", "start"],
                                capture_output=True, env=env, cwd=directory, **as_user)
        started = True
        if result.returncode != 0:
            text = open(log).read() if os.path.exists(log) else ""
            raise RuntimeError(f"pg_ctl start failed: {result.stderr.decode()} {text}")
        yield Server(port, directory)
    finally:
        if started:
            subprocess.run([pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"], capture_output=True, env=env,
                           cwd=directory, **as_user)
        shutil.rmtree(directory, ignore_errors=True)

"""A throwaway PostgreSQL server for the tests: ``initdb`` + ``pg_ctl`` in a temporary folder, on 127.0.0.1.

The server runs as an unprivileged user (initdb refuses root): the current user when it is not root, else
the ``postgres`` system user that the Debian package creates, through ``runuser``. It listens on a free
loopback port, with password (SCRAM) authentication for TCP, and is stopped and deleted at the end.
``unavailable()`` says why no server can be had here (the tests then skip with that reason).
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SUPERUSER = "tooldispatch"


def bindir() -> Path | None:
    """The folder holding initdb and pg_ctl: $TOOLDISPATCH_PG_BINDIR, Debian's layout, or PATH."""
    explicit = os.environ.get("TOOLDISPATCH_PG_BINDIR")
    candidates = [explicit] if explicit else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for folder in candidates:
        if (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    return None


def _run_as() -> list[str] | None:
    """The command prefix that runs the server's programs as an unprivileged user, or None if none exists."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return None
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", "postgres", "--"]
    setpriv = shutil.which("setpriv")
    if setpriv:
        return [setpriv, "--reuid=postgres", "--regid=postgres", "--init-groups", "--"]
    return None


def unavailable() -> str | None:
    """Why no PostgreSQL server can be started here, or None when one can."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[dev]' installs it)"
    if bindir() is None:
        return "the PostgreSQL server binaries (initdb, pg_ctl) are not installed: apt-get install -y postgresql"
    if _run_as() is None:
        return (
            "running as root with no 'postgres' user, or neither runuser nor setpriv to start the server as that "
            "user (initdb refuses root)"
        )
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """A running server; ``url(db)`` connects to database ``db`` as the superuser."""

    bindir: Path
    datadir: Path
    port: int
    password: str
    prefix: list[str]

    def url(self, dbname: str = "postgres", *, password: str | None = None) -> str:
        return f"postgresql://{SUPERUSER}:{password or self.password}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """A new empty database; returns its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        subprocess.run(
            [*self.prefix, str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(self.datadir.parent, ignore_errors=True)


def start(*, durable: bool = False) -> Server:
    """Start a server; ``durable=False`` turns off fsync (tests), ``True`` keeps the defaults (benchmarks)."""
    reason = unavailable()
    if reason is not None:
        raise RuntimeError(reason)
    folder, prefix = bindir(), _run_as()
    assert folder is not None and prefix is not None
    datadir = Path(tempfile.mkdtemp(prefix="tooldispatch-pg-"))
    password = secrets.token_hex(16)
    pwfile = datadir / "pw"
    pwfile.write_text(password + "\n")
    if prefix:
        owner = pwd.getpwnam("postgres")
        for path in (datadir, pwfile):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    os.chmod(datadir, 0o700)
    pgdata = datadir / "data"
    subprocess.run(
        [
            *prefix,
            str(folder / "initdb"),
            "-D",
            str(pgdata),
            "-U",
            SUPERUSER,
            f"--pwfile={pwfile}",
            "--auth-host=scram-sha-256",
            "--auth-local=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    pwfile.unlink()
    options = f"-p {{port}} -c listen_addresses=127.0.0.1 -c unix_socket_directories={datadir} -c max_connections=200"
    if not durable:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    for _ in range(3):
        port = _free_port()
        done = subprocess.run(
            [
                *prefix,
                str(folder / "pg_ctl"),
                "-D",
                str(pgdata),
                "-o",
                options.format(port=port),
                "-l",
                str(datadir / "server.log"),
                "-w",
                "-t",
                "60",
                "start",
            ],
            capture_output=True,
            timeout=90,
            check=False,
        )
        if done.returncode == 0:
            return Server(folder, pgdata, port, password, prefix)
    log = (datadir / "server.log").read_text(errors="replace")[-2000:] if (datadir / "server.log").exists() else ""
    shutil.rmtree(datadir, ignore_errors=True)
    raise RuntimeError(f"pg_ctl could not start the server: {done.stderr.decode(errors='replace')}\n{log}")


if __name__ == "__main__":
    # A server for trying the PostgreSQL store by hand (the benchmark, the CLI): prints its URL, runs until Enter.
    import sys

    server = start(durable="--fast" not in sys.argv)
    try:
        db = server.create_database("tooldispatch")
        print(db, flush=True)
        input("PostgreSQL is running; press Enter to stop it and delete its data\n")
    finally:
        server.stop()

"""A throwaway PostgreSQL server for tests: Debian's binaries, a temp dir, a free port.

:class:`PostgresServer` runs ``initdb`` and ``pg_ctl`` from the newest
``/usr/lib/postgresql/<version>/bin`` as the ``postgres`` user when the tests run
as root (``initdb`` refuses root), with its data directory and unix socket
inside a fresh temp dir, listening on 127.0.0.1 only, trust authentication.
``stop()`` stops the server with ``pg_ctl stop -m immediate`` and removes the
directory, so nothing is left running or on disk.

Each test asks for its own database with :meth:`PostgresServer.create_database`;
the server itself is shared by the session (the ``postgres`` fixture of
``tests/conftest.py``). :class:`Database` is a test database of either kind
(SQLite or PostgreSQL) with SQLAlchemy Core helpers, so one test body runs on both.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from support.kafka import free_port

POSTGRES_ROOT = Path("/usr/lib/postgresql")
SUPERUSER = "postgres"


def postgres_bin() -> Path:
    """The newest installed ``/usr/lib/postgresql/<version>/bin`` holding initdb."""
    versions = sorted(
        (p for p in POSTGRES_ROOT.glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else -1)
    if not versions:
        raise RuntimeError(
            f"No PostgreSQL server binaries under {POSTGRES_ROOT}/*/bin. The SQL source "
            "tests need them: apt-get install postgresql")
    return versions[-1]


class PostgresServer:
    """One PostgreSQL cluster in a temp dir (see the module docstring)."""

    def __init__(self) -> None:
        self.bin = postgres_bin()
        self.root = Path(tempfile.mkdtemp(prefix="connect-test-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.host = "127.0.0.1"
        self._as_root = os.geteuid() == 0
        self._started = False

    def _run(self, *args: str) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if self._as_root:  # initdb and postgres refuse to run as root
            command = ["runuser", "-u", SUPERUSER, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n"
                               f"{done.stdout}\n{done.stderr}")

    def start(self) -> PostgresServer:
        if self._as_root:
            user = pwd.getpwnam(SUPERUSER)
            os.chown(self.root, user.pw_uid, user.pw_gid)
        try:
            self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust",
                      "--encoding=UTF8", "--locale=C.UTF-8")
            options = (f"-c listen_addresses={self.host} -c port={self.port} "
                       f"-c unix_socket_directories={self.root} -c fsync=off "
                       "-c synchronous_commit=off -c full_page_writes=off "
                       "-c max_connections=200")
            self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
                      "-o", options, "-w", "-t", "60", "start")
            self._started = True
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server (if it started) and delete its directory."""
        if self._started:
            with contextlib.suppress(RuntimeError):
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
            self._started = False
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        """A SQLAlchemy URL (psycopg 3) for ``database`` as the superuser."""
        return f"postgresql+psycopg://{SUPERUSER}@{self.host}:{self.port}/{database}"

    def create_database(self, prefix: str = "t") -> str:
        """A new, empty database with a unique name; returns its SQLAlchemy URL."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}".lower()
        engine = sa.create_engine(self.url(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        finally:
            engine.dispose()
        return self.url(name)


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """A started server, stopped and removed on exit."""
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


class Database:
    """A test database: its URL, an engine, and table helpers."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = sa.create_engine(url)
        self.metadata = sa.MetaData()
        self.kind = self.engine.dialect.name

    def table(self, name: str, *columns: sa.Column[Any],
              timestamps: Sequence[str] = ("updated",)) -> sa.Table:
        """Create ``name`` with an auto-incrementing ``id`` primary key, ``columns``,
        and NOT NULL timestamp columns ``timestamps``."""
        table = sa.Table(
            name, self.metadata,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            *columns,
            *(sa.Column(t, sa.DateTime, nullable=False) for t in timestamps),
            sqlite_autoincrement=True)  # SQLite must never reuse the id of a deleted last row
        table.create(self.engine)
        return table

    def insert(self, table: sa.Table, *rows: dict[str, Any]) -> None:
        """Insert ``rows`` in one transaction."""
        with self.engine.begin() as conn:
            conn.execute(table.insert(), list(rows))

    def execute(self, statement: Any, params: Any = None) -> None:
        with self.engine.begin() as conn:
            if isinstance(statement, str):
                conn.exec_driver_sql(statement, params or ())
            else:
                conn.execute(statement, params)

    def drop(self, table: sa.Table) -> None:
        table.drop(self.engine)
        self.metadata.remove(table)


def past(seconds: float) -> datetime.datetime:
    """A naive UTC timestamp ``seconds`` ago (already below any upper bound)."""
    return (datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
            - datetime.timedelta(seconds=seconds)).replace(microsecond=0)

"""Real backing servers that tests start themselves, each in a temporary directory, on a free loopback
port, and stop on exit: Redis (Debian `redis-server`) and PostgreSQL (Debian `postgresql`: a fresh
`initdb` cluster, run as the `postgres` user when the tests run as root, without fsync). A missing
binary fails the test with what to install (`make system-deps` installs them); nothing is skipped.

Example::

    with redis_server(tmp_path) as redis:
        url = redis.url            # redis://127.0.0.1:PORT/0
        redis.stop()               # a backend that goes away mid-test
        redis.start()              # and comes back on the same port
    with postgres_server() as postgres:
        dsn = postgres.dsn         # postgresql://postgres@127.0.0.1:PORT/postgres
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import psycopg
import pytest

from services.launcher import free_base_port


def require_binary(name: str, package: str) -> str:
    """The path of `name`, or fail naming the Debian package that provides it."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is missing: install the Debian package {package} (`make system-deps` as root does)")
    return path


def _wait_listening(port: int, process: subprocess.Popen[bytes], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before it listened on {port}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout_s} s")


@dataclass
class RedisServer:
    """One redis-server without persistence, on `port`; `stop` and `start` again keep the port."""

    directory: Path
    port: int = field(default_factory=lambda: free_base_port(1))
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = require_binary("redis-server", "redis-server")
        self.process = subprocess.Popen([binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                         "--appendonly", "no", "--dir", str(self.directory)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_listening(self.port, self.process, 10.0, "redis-server")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[RedisServer]:
    """A running RedisServer in `directory`, stopped on exit."""
    server = RedisServer(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def postgres_binary(name: str) -> str:
    """A PostgreSQL server binary (Debian keeps them in /usr/lib/postgresql/<major>/bin), or fail."""
    for directory in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(os.path.join(directory, name), os.X_OK):
            return os.path.join(directory, name)
    return require_binary(name, "postgresql")


def _as_postgres_user() -> dict[str, object]:
    """PostgreSQL refuses to run as root: Popen arguments that run it as the `postgres` user then."""
    return {"user": "postgres", "group": "postgres", "extra_groups": []} if os.geteuid() == 0 else {}


@dataclass
class PostgresServer:
    """A throwaway PostgreSQL cluster (trust authentication on loopback only)."""

    directory: Path
    port: int = field(default_factory=lambda: free_base_port(1))
    process: subprocess.Popen[bytes] | None = None

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def init(self) -> None:
        subprocess.run([postgres_binary("initdb"), "-D", str(self.directory / "data"), "-A", "trust", "-U", "postgres",
                        "--no-sync", "--no-locale", "-E", "UTF8"], check=True, capture_output=True, timeout=120,
                       **_as_postgres_user())  # type: ignore[call-overload]

    def start(self) -> None:
        self.process = subprocess.Popen(  # type: ignore[call-overload]
            [postgres_binary("postgres"), "-D", str(self.directory / "data"), "-p", str(self.port), "-k", str(self.directory),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
             "-c", "full_page_writes=off"],
            stdout=subprocess.DEVNULL, stderr=(self.directory / "postgres.log").open("ab"), **_as_postgres_user())
        _wait_listening(self.port, self.process, 30.0, "postgres")
        deadline = time.monotonic() + 30.0
        while True:  # listening is not yet accepting: wait until a connection is (recovery done)
            try:
                psycopg.connect(self.dsn, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            # SIGINT = PostgreSQL's fast shutdown.
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None


_databases = itertools.count()


def fresh_database(server: PostgresServer) -> str:
    """The DSN of a new, empty database on `server` (each test gets one of its own)."""
    name = f"t{os.getpid()}_{next(_databases)}"
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}".encode())
    return server.dsn.rsplit("/", 1)[0] + f"/{name}"


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """A running PostgresServer in a fresh directory (outside pytest's root-only tmp), removed on exit."""
    directory = Path(tempfile.mkdtemp(prefix="auditmesh-pg-"))
    try:
        if os.geteuid() == 0:
            shutil.chown(directory, "postgres", "postgres")
        server = PostgresServer(directory)
        server.init()
        server.start()
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)

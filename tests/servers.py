"""Real backing servers that tests start themselves, each in a temporary directory, on a free loopback
port, and stop on exit: Redis (Debian `redis-server`). A missing binary fails the test with what to
install (`make system-deps` installs it); nothing is skipped.

Example::

    with redis_server(tmp_path) as redis:
        url = redis.url            # redis://127.0.0.1:PORT/0
        redis.stop()               # a backend that goes away mid-test
        redis.start()              # and comes back on the same port
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

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

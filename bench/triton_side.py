"""Starting a real Triton Inference Server that hosts the project's text models
(`services/common/serving/pytriton_host.py`, in `.venv-triton`), for the side-by-side test and bench.

Example::

    with triton_server("text") as triton:
        triton.address        # "127.0.0.1:41235": the router's --text-url
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import tritonclient.grpc as triton_grpc

from services.launcher import ROOT, free_base_port

TRITON_PYTHON = ROOT / ".venv-triton" / "bin" / "python"
MISSING = f"{TRITON_PYTHON} is missing: run `make triton-venv` (make test does)"


@dataclass(frozen=True)
class TritonServer:
    address: str
    process: subprocess.Popen[bytes]


def triton_environment() -> dict[str, str]:
    """The environment PyTriton's backend stub needs: this Python installation's libpython first (else
    it loads Debian's and fails with `RLock._recursion_count`)."""
    libdir = str(sysconfig.get_config_var("LIBDIR") or "")
    previous = os.environ.get("LD_LIBRARY_PATH", "")
    return {**os.environ, "PYTHONUNBUFFERED": "1", "LD_LIBRARY_PATH": f"{libdir}:{previous}" if previous else libdir}


def wait_ready(address: str, model: str, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Until Triton says `model` is ready (RuntimeError if the process exits or time runs out)."""
    client = triton_grpc.InferenceServerClient(address)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"the Triton host exited with code {process.returncode} while starting")
            with contextlib.suppress(Exception):
                if client.is_model_ready(model):
                    return
            time.sleep(0.5)
    finally:
        client.close()
    raise RuntimeError(f"Triton did not serve {model} on {address} within {timeout_s:.0f} s")


@contextlib.contextmanager
def triton_server(service: str = "text", model: str = "text_moderation", *, max_queue_delay_us: int = 0,
                  output: int | None = None, timeout_s: float = 180.0,
                  model_repository: Path | None = None) -> Iterator[TritonServer]:
    """A started Triton host for `service`'s models on free loopback ports; SIGTERM on exit."""
    if not TRITON_PYTHON.exists():
        raise RuntimeError(MISSING)
    base = free_base_port(2)
    command = [str(TRITON_PYTHON), "-m", "services.common.serving.pytriton_host", "--service", service,
               "--grpc-port", str(base), "--http-port", str(base + 1), "--max-queue-delay-us", str(max_queue_delay_us)]
    if model_repository is not None:
        command += ["--model-repository", str(model_repository)]
    process = subprocess.Popen(command, cwd=ROOT, env=triton_environment(), stdout=output, stderr=output)
    address = f"127.0.0.1:{base}"
    try:
        wait_ready(address, model, process, timeout_s)
        yield TritonServer(address, process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

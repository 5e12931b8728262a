"""Locust load test of the router, for users who load-test with Locust (not needed by the test suite).

    pip install locust
    locust -f bench/locustfile.py --host 127.0.0.1:8100 --tenant-key demo-acme-key \\
        --headless -u 50 -r 10 -t 1m [--image-share 0.1] [--deadline-ms 2000]

Each simulated user calls `auditmesh.v1.ModerationService/Moderate` over gRPC (patched for gevent)
at about one request per second (`constant_throughput(1)`), sending the benchmark's texts and, with
probability `--image-share`, one of its rendered images; Locust's request statistics get one entry
per call (`grpc Moderate text` / `grpc Moderate image`), failures carrying the gRPC status.

Locust users are closed loop: a user waits for its answer before the next request, so under
overload the offered rate drops (coordinated omission). For knee, P99 and isolation numbers use the
open-loop `python -m bench.mesh_bench`; use this file for soak tests and Locust's UI.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import grpc.experimental.gevent as grpc_gevent

# Locust puts bench/ on sys.path, not the repository root the imports below are relative to.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditmesh.v1 import moderation_pb2_grpc as pb_grpc  # noqa: E402
from locust import User, constant_throughput, events, task  # noqa: E402

from bench.payloads import BenchInputs  # noqa: E402
from bench.router_target import CHANNEL_OPTIONS, build_requests  # noqa: E402

grpc_gevent.init_gevent()  # before any channel: gRPC's I/O must yield to gevent


@events.init_command_line_parser.add_listener  # type: ignore[untyped-decorator, unused-ignore]
def _arguments(parser: Any) -> None:
    parser.add_argument("--tenant-key", default="demo-acme-key", help="API key sent as x-api-key")
    parser.add_argument("--image-share", type=float, default=0.1, help="share of requests that carry an image")
    parser.add_argument("--deadline-ms", type=float, default=2000.0, help="gRPC deadline of each call")


class ModerationClient:
    """Calls Moderate and reports each call to Locust's `request` event."""

    def __init__(self, environment: Any, host: str, key: str, deadline_s: float) -> None:
        self._environment = environment
        self._channel = grpc.insecure_channel(host, options=CHANNEL_OPTIONS)
        self._stub: Any = pb_grpc.ModerationServiceStub(self._channel)
        self._metadata = (("x-api-key", key),)
        self._deadline_s = deadline_s

    def moderate(self, name: str, request: Any) -> None:
        """One call; Locust records its time, size, and the RpcError if it failed."""
        started = time.perf_counter()
        length, exception = 0, None
        try:
            length = self._stub.Moderate(request, metadata=self._metadata, timeout=self._deadline_s).ByteSize()
        except grpc.RpcError as error:
            exception = error
        self._environment.events.request.fire(request_type="grpc", name=name, response_length=length,
                                              response_time=(time.perf_counter() - started) * 1000,
                                              exception=exception, context={})

    def close(self) -> None:
        self._channel.close()


class ModerationUser(User):
    """A platform sending chat lines and, sometimes, pictures to the router."""

    wait_time = constant_throughput(1.0)
    requests = build_requests(BenchInputs.build())

    def on_start(self) -> None:
        options = self.environment.parsed_options
        self.client = ModerationClient(self.environment, self.host, options.tenant_key, options.deadline_ms / 1000)
        self.image_share = float(options.image_share)

    def on_stop(self) -> None:
        self.client.close()

    @task  # type: ignore[untyped-decorator, unused-ignore]
    def moderate(self) -> None:
        kind = "image" if random.random() < self.image_share else "text"
        self.client.moderate(f"Moderate {kind}", random.choice(self.requests[kind]))

"""The gRPC listener settings every service shares (router included), and their environment overrides.

Environment overrides, read once at start (for containers): `AUDITMESH_LISTEN` (host:port),
`AUDITMESH_METRICS_LISTEN` (host:port of `/metrics`, or `off`) and `AUDITMESH_TLS_CERT_FILE`,
`AUDITMESH_TLS_KEY_FILE`, `AUDITMESH_TLS_CLIENT_CA_FILE` (`server.tls`, services/common/tls_config.py). A modality service's whole config is
`services.common.serving.modality_config`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from services.common.tls_config import ServerTlsConfig, server_tls_from_env


ENV_LISTEN = "AUDITMESH_LISTEN"
ENV_METRICS_LISTEN = "AUDITMESH_METRICS_LISTEN"
ENV_MODEL_REPOSITORY = "AUDITMESH_MODEL_REPOSITORY"


@dataclass(frozen=True)
class ServerConfig:
    """gRPC listener settings shared by every service (router included)."""

    listen: str = "127.0.0.1:0"
    grace_period_s: float = 10.0
    max_message_bytes: int = 32 * 1024 * 1024
    metrics_listen: str = ""  # host:port of the Prometheus /metrics endpoint; "" = none
    #: Calls in progress at once (streams count as one); beyond it gRPC answers RESOURCE_EXHAUSTED
    #: ("Concurrent RPC limit exceeded!") before any Python handler runs: the cheapest rejection
    #: there is, so an overloaded process answers at once instead of queueing. 0 = no limit.
    max_concurrent_rpcs: int = 0
    #: Calls gRPC holds that Python has not picked up yet (its backlog, while the event loop is busy).
    #: Past half of this gRPC starts refusing new calls at random, past all of it every new call,
    #: with CANCELLED, in C, at once (gRPC's `grpc.server.max_pending_requests` soft and hard
    #: limits). 0 = gRPC's defaults (1000 / 3000): a backlog that deep takes seconds to drain here.
    max_pending_calls: int = 0
    #: TLS for this listener (services/common/tls_config.py); None = plaintext (loopback only).
    tls: ServerTlsConfig | None = None
    #: Close each client connection this long after it opened (GOAWAY: calls in progress get
    #: `max_connection_age_grace_s` to finish; the client reconnects, through its load balancer, so
    #: connections spread over replicas that started later). 0 = never. A ModerateStream still open
    #: after age + grace is ended with UNAVAILABLE and must be reopened by its client.
    max_connection_age_s: float = 0.0
    max_connection_age_grace_s: float = 30.0

    def __post_init__(self) -> None:
        host, sep, port = self.listen.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"listen must be host:port, got {self.listen!r}")
        host, sep, port = self.metrics_listen.rpartition(":")
        if self.metrics_listen and (not sep or not host or not port.isdigit()):
            raise ValueError(f"metrics_listen must be host:port or empty, got {self.metrics_listen!r}")
        if self.max_pending_calls < 0 or self.max_pending_calls == 1:
            raise ValueError(f"max_pending_calls must be 0 (gRPC's default) or >= 2, got {self.max_pending_calls}")
        if self.max_concurrent_rpcs < 0:
            raise ValueError(f"max_concurrent_rpcs must be >= 0 (0 = no limit), got {self.max_concurrent_rpcs}")
        if self.grace_period_s < 0:
            raise ValueError(f"grace_period_s must be >= 0, got {self.grace_period_s}")
        if self.max_connection_age_s < 0 or self.max_connection_age_grace_s < 0:
            raise ValueError("max_connection_age_s and max_connection_age_grace_s must be >= 0 (age 0 = never)")
        if self.max_message_bytes < 4 * 1024 * 1024:
            raise ValueError(f"max_message_bytes must be >= 4 MiB, got {self.max_message_bytes}")


def server_from_env(server: ServerConfig, env: Mapping[str, str]) -> ServerConfig:
    """`server` with AUDITMESH_LISTEN, AUDITMESH_METRICS_LISTEN ("off" = no endpoint) and the
    AUDITMESH_TLS_* files (services/common/tls_config.py) applied."""
    if env.get(ENV_LISTEN):
        server = replace(server, listen=env[ENV_LISTEN])
    metrics = env.get(ENV_METRICS_LISTEN, "").strip()
    if metrics:
        server = replace(server, metrics_listen="" if metrics.lower() == "off" else metrics)
    tls = server_tls_from_env(server.tls, env)
    return replace(server, tls=tls) if tls is not server.tls else server



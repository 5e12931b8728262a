"""Container health probe: `python -m services.common.healthcheck HOST:PORT [SERVICE]` exits 0 when SERVING
(SERVICE: a grpc.health service name; the liveness probe of a service whose readiness follows its data
asks `auditmesh.liveness`, which only a stopping or stopped process fails: services/common/grpc_server.py).

A process at its `max_concurrent_rpcs` limit answers the probe itself with RESOURCE_EXHAUSTED: it is
alive and working at capacity, so that also counts as healthy (a restart would only lose its work).

With TLS on (env AUDITMESH_TLS_CERT_FILE / AUDITMESH_TLS_KEY_FILE, the service's own settings) the
probe connects over TLS, trusting AUDITMESH_TLS_CLIENT_CA_FILE (the mesh CA) and presenting the
service's own certificate, which the mesh CA issues for client use too (services/common/tls_certs.py).
"""

from __future__ import annotations

import os
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.tls import channel_credentials
from services.common.tls_config import ENV_TLS_CERT_FILE, ENV_TLS_CLIENT_CA_FILE, ENV_TLS_KEY_FILE, ClientTlsConfig


def _channel(address: str) -> grpc.Channel:
    env = os.environ
    if not env.get(ENV_TLS_CERT_FILE):
        return grpc.insecure_channel(address)
    tls = ClientTlsConfig(env.get(ENV_TLS_CLIENT_CA_FILE) or env[ENV_TLS_CERT_FILE], env[ENV_TLS_CERT_FILE],
                          env.get(ENV_TLS_KEY_FILE, ""))
    return grpc.secure_channel(address, channel_credentials(tls, source="healthcheck"))


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python -m services.common.healthcheck HOST:PORT [SERVICE]", file=sys.stderr)
        return 2
    service = argv[1] if len(argv) == 2 else ""
    with _channel(argv[0]) as channel:
        try:
            status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=3).status
        except grpc.RpcError as error:
            code = error.code()
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                print(f"{argv[0]}: busy (at its concurrent call limit), alive")
                return 0
            print(f"{argv[0]}: {code.name}", file=sys.stderr)
            return 1
    print(f"{argv[0]}: {health_pb2.HealthCheckResponse.ServingStatus.Name(status)}")
    return 0 if status == health_pb2.HealthCheckResponse.SERVING else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""TLS settings of a listener and of the router's upstream channels. Pure (no gRPC); credentials are
built from them by `services.common.tls`.

A listener (`server.tls` in any service's config)::

    server:
      tls:
        cert_file: /etc/auditmesh/tls/router.crt     # PEM chain, re-read when it changes
        key_file: /etc/auditmesh/tls/router.key
        client_ca_file: ""                           # set = mTLS: clients need a certificate from this CA

The router's channels to the modality services (`internal.tls` in config/router.yaml)::

    internal:
      tls: {ca_file: /etc/auditmesh/tls/ca.crt, cert_file: .../router-client.crt, key_file: .../router-client.key}

Environment overrides (read once at start): `AUDITMESH_TLS_CERT_FILE`, `AUDITMESH_TLS_KEY_FILE`,
`AUDITMESH_TLS_CLIENT_CA_FILE` (a listener; setting the first two turns TLS on) and
`AUDITMESH_UPSTREAM_TLS_CA_FILE`, `AUDITMESH_UPSTREAM_TLS_CERT_FILE`, `AUDITMESH_UPSTREAM_TLS_KEY_FILE`
(the router's channels).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

ENV_TLS_CERT_FILE = "AUDITMESH_TLS_CERT_FILE"
ENV_TLS_KEY_FILE = "AUDITMESH_TLS_KEY_FILE"
ENV_TLS_CLIENT_CA_FILE = "AUDITMESH_TLS_CLIENT_CA_FILE"
ENV_UPSTREAM_TLS_CA_FILE = "AUDITMESH_UPSTREAM_TLS_CA_FILE"
ENV_UPSTREAM_TLS_CERT_FILE = "AUDITMESH_UPSTREAM_TLS_CERT_FILE"
ENV_UPSTREAM_TLS_KEY_FILE = "AUDITMESH_UPSTREAM_TLS_KEY_FILE"


@dataclass(frozen=True)
class ServerTlsConfig:
    """A TLS listener: its certificate chain and key, and (for mTLS) the CA its clients' certificates
    must chain to. The files are re-read when they change (new connections get the new ones)."""

    cert_file: str
    key_file: str
    client_ca_file: str = ""

    def __post_init__(self) -> None:
        if not self.cert_file or not self.key_file:
            raise ValueError("cert_file and key_file are both required")

    @property
    def mutual(self) -> bool:
        return bool(self.client_ca_file)


@dataclass(frozen=True)
class ClientTlsConfig:
    """A TLS client: the CA the server's certificate must chain to and, for mTLS, its own certificate.
    `server_name`, when set, is the name checked in the server's certificate instead of the host."""

    ca_file: str
    cert_file: str = ""
    key_file: str = ""
    server_name: str = ""

    def __post_init__(self) -> None:
        if not self.ca_file:
            raise ValueError("ca_file is required")
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("cert_file and key_file go together (both for mTLS, neither for TLS only)")


def server_tls_from_env(tls: ServerTlsConfig | None, env: Mapping[str, str]) -> ServerTlsConfig | None:
    """`tls` with the AUDITMESH_TLS_* overrides applied (ValueError for a half-set pair)."""
    cert, key = env.get(ENV_TLS_CERT_FILE, ""), env.get(ENV_TLS_KEY_FILE, "")
    client_ca = env.get(ENV_TLS_CLIENT_CA_FILE, "")
    if not (cert or key or client_ca):
        return tls
    return ServerTlsConfig(cert or (tls.cert_file if tls else ""), key or (tls.key_file if tls else ""),
                           client_ca or (tls.client_ca_file if tls else ""))


def client_tls_from_env(tls: ClientTlsConfig | None, env: Mapping[str, str]) -> ClientTlsConfig | None:
    """`tls` with the AUDITMESH_UPSTREAM_TLS_* overrides applied."""
    ca, cert = env.get(ENV_UPSTREAM_TLS_CA_FILE, ""), env.get(ENV_UPSTREAM_TLS_CERT_FILE, "")
    key = env.get(ENV_UPSTREAM_TLS_KEY_FILE, "")
    if not (ca or cert or key):
        return tls
    return ClientTlsConfig(ca or (tls.ca_file if tls else ""), cert or (tls.cert_file if tls else ""),
                           key or (tls.key_file if tls else ""), tls.server_name if tls else "")

"""gRPC TLS credentials from `services.common.tls_config`, with certificate files re-read when they change.

Server side: `server_credentials` uses grpc's dynamic SSL server credentials
(`grpc.dynamic_ssl_server_credentials`): gRPC asks the fetcher before every new TLS handshake, and the
fetcher returns a new `grpc.ssl_server_certificate_configuration` when a file's size or mtime changed
(checked at most every `check_interval_s`). Established connections keep the certificate they were
opened with. A rotation caught half-written (a key that does not match the certificate, an unreadable
file) is ignored with a warning and the previous certificate stays in use until the files are whole.

Client side: `CertificateFiles` tells the router's upstream client (`services.router.upstream_client`)
when its files changed, and it then opens a new channel with `channel_credentials`.

Example::

    server.add_secure_port("0.0.0.0:8100", server_credentials(ServerTlsConfig("tls.crt", "tls.key")))
    channel = grpc.aio.secure_channel("router:8100", channel_credentials(ClientTlsConfig("ca.crt")))
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from pathlib import Path
from typing import Callable, Sequence

import grpc

from services.common.config import ConfigError
from services.common.tls_config import ClientTlsConfig, ServerTlsConfig

log = logging.getLogger(__name__)
#: Seconds between checks of the certificate files' mtimes (each new connection may trigger one).
CHECK_INTERVAL_S = 1.0


class CertificateFiles:
    """Files whose (size, mtime) is watched; `changed()` is cheap and rate-limited."""

    def __init__(self, paths: Sequence[str], *, check_interval_s: float = CHECK_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.paths = [p for p in paths if p]
        self._interval = check_interval_s
        self._clock = clock
        self._lock = threading.Lock()  # gRPC calls the fetcher from its own threads
        self._stamp = self._read_stamp()
        self._checked = clock()

    def _read_stamp(self) -> tuple[tuple[int, int], ...]:
        stamps = []
        for path in self.paths:
            try:
                stat = os.stat(path)
                stamps.append((stat.st_size, stat.st_mtime_ns))
            except OSError:
                stamps.append((-1, -1))
        return tuple(stamps)

    def changed(self) -> bool:
        """True once after any file's size or mtime changed since the last True (or the start)."""
        with self._lock:
            now = self._clock()
            if now - self._checked < self._interval:
                return False
            self._checked = now
            stamp = self._read_stamp()
            if stamp == self._stamp:
                return False
            self._stamp = stamp
            return True

    def retry_later(self) -> None:
        """Make the next check (after the interval) report a change again: the last one was not usable."""
        with self._lock:
            self._stamp = ()


def read_pem(path: str, source: str, key: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise ConfigError(source, key, f"cannot read {path}: {error.strerror}") from None


def check_pair(cert_file: str, key_file: str, source: str, key: str) -> None:
    """ConfigError unless `key_file` is the private key of the certificate in `cert_file`."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert_file, key_file)
    except (ssl.SSLError, OSError) as error:
        raise ConfigError(source, key, f"{cert_file} and {key_file} are not a certificate and its key: {error}") from None


def _server_certificates(config: ServerTlsConfig, source: str) -> grpc.ServerCertificateConfiguration:
    check_pair(config.cert_file, config.key_file, source, "server.tls")
    pair = [(read_pem(config.key_file, source, "server.tls.key_file"),
             read_pem(config.cert_file, source, "server.tls.cert_file"))]
    roots = read_pem(config.client_ca_file, source, "server.tls.client_ca_file") if config.mutual else None
    return grpc.ssl_server_certificate_configuration(pair, root_certificates=roots)


def server_credentials(config: ServerTlsConfig, *, source: str = "server.tls",
                       check_interval_s: float = CHECK_INTERVAL_S) -> grpc.ServerCredentials:
    """Credentials for `add_secure_port` that pick up changed certificate files (module docstring).
    Raises ConfigError (naming `source`) when the files cannot be used at start."""
    initial = _server_certificates(config, source)
    files = CertificateFiles([config.cert_file, config.key_file, config.client_ca_file],
                             check_interval_s=check_interval_s)

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        if not files.changed():
            return None
        try:
            fresh = _server_certificates(config, source)
        except ConfigError as error:
            log.warning("TLS certificate files changed but cannot be used yet; keeping the previous ones: %s", error)
            return None
        log.info("TLS certificate files changed: new connections use the new certificate (%s)", config.cert_file)
        return fresh

    return grpc.dynamic_ssl_server_credentials(initial, fetch, require_client_authentication=config.mutual)


def channel_credentials(config: ClientTlsConfig, *, source: str = "internal.tls") -> grpc.ChannelCredentials:
    """Channel credentials trusting `config.ca_file`, with the client certificate when set (mTLS)."""
    if config.cert_file:
        check_pair(config.cert_file, config.key_file, source, "tls")
    return grpc.ssl_channel_credentials(
        root_certificates=read_pem(config.ca_file, source, "tls.ca_file"),
        private_key=read_pem(config.key_file, source, "tls.key_file") if config.key_file else None,
        certificate_chain=read_pem(config.cert_file, source, "tls.cert_file") if config.cert_file else None)


def channel_options(config: ClientTlsConfig | None) -> list[tuple[str, str]]:
    """The channel options a TLS client needs (`server_name` as the name to verify)."""
    if config is None or not config.server_name:
        return []
    return [("grpc.ssl_target_name_override", config.server_name)]

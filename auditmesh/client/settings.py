"""The client's settings, validated once on construction, and the API key from the environment.

Example::

    >>> config = ClientConfig(addresses=("10.0.0.1:8100", "10.0.0.2:8100"), api_key="k", linger_ms=2)
    >>> config.linger_s
    0.002
    >>> ClientConfig(addresses=(), api_key="k")
    Traceback (most recent call last):
    ...
    ValueError: addresses: give at least one router address (host:port)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import grpc

from auditmesh.client.retry import RetryPolicy

#: Environment variable read (once, when a client is built) for the API key when none is given.
API_KEY_ENV = "AUDITMESH_API_KEY"
#: The router's shipped `limits.max_batch_items` (config/router.yaml); a larger batch is refused whole.
ROUTER_MAX_BATCH_ITEMS = 128
#: Like the router's own limits: images of a few MiB must fit in one message. An address that resolves
#: to several routers (`dns:///routers.example:8100`, several A records) gets calls spread round robin
#: over every one that is up; keepalive pings every 30 s find a dead connection (a router's host gone)
#: within 40 s even while idle (routers allow pings every 10 s or more).
DEFAULT_CHANNEL_OPTIONS: tuple[tuple[str, int | str], ...] = (("grpc.max_send_message_length", 64 << 20),
                                                              ("grpc.max_receive_message_length", 64 << 20),
                                                              ("grpc.lb_policy_name", "round_robin"),
                                                              ("grpc.keepalive_time_ms", 30_000),
                                                              ("grpc.keepalive_timeout_ms", 10_000),
                                                              ("grpc.keepalive_permit_without_calls", 1))


def api_key_from(explicit: str | None, environ: Mapping[str, str] = os.environ) -> str:
    """`explicit`, else $AUDITMESH_API_KEY; ValueError naming both when neither is set."""
    key = explicit if explicit is not None else environ.get(API_KEY_ENV, "")
    if not key.strip():
        raise ValueError(f"api_key: pass api_key=... or set {API_KEY_ENV}")
    return key.strip()


@dataclass(frozen=True)
class ClientTls:
    """TLS to the routers (a public port served with AUDITMESH_TLS_CERT_FILE): `ca_file`, the CA that signed
    their certificate (None: the system's trusted roots); for mutual TLS, `cert_file` and `key_file`, this
    client's certificate and key; `server_name`, the name to check the certificate against when the
    addresses do not carry it (an IP address, a tunnel). Files are read when the channels are made.

    Example::

        >>> ClientTls(ca_file="ca.crt", cert_file="client.crt")
        Traceback (most recent call last):
        ...
        ValueError: tls: cert_file and key_file go together (mutual TLS), got only one
    """

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str = ""

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("tls: cert_file and key_file go together (mutual TLS), got only one")

    def credentials(self) -> grpc.ChannelCredentials:
        """The channel credentials; ValueError naming a file that cannot be read."""
        def read(path: str | None, what: str) -> bytes | None:
            if path is None:
                return None
            try:
                return Path(path).read_bytes()
            except OSError as error:
                raise ValueError(f"tls.{what}: cannot read {path}: {error.strerror}") from None
        return grpc.ssl_channel_credentials(read(self.ca_file, "ca_file"), read(self.key_file, "key_file"),
                                            read(self.cert_file, "cert_file"))

    def channel_options(self) -> tuple[tuple[str, int | str], ...]:
        """The options that go with the credentials (the certificate name to check, when given)."""
        return (("grpc.ssl_target_name_override", self.server_name),) if self.server_name else ()


def blocking_channel(address: str, tls: ClientTls | None, options: Sequence[tuple[str, int | str]] = ()) -> grpc.Channel:
    """A blocking (non-asyncio) channel to `address`: plaintext, or TLS with `tls` (the command-line tools)."""
    if tls is None:
        return grpc.insecure_channel(address, options=list(options))
    return grpc.secure_channel(address, tls.credentials(), options=[*options, *tls.channel_options()])


@dataclass(frozen=True)
class ClientConfig:
    """Everything a client needs; see `auditmesh.client.AsyncClient` for what each setting does."""

    addresses: Sequence[str]
    api_key: str
    timeout_s: float = 2.0
    linger_ms: float = 5.0
    max_batch_items: int = 64
    batching: bool = True
    send_when_idle: bool = True
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    channel_options: Sequence[tuple[str, int | str]] = DEFAULT_CHANNEL_OPTIONS
    #: TLS to the routers; None: plaintext (a router on loopback, or behind a TLS-terminating proxy).
    tls: ClientTls | None = None

    def __post_init__(self) -> None:
        if isinstance(self.addresses, str):
            raise TypeError("addresses: give a list of host:port strings, not one string")
        if not self.addresses:
            raise ValueError("addresses: give at least one router address (host:port)")
        for address in self.addresses:
            host, sep, port = address.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"addresses: {address!r} is not host:port")
        if not self.api_key:
            raise ValueError(f"api_key: pass api_key=... or set {API_KEY_ENV}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")
        if self.linger_ms < 0:
            raise ValueError(f"linger_ms must be >= 0, got {self.linger_ms}")
        if not 1 <= self.max_batch_items <= ROUTER_MAX_BATCH_ITEMS:
            raise ValueError(f"max_batch_items must be 1..{ROUTER_MAX_BATCH_ITEMS} (the router's limit), "
                             f"got {self.max_batch_items}")
        object.__setattr__(self, "addresses", tuple(self.addresses))
        object.__setattr__(self, "channel_options", tuple(self.channel_options))

    @property
    def linger_s(self) -> float:
        return self.linger_ms / 1000.0


class RoundRobin:
    """Hands out indexes 0..n-1 in turn: each call (and each retry) goes to the next router address.

    Example::

        >>> picker = RoundRobin(3)
        >>> [picker.next() for _ in range(4)]
        [0, 1, 2, 0]
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self._size = size
        self._next = 0

    def next(self) -> int:
        index = self._next
        self._next = (index + 1) % self._size
        return index


__all__ = ["API_KEY_ENV", "ClientConfig", "DEFAULT_CHANNEL_OPTIONS", "ROUTER_MAX_BATCH_ITEMS", "RoundRobin", "api_key_from"]

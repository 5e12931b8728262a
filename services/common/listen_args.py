"""Command-line flags every service shares for where it listens: `--listen` and `--metrics-listen`.

A service's whole command line, port included, then says how it runs (the launcher logs it), instead
of hiding the port in the environment. Precedence, highest first: the flag, the environment variable
(`AUDITMESH_LISTEN`, `AUDITMESH_METRICS_LISTEN`, for containers), the config file.

Example::

    add_listen_arguments(parser)
    args = parser.parse_args(["--listen", "127.0.0.1:8101", "--metrics-listen", "off"])
    server = apply_listen_arguments(config.server, args)   # listen 127.0.0.1:8101, no /metrics
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from services.common.service_config import ServerConfig

OFF = "off"


def host_port(value: str) -> str:
    """argparse type: `host:port` with a port in 0..65535 (0 = any free port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected host:port, got {value!r}")
    return value


def host_port_or_off(value: str) -> str:
    """argparse type: `host:port`, or `off` (any case) for no endpoint; returns "" for off."""
    return "" if value.strip().lower() == OFF else host_port(value)


def add_listen_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `--listen` and `--metrics-listen` to a service's parser."""
    parser.add_argument("--listen", type=host_port, default=None, metavar="HOST:PORT",
                        help="gRPC address to listen on (default: env AUDITMESH_LISTEN, else the config's)")
    parser.add_argument("--metrics-listen", type=host_port_or_off, default=None, metavar="HOST:PORT|off",
                        help="Prometheus /metrics address, or 'off' for none (default: env "
                             "AUDITMESH_METRICS_LISTEN, else the config's)")


def apply_listen_arguments(server: ServerConfig, args: argparse.Namespace) -> ServerConfig:
    """`server` with the flags that were given applied (the ones left out keep its values)."""
    if args.listen is not None:
        server = replace(server, listen=args.listen)
    if args.metrics_listen is not None:
        server = replace(server, metrics_listen=args.metrics_listen)
    return server


__all__ = ["add_listen_arguments", "apply_listen_arguments", "host_port", "host_port_or_off"]

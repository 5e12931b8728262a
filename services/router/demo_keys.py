"""The shipped demo keys, and the start-up check that keeps them off the network. Pure.

config/tenants.yaml and config/router.yaml ship keys anyone can read in the repository
("demo-acme-key", "demo-globex-key", "demo-admin-key"). A router that listens on anything but
loopback with one of them configured would let anyone in, so it refuses to start, unless
`allow_demo_keys: true` (or env AUDITMESH_ALLOW_DEMO_KEYS=1) says this is a demo on purpose (the
compose file sets it and publishes the port on the host's loopback only).

Example::

    check_demo_keys(["0.0.0.0:8100"], [tenant.api_key_sha256 for tenant in tenants], allow=False,
                    source="config/router.yaml")     # ConfigError naming the demo key and the address
"""

from __future__ import annotations

import ipaddress
from typing import Iterable, Sequence

from services.common.config import ConfigError
from services.router.tenants import hash_key

DEMO_KEYS = ("demo-acme-key", "demo-globex-key", "demo-admin-key")
DEMO_DIGESTS = {hash_key(key): key for key in DEMO_KEYS}


def is_loopback(listen: str) -> bool:
    """True when host:port `listen` binds loopback only (127.0.0.0/8, ::1, localhost)."""
    host = listen.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_demo_keys(listens: Sequence[str], digests: Iterable[str], *, allow: bool, source: str) -> None:
    """ConfigError when a demo key is configured and any of `listens` is not loopback, unless `allow`."""
    if allow:
        return
    exposed = [listen for listen in listens if listen and not is_loopback(listen)]
    demo = sorted({DEMO_DIGESTS[d.lower()] for d in digests if d.lower() in DEMO_DIGESTS})
    if exposed and demo:
        raise ConfigError(source, "allow_demo_keys",
                          f"the demo key {demo[0]!r} is configured and the router listens on {exposed[0]}, which is not "
                          f"loopback: anyone could use it. Replace the demo keys (`auditmesh hash-key`), listen on "
                          f"127.0.0.1, or set allow_demo_keys: true (env AUDITMESH_ALLOW_DEMO_KEYS=1) for a demo")

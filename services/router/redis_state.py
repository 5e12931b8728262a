"""`redis:` in config/router.yaml: the one Redis every router replica shares, for tenants' quotas
(services/router/shared_quota.py, quota_redis.py) and canary counts (services/router/canary_fleet.py).
Off while `url` is "": each router process then keeps both to itself, right for one replica.

Example::

    config = RedisConfig(url="redis://redis:6379/0")
    client = connect(config, timeout_s=0.05)      # redis.asyncio.Redis, its own connection pool
    config.key("quota")                           # "auditmesh:quota"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError


@dataclass(frozen=True)
class RedisConfig:
    """Where the shared Redis is; `key_prefix` lets several meshes share one Redis."""

    #: redis://[:password@]host:port/db, rediss:// for TLS, or unix:///path; "" = off. Env AUDITMESH_REDIS_URL.
    url: str = ""
    key_prefix: str = "auditmesh"

    def __post_init__(self) -> None:
        if self.url and not self.url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("url must start with redis://, rediss:// or unix:// (or be empty: off)")
        if not self.key_prefix or any(c.isspace() or c in "{}" for c in self.key_prefix):
            raise ValueError(f"key_prefix must be non-empty, without spaces or braces, got {self.key_prefix!r}")

    def __repr__(self) -> str:  # the URL may carry a password
        return f"RedisConfig(url={'<set>' if self.url else ''!r}, key_prefix={self.key_prefix!r})"

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    def key(self, *parts: str) -> str:
        """`<key_prefix>:<part>:...`."""
        return ":".join((self.key_prefix, *parts))


def connect(config: RedisConfig, *, timeout_s: float, connect_timeout_s: float | None = None) -> Any:
    """An asyncio client (its own pool) for `config.url`: replies time out after `timeout_s`, connecting
    after `connect_timeout_s` (default the same). A command is sent again at once only after a broken
    connection (e.g. pooled before Redis restarted), never after a timeout: a late reply's command may
    have run, and the callers decide what a slow Redis means. (A grant sent twice can only leave unused
    tokens counted in Redis: fewer items admitted, never more.)"""
    return aioredis.from_url(config.url, socket_timeout=timeout_s,
                             socket_connect_timeout=connect_timeout_s if connect_timeout_s is not None else timeout_s,
                             health_check_interval=30, retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)))


def connect_blocking(config: RedisConfig, *, timeout_s: float) -> Any:
    """A blocking client for `config.url` (for work already off the event loop: the review-task queue's
    writes and leases run on threads): replies and connecting time out after `timeout_s`; a command is sent
    again at once only after a broken connection, as `connect` does."""
    import redis
    from redis.retry import Retry as BlockingRetry

    return redis.Redis.from_url(config.url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                health_check_interval=30,
                                retry=BlockingRetry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)))

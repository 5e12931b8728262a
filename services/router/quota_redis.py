"""The shared quota's counters in Redis (services/router/shared_quota.py says what they mean).

One Lua script per lease, atomic in Redis: it reads the server's clock (`TIME`), finds the current
window, grants at most what is left of the tenant's limit in it (`INCRBY` only by what it grants), and
gives a new window's key an expiry of one window plus a random jitter (so that the keys of many tenants
do not all expire in the same instant). It answers the grant, the microseconds left in the window (from
Redis's clock to the microsecond, so the lease never outlives the window), the counter after the grant
and the window's number.

Keys: `<redis.key_prefix>:quota:{<tenant>}:<window>`. The tenant id is in braces (a Redis Cluster hash tag), so all
of one tenant's counters live on one node; one Redis (or a managed one with a replica) is the expected
deployment.

Example::

    backend = RedisQuotaBackend.for_config(RedisConfig(url="redis://127.0.0.1:6379/0"), timeout_s=0.05)
    grant = await backend.lease("acme", limit=200, amount=4, window_ms=1000)
    await backend.close()
"""

from __future__ import annotations

import random
from typing import Any

from services.router.redis_state import RedisConfig, connect
from services.router.shared_quota import Grant

#: KEYS[1]: the tenant's key prefix; ARGV: window_ms, limit, amount, jitter_ms.
LEASE_SCRIPT = """
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window_ms = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local amount = tonumber(ARGV[3])
local window = math.floor(now_ms / window_ms)
local key = KEYS[1] .. string.format('%d', window)
local used = tonumber(redis.call('GET', key) or '0')
local grant = math.min(amount, limit - used)
if grant < 0 then grant = 0 end
if grant > 0 then
  used = redis.call('INCRBY', key, grant)
  if used == grant then redis.call('PEXPIRE', key, window_ms + tonumber(ARGV[4])) end
end
local left_us = (window + 1) * window_ms * 1000 - (tonumber(t[1]) * 1000000 + tonumber(t[2]))
return {grant, left_us, used, string.format('%d', window)}
"""


class RedisQuotaBackend:
    """`QuotaBackend` over one Redis (redis-py's asyncio client, its own connection pool)."""

    def __init__(self, client: Any, key_prefix: str, *, jitter_fraction: float = 0.5) -> None:
        self._client = client
        self._prefix = key_prefix
        self._jitter_fraction = jitter_fraction
        self._script = client.register_script(LEASE_SCRIPT)

    @classmethod
    def for_config(cls, config: RedisConfig, *, timeout_s: float = 0.05) -> RedisQuotaBackend:
        """A backend on `config`'s Redis (keys under `<key_prefix>:quota`): replies wait up to `timeout_s`
        (SharedQuota stops waiting at its own timeout and lets the reply land later), connecting up to 2 s."""
        return cls(connect(config, timeout_s=max(timeout_s, 1.0), connect_timeout_s=2.0), config.key("quota"))

    def key_for(self, tenant: str) -> str:
        """The prefix of the tenant's window keys (the window's number is appended)."""
        return f"{self._prefix}:{{{tenant}}}:"

    async def lease(self, tenant: str, limit: int, amount: int, window_ms: int) -> Grant:
        """Grant up to `amount` of what is left of `limit` in the current window (see the module docstring)."""
        jitter_ms = int(random.random() * self._jitter_fraction * window_ms)
        granted, left_us, used, window = await self._script(keys=[self.key_for(tenant)],
                                                            args=[window_ms, limit, amount, jitter_ms])
        return Grant(int(granted), int(left_us) / 1000.0, int(used), int(window))

    async def warm(self) -> None:
        """Connect (authenticating, selecting the database) and load the script, before the first lease."""
        await self._client.script_load(LEASE_SCRIPT)

    async def close(self) -> None:
        await self._client.aclose()

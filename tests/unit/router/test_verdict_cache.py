"""The verdict cache on a fake clock: TTL, the per-tenant byte bound, LRU eviction order, tenant
isolation, keys that change with every policy or model version, config validation."""

from __future__ import annotations

import pytest

from services.router.verdict_cache import ENTRY_OVERHEAD_BYTES, VerdictCache, VerdictCacheConfig
from tests.stubs import FakeClock

SCOPE = ("default", "v1", "", "", "text_moderation=1", "toxicity_en=3")
PARTS = [("text", b"gg")]


def make(**settings: object) -> tuple[VerdictCache[str], FakeClock]:
    clock = FakeClock()
    config = VerdictCacheConfig(enabled=True, **settings)  # type: ignore[arg-type]
    return VerdictCache(config, clock=clock, secret=b"s" * 32), clock


def test_a_stored_verdict_is_found_until_its_ttl_then_gone() -> None:
    cache, clock = make(ttl_s=10.0)
    key = cache.key("acme", SCOPE, PARTS)
    assert cache.get("acme", key) is None
    assert cache.put("acme", key, "allow", 100)
    clock.now += 9.99
    assert cache.get("acme", key) == "allow"  # a use does not extend the TTL ...
    clock.now += 0.02
    assert cache.get("acme", key) is None  # ... which counts from insertion
    stats = cache.stats()["acme"]
    assert (stats.hits, stats.misses, stats.evictions["ttl"], stats.entries, stats.bytes) == (1, 2, 1, 0, 0)


def test_the_byte_bound_evicts_the_least_recently_used_first() -> None:
    entry = 1000 - ENTRY_OVERHEAD_BYTES  # each entry counts exactly 1000 bytes
    cache, _ = make(max_bytes_per_tenant=3000, max_entry_bytes=1000)
    keys = [cache.key("acme", SCOPE, [("text", str(i).encode())]) for i in range(4)]
    for i in range(3):
        cache.put("acme", keys[i], f"v{i}", entry)
    assert cache.get("acme", keys[0]) == "v0"  # 0 is now the most recently used; 1 the least
    cache.put("acme", keys[3], "v3", entry)
    assert cache.get("acme", keys[1]) is None
    assert [cache.get("acme", k) for k in (keys[0], keys[2], keys[3])] == ["v0", "v2", "v3"]
    stats = cache.stats()["acme"]
    assert stats.bytes == 3000 and stats.entries == 3 and stats.evictions["size"] == 1


def test_an_entry_over_max_entry_bytes_is_not_stored() -> None:
    cache, _ = make(max_bytes_per_tenant=4096, max_entry_bytes=2048)
    key = cache.key("acme", SCOPE, PARTS)
    assert not cache.put("acme", key, "huge", 2048)
    assert cache.get("acme", key) is None


def test_replacing_a_key_does_not_double_count_its_bytes() -> None:
    cache, _ = make()
    key = cache.key("acme", SCOPE, PARTS)
    cache.put("acme", key, "a", 100)
    cache.put("acme", key, "b", 300)
    stats = cache.stats()["acme"]
    assert (stats.entries, stats.bytes) == (1, 300 + ENTRY_OVERHEAD_BYTES)
    assert cache.get("acme", key) == "b"


def test_tenants_have_their_own_keys_and_budgets() -> None:
    cache, _ = make(max_bytes_per_tenant=2048, max_entry_bytes=2048)
    acme, other = cache.key("acme", SCOPE, PARTS), cache.key("other", SCOPE, PARTS)
    assert acme != other  # equal content, different digests: a key reveals nothing across tenants
    cache.put("acme", acme, "acme's", 1000)
    assert cache.get("other", acme) is None  # not even with acme's own digest
    for i in range(10):  # other fills its partition many times over ...
        cache.put("other", cache.key("other", SCOPE, [("text", str(i).encode())]), "x", 1000)
    assert cache.get("acme", acme) == "acme's"  # ... and cannot evict acme's entry
    assert cache.stats()["acme"].evictions["size"] == 0


def test_every_scope_field_and_the_content_change_the_key() -> None:
    cache, _ = make()
    base = cache.key("acme", SCOPE, PARTS)
    for index in range(len(SCOPE)):
        changed = list(SCOPE)
        changed[index] += "x"
        assert cache.key("acme", changed, PARTS) != base, f"scope field {index} is not in the key"
    assert cache.key("acme", SCOPE, [("text", b"gG")]) != base
    assert cache.key("acme", SCOPE, [("image", b"gg")]) != base  # the kind is in the key
    assert cache.key("acme", SCOPE, [("text", b"g"), ("text", b"g")]) != base  # so are part boundaries
    assert cache.key("acme", SCOPE, PARTS) == base


def test_retain_drops_removed_tenants() -> None:
    cache, _ = make()
    cache.put("gone", cache.key("gone", SCOPE, PARTS), "x", 10)
    cache.put("kept", cache.key("kept", SCOPE, PARTS), "y", 10)
    cache.retain(["kept"])
    assert list(cache.stats()) == ["kept"]


@pytest.mark.parametrize("settings, message", [
    ({"max_bytes_per_tenant": 10}, "max_bytes_per_tenant"),
    ({"max_bytes_per_tenant": 4096, "max_entry_bytes": 8192}, "max_entry_bytes"),
    ({"ttl_s": 0}, "ttl_s"),
])
def test_config_is_validated(settings: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        VerdictCacheConfig(**settings)  # type: ignore[arg-type]


def test_config_loads_from_router_yaml_keys() -> None:
    from services.common.config import ConfigError, load_dataclass
    from services.router.config import RouterConfig

    upstreams = {m: {"url": "127.0.0.1:1", "model": m} for m in ("text", "vision", "ocr")}
    config = load_dataclass(RouterConfig, {"upstreams": upstreams, "verdict_cache": {"enabled": True, "ttl_s": 5}},
                            "router.yaml")
    assert config.verdict_cache.enabled and config.verdict_cache.ttl_s == 5
    with pytest.raises(ConfigError, match="verdict_cache.text_key"):
        load_dataclass(RouterConfig, {"upstreams": upstreams, "verdict_cache": {"text_key": "raw"}}, "router.yaml")

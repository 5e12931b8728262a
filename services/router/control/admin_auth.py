"""Who may call the PolicyAdmin API: admin keys, kept apart from tenant API keys. Pure.

Keys are stored only as SHA-256 hex digests, in `config/router.yaml` (`lifecycle.admin_keys`) and/or
in a separate YAML file (`lifecycle.admin_keys_file`, e.g. a mounted Kubernetes Secret)::

    admin_keys:
      - {name: ops, key_sha256: 9f86d08188..., tenants: ["*"]}      # every tenant, global pointers
      - {name: acme-trust-safety, key_sha256: ..., tenants: [acme]}  # only acme's pointers and records

A tenant API key is never an admin key (a digest that is both is rejected at start).

Example::

    auth = AdminAuth(keys)
    key = auth.authenticate(metadata_value)          # UnauthenticatedError if unknown
    auth.require(key, "acme")                        # PermissionDeniedError outside its tenants
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from services.common.config import ConfigError, load_yaml_file
from services.common.errors import PermissionDeniedError, UnauthenticatedError
from services.router.tenants import hash_key

#: The metadata header that carries an admin key.
ADMIN_KEY_HEADER = "x-admin-key"
ALL_TENANTS = "*"


@dataclass(frozen=True)
class AdminKey:
    name: str
    key_sha256: str
    tenants: tuple[str, ...] = (ALL_TENANTS,)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("name must not be empty")
        digest = self.key_sha256.lower()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError("key_sha256 must be a 64-character hex SHA-256 digest of the key")
        if not self.tenants:
            raise ValueError('tenants must list tenant ids, or ["*"] for all')

    @property
    def is_global(self) -> bool:
        return ALL_TENANTS in self.tenants

    def covers(self, tenant: str) -> bool:
        """True when this key may act on `tenant` ("" = all tenants: global keys only)."""
        return self.is_global or (bool(tenant) and tenant in self.tenants)


@dataclass(frozen=True)
class AdminKeysFile:
    admin_keys: tuple[AdminKey, ...] = ()


def load_admin_keys(path: Path) -> tuple[AdminKey, ...]:
    """The keys in an admin keys file (ConfigError naming the file and key when invalid)."""
    return load_yaml_file(path, AdminKeysFile).admin_keys


class AdminAuth:
    """Authenticates admin keys and checks their tenant scope."""

    def __init__(self, keys: Iterable[AdminKey]) -> None:
        self._by_digest = {key.key_sha256.lower(): key for key in keys}

    def __len__(self) -> int:
        return len(self._by_digest)

    def check_disjoint(self, tenant_digests: Iterable[str], source: str) -> None:
        """ConfigError if an admin key is also a tenant's API key."""
        shared = set(self._by_digest) & {d.lower() for d in tenant_digests}
        if shared:
            name = self._by_digest[sorted(shared)[0]].name
            raise ConfigError(source, "admin_keys", f"admin key {name!r} is also a tenant API key; use separate keys")

    def authenticate(self, key: str | None) -> AdminKey:
        if not key:
            raise UnauthenticatedError(f"missing admin key: send it in the {ADMIN_KEY_HEADER!r} metadata header")
        digest = hash_key(key)
        found = self._by_digest.get(digest)
        if found is None or not hmac.compare_digest(found.key_sha256.lower(), digest):
            raise UnauthenticatedError("unknown admin key")
        return found

    @staticmethod
    def require(key: AdminKey, tenant: str) -> None:
        """PermissionDeniedError unless `key` covers `tenant` ("" = all tenants)."""
        if not key.covers(tenant):
            scope = "all tenants" if not tenant else f"tenant {tenant!r}"
            raise PermissionDeniedError(f"admin key {key.name!r} may act only on tenants {list(key.tenants)}, "
                                        f"not on {scope}")


def admin_key_from(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The admin key from the call metadata."""
    for key, value in metadata or ():
        if key == ADMIN_KEY_HEADER:
            return (value.decode() if isinstance(value, bytes) else value).strip()
    return None

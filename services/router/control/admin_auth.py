"""Who may call the PolicyAdmin API: admin keys, kept apart from tenant API keys. Pure.

Keys are stored only as SHA-256 hex digests, in `config/router.yaml` (`lifecycle.admin_keys`) and/or
in a separate YAML file (`lifecycle.admin_keys_file`, e.g. a mounted Kubernetes Secret)::

    admin_keys:
      - {name: ops, key_sha256: 9f86d08188..., tenants: ["*"]}      # every tenant, global pointers
      - {name: acme-trust-safety, key_sha256: ..., tenants: [acme]}  # only acme's pointers and records

A tenant API key is never an admin key (a digest that is both is rejected at start).

Tenant-scoped keys and policy versions: a version id `<tenant>:<rest>` (e.g. `acme:3`) belongs to
that tenant; an id without `:` is *shared*. A scoped key stores only versions of its own tenants
(`acme:3`), never a shared id (which a global activation would switch on for everyone, and which
would block the global admin's own use of that id), and reads only shared versions and its own. A
tenant's version is activated (or canaried) only in that tenant's scope, by any key, never
globally. `VersionInfo.active_in` shows a scoped key only the scopes it covers.

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
#: Separates a tenant's name from the rest of a version id that belongs to it ("acme:3").
OWNER_SEPARATOR = ":"


def version_owner(version: str) -> str:
    """The tenant a policy version id belongs to ("acme" for "acme:3"), "" for a shared id."""
    owner, sep, _ = version.partition(OWNER_SEPARATOR)
    return owner if sep else ""


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

    @property
    def keys(self) -> tuple[AdminKey, ...]:
        return tuple(self._by_digest.values())

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


def require_store(key: AdminKey, version: str) -> None:
    """PermissionDeniedError unless `key` may store policy version `version` (module docstring)."""
    owner = version_owner(version)
    if owner:
        AdminAuth.require(key, owner)
    elif not key.is_global:
        example = f"{key.tenants[0]}{OWNER_SEPARATOR}{version}"
        raise PermissionDeniedError(f"admin key {key.name!r} is scoped to tenants {list(key.tenants)}: it stores only "
                                    f"versions of its tenants, named '<tenant>{OWNER_SEPARATOR}<id>' (e.g. {example!r}), "
                                    f"not the shared version id {version!r}")


def require_read(key: AdminKey, version: str) -> None:
    """PermissionDeniedError unless `key` may read policy version `version` (shared, or its tenants')."""
    owner = version_owner(version)
    if owner and not key.covers(owner):
        raise PermissionDeniedError(f"admin key {key.name!r} may not read tenant {owner!r}'s versions")


def check_scope_of(version: str, scope: str) -> None:
    """PermissionDeniedError when a tenant's version would be activated outside that tenant's scope."""
    owner = version_owner(version)
    if owner and owner != scope:
        where = f"tenant {scope!r}" if scope else "all tenants"
        raise PermissionDeniedError(f"version {version!r} belongs to tenant {owner!r}: it can be activated only with "
                                    f"tenant={owner!r}, not for {where}")


def admin_key_from(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The admin key from the call metadata."""
    for key, value in metadata or ():
        if key == ADMIN_KEY_HEADER:
            return (value.decode() if isinstance(value, bytes) else value).strip()
    return None

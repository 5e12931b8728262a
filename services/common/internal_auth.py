"""Authentication of the mesh's internal ports (the modality services' KServe API). Pure (no gRPC).

Two shared secrets, sent in call metadata and compared in constant time (on SHA-256 digests, so the
comparison's length is fixed too):

* the *service* secret (`x-auditmesh-internal-key`): every KServe RPC (ModelInfer, metadata,
  statistics, reflection) needs it; the router sends it on its upstream channels;
* the *admin* secret (`x-auditmesh-internal-admin-key`): the repository-control RPCs
  (RepositoryModelLoad / RepositoryModelUnload) need it, and the service secret is not enough.
  Without an admin secret configured, repository control is refused to everyone.

grpc.health.v1 stays open (load balancers, `docker compose` health checks and the launcher probe it).
Where TLS is on, the services also require a client certificate from the mesh's CA (mTLS,
`services.common.tls`); the secret is checked as well.

Secrets come from a file (`auth.secret_file`, `auth.admin_secret_file`, e.g. a mounted Kubernetes
Secret) or the environment (`AUDITMESH_INTERNAL_SECRET[_FILE]`, `AUDITMESH_INTERNAL_ADMIN_SECRET[_FILE]`),
read once at start. They are never logged: `SharedSecret` keeps only the digest and its repr hides it.

Example::

    credentials = InternalCredentials.load(config.auth, os.environ, "config/text.yaml")
    credentials.authorize("/inference.GRPCInferenceService/ModelInfer", metadata)   # raises if not allowed
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from services.common.config import ConfigError
from services.common.errors import PermissionDeniedError, UnauthenticatedError

SECRET_HEADER = "x-auditmesh-internal-key"
ADMIN_SECRET_HEADER = "x-auditmesh-internal-admin-key"
ENV_SECRET = "AUDITMESH_INTERNAL_SECRET"
ENV_SECRET_FILE = "AUDITMESH_INTERNAL_SECRET_FILE"
ENV_ADMIN_SECRET = "AUDITMESH_INTERNAL_ADMIN_SECRET"
ENV_ADMIN_SECRET_FILE = "AUDITMESH_INTERNAL_ADMIN_SECRET_FILE"
#: Shortest secret accepted: a guessable secret is no authentication.
MIN_SECRET_CHARS = 16

#: RPCs anyone may call (health probes).
OPEN_PREFIXES = ("/grpc.health.v1.Health/",)
#: RPCs that need the admin secret.
ADMIN_METHODS = frozenset({"/inference.GRPCInferenceService/RepositoryModelLoad",
                           "/inference.GRPCInferenceService/RepositoryModelUnload"})

Metadata = Sequence[tuple[str, "str | bytes"]]


class SharedSecret:
    """A secret known only by its SHA-256 digest; `matches` compares in constant time."""

    __slots__ = ("_digest",)

    def __init__(self, value: str) -> None:
        if len(value) < MIN_SECRET_CHARS:
            raise ValueError(f"a shared secret must have at least {MIN_SECRET_CHARS} characters")
        self._digest = _digest(value)

    def matches(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(_digest(value), self._digest)

    def __repr__(self) -> str:
        return "SharedSecret(<hidden>)"


@dataclass(frozen=True)
class InternalAuthConfig:
    """The `auth:` section of a modality service's config (and the router's `internal:` secret)."""

    secret_file: str = ""
    admin_secret_file: str = ""
    #: false = accept calls without the secret (only for a service nothing untrusted can reach; the
    #: service logs a warning at start). true without a secret = the service refuses to start.
    required: bool = True


@dataclass(frozen=True)
class InternalCredentials:
    """The secrets a service checks (None = not configured)."""

    secret: SharedSecret | None
    admin_secret: SharedSecret | None
    required: bool = True

    @classmethod
    def load(cls, config: InternalAuthConfig, env: Mapping[str, str], source: str) -> InternalCredentials:
        """Read the secrets (env value, then env file, then the config's file); ConfigError when
        `required` and no service secret is configured, or a file cannot be read."""
        secret = read_secret(env.get(ENV_SECRET, ""), env.get(ENV_SECRET_FILE) or config.secret_file, source,
                             "auth.secret_file")
        admin = read_secret(env.get(ENV_ADMIN_SECRET, ""), env.get(ENV_ADMIN_SECRET_FILE) or config.admin_secret_file,
                            source, "auth.admin_secret_file")
        if secret is None and config.required:
            raise ConfigError(source, "auth.secret_file",
                              f"the internal port needs a shared secret: set {ENV_SECRET_FILE} (a file holding it), "
                              f"{ENV_SECRET}, or auth.secret_file (or auth.required: false, for a port nothing "
                              f"untrusted can reach)")
        return cls(secret, admin, config.required)

    def authorize(self, method: str, metadata: Metadata | None) -> None:
        """UnauthenticatedError / PermissionDeniedError unless `metadata` may call `method`."""
        if method.startswith(OPEN_PREFIXES):
            return
        if method in ADMIN_METHODS:
            if self.admin_secret is None:
                raise PermissionDeniedError("repository control (model load/unload) is disabled on this service: "
                                            "no admin secret is configured")
            if not self.admin_secret.matches(header(metadata, ADMIN_SECRET_HEADER)):
                raise UnauthenticatedError(f"repository control needs the admin secret in {ADMIN_SECRET_HEADER!r}")
            return
        if self.secret is None:
            return  # auth.required: false
        if not self.secret.matches(header(metadata, SECRET_HEADER)):
            raise UnauthenticatedError(f"this internal port needs the mesh's shared secret in {SECRET_HEADER!r}")


def read_secret(value: str, path: str, source: str, key: str) -> SharedSecret | None:
    """A secret from `value`, else from the file `path` (stripped), else None (see `secret_value`)."""
    text = secret_value(value, path, source, key)
    return SharedSecret(text) if text is not None else None


def secret_value(value: str, path: str, source: str, key: str) -> str | None:
    """The secret itself (what a client sends): `value`, else the content of the file `path`
    (stripped), else None. ConfigError naming `source` and `key` for an unreadable, empty or short one."""
    if not value and path:
        try:
            value = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(source, key, f"cannot read the secret file {path}: {error.strerror}") from None
        if not value.strip():
            raise ConfigError(source, key, f"the secret file {path} is empty")
    value = value.strip()
    if not value:
        return None
    if len(value) < MIN_SECRET_CHARS:
        raise ConfigError(source, key, f"a shared secret must have at least {MIN_SECRET_CHARS} characters")
    return value


def header(metadata: Metadata | None, name: str) -> str | None:
    """The first value of metadata header `name`, or None."""
    for key, value in metadata or ():
        if key == name:
            return (value.decode() if isinstance(value, bytes) else value).strip()
    return None


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8")).digest()

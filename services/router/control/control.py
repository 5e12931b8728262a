"""Changing the live configuration: put, activate, roll back, canaries, file imports. Each change is
written to the `PolicyStore` first and then reflected by rebuilding and swapping the runtime's
snapshot, so the store is the source of truth and a restart (or another replica) reaches the same
state. Blocking (SQLite, compiling): the admin servicer and the config watcher call it from a worker
thread; one change at a time per process.

Rules checked here (beyond each document's own validation):
* a tenants version can be activated only when every policy it names has a global version, and
  only with the QoS classes the router started with (the upstream channels are built from them);
* a tenant-scoped pointer or canary needs a tenant that exists and is given that policy;
* a global pointer cannot be removed, only moved.

Example::

    control = PolicyControl(SQLitePolicyStore(path), qos_classes=...)
    control.import_files(Path("config/policies"), Path("config/tenants.yaml"))   # at start; raises ConfigError
    stored = control.put("policy", yaml_text, name="default", author="ops", comment="raise hate")
    control.activate("policy", "default", stored.version, "", author="ops")
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from services.common.config import ConfigError
from services.common.errors import (AlreadyExistsError, ConflictError, FailedPreconditionError, InvalidRequestError,
                                    NotFoundError)
from services.common.qos import QosClass
from services.router.control.canary import RollbackBounds
from services.router.control.versions import Kind, ParsedDocument, TENANTS_NAME, parse_document, tenants_directory
from services.router.control.runtime import PolicyRuntime, Snapshot
from services.router.control.store import CanarySpec, PointerChange, PolicyStore, StoredVersion

log = logging.getLogger(__name__)


class InvalidDocumentError(InvalidRequestError):
    """A document that does not validate; the message reads `<document>: <key.path>: <problem>`."""


class PolicyControl:
    """See the module docstring. `runtime` is created by the first `reload` (after `import_files`)."""

    def __init__(self, store: PolicyStore, *, default_bounds: RollbackBounds = RollbackBounds(),
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.default_bounds = default_bounds
        self._clock = clock
        self._lock = threading.RLock()
        self._runtime: PolicyRuntime | None = None
        self._qos_classes: tuple[QosClass, ...] | None = None

    @property
    def runtime(self) -> PolicyRuntime:
        if self._runtime is None:
            raise RuntimeError("PolicyControl.reload() has not run yet")
        return self._runtime

    # -- reading the store into a snapshot ---------------------------------------------------------

    def reload(self, *, force: bool = False) -> Snapshot:
        """Rebuild and swap the snapshot if the store's generation moved (or `force`)."""
        with self._lock:
            generation = self.store.generation()
            if self._runtime is not None and not force and generation == self._runtime.snapshot.generation:
                return self._runtime.snapshot
            runtime = self._runtime or PolicyRuntime(_EMPTY)
            snapshot = self._build(runtime, generation)
            if self._runtime is None:
                self._runtime = runtime
                self._qos_classes = snapshot.tenants.qos_classes
            runtime.swap(snapshot)
            return snapshot

    def _build(self, runtime: PolicyRuntime, generation: int) -> Snapshot:
        pointers = self.store.pointers()
        policies = {p.name: runtime.compile(self._version("policy", p.name, p.version))
                    for p in pointers if p.kind == "policy" and not p.scope}
        overrides = {(p.name, p.scope): runtime.compile(self._version("policy", p.name, p.version))
                     for p in pointers if p.kind == "policy" and p.scope}
        tenants_pointer = next((p for p in pointers if p.kind == "tenants" and not p.scope), None)
        if tenants_pointer is None:
            raise FailedPreconditionError("the policy store has no active tenants version; import config/tenants.yaml")
        tenants = self._version("tenants", TENANTS_NAME, tenants_pointer.version)
        directory = tenants_directory(tenants.content, f"tenants@{tenants.version}", set(policies))
        canaries = {}
        for spec in self.store.canaries():
            canary = runtime.canary(spec, runtime.compile(self._version("policy", spec.policy, spec.candidate)))
            if spec.running and not canary.monitor.rolled_back:
                canaries[canary.key] = canary
        return Snapshot(generation, directory, tenants.version, policies, overrides, canaries)

    def _version(self, kind: str, name: str, version: str) -> StoredVersion:
        stored = self.store.get_version(kind, name, version)
        if stored is None:
            raise NotFoundError(f"{kind} {name!r} has no version {version!r}; ListVersions shows the stored ones")
        return stored

    # -- versions ----------------------------------------------------------------------------------

    def put(self, kind: Kind, text: str, *, name: str = "", author: str, comment: str = "",
            source: str = "") -> StoredVersion:
        """Validate `text` and store it as a new immutable version (a no-op when identical)."""
        document = self.parse(kind, text, name=name, source=source)
        with self._lock:
            return self._put(document, author, comment)

    @staticmethod
    def parse(kind: Kind, text: str, *, name: str = "", source: str = "") -> ParsedDocument:
        """Validate a document; InvalidDocumentError names the document, the key path and the problem."""
        source = source or (f"policy/{name}" if kind == "policy" else TENANTS_NAME)
        try:
            return parse_document(kind, text, source, name=name)
        except ConfigError as error:
            raise InvalidDocumentError(str(error)) from None

    def _put(self, document: ParsedDocument, author: str, comment: str) -> StoredVersion:
        stored = self.store.put_version(StoredVersion(document.kind, document.name, document.version, document.content,
                                                      document.content_hash, author, comment, self._clock()))
        if document.compiled is not None and self._runtime is not None:
            self._runtime.remember(stored, document.compiled)
        return stored

    def get(self, kind: Kind, name: str, version: str = "", scope: str = "") -> StoredVersion:
        """A stored version; `version` "" = the one active in `scope` (falling back to the global one)."""
        if not version:
            active = self.active(kind, name, scope) or self.active(kind, name, "")
            if not active:
                raise NotFoundError(f"{kind} {name!r} has no active version")
            version = active
        return self._version(kind, name, version)

    def active(self, kind: str, name: str, scope: str) -> str:
        """The version (kind, name, scope) points at, "" for none."""
        return next((p.version for p in self.store.pointers() if (p.kind, p.name, p.scope) == (kind, name, scope)), "")

    # -- pointers ----------------------------------------------------------------------------------

    def activate(self, kind: Kind, name: str, version: str, scope: str = "", *, author: str,
                 reason: str = "activate") -> PointerChange:
        """Point (kind, name, scope) at `version` ("" with a tenant scope removes that tenant's pointer)."""
        with self._lock:
            self._check_activation(kind, name, version, scope)
            change = self.store.set_pointer(kind, name, scope, version, expected=self.active(kind, name, scope),
                                            author=author, reason=reason)
            self.reload()
            log.info("%s %s%s now at %r (was %r) by %s: %s", kind, name, f" for tenant {scope}" if scope else "",
                     version, change.previous, author, reason)
            return change

    def rollback(self, kind: Kind, name: str, scope: str = "", to_version: str = "", *, author: str) -> PointerChange:
        """Back to `to_version`, or to the version active before the current one."""
        with self._lock:
            if not to_version:
                history = self.store.history(kind, name, scope)
                if not history or (not history[-1].previous and not scope):
                    raise FailedPreconditionError(f"{kind} {name!r} (scope {scope or 'all tenants'}) has no earlier "
                                                  f"version to roll back to")
                to_version = history[-1].previous
            return self.activate(kind, name, to_version, scope, author=author, reason="rollback")

    def _check_activation(self, kind: Kind, name: str, version: str, scope: str) -> None:
        if kind == "tenants" and scope:
            raise InvalidRequestError("tenant: the tenants document has no tenant scope; leave it empty")
        if scope:
            self._check_tenant(name, scope)
        if not version:
            if not scope:
                raise InvalidRequestError("version: required (only a tenant's own pointer can be removed)")
            return
        stored = self._version(kind, name, version)
        if kind == "policy":
            self.runtime.compile(stored)  # compiled now, off the request path; the swap then only reads the cache
            return
        try:
            self._check_tenants(stored, f"tenants@{stored.version}")
        except ConfigError as error:
            raise FailedPreconditionError(str(error)) from None

    def _check_tenant(self, policy: str, tenant_id: str) -> None:
        tenant = self.runtime.snapshot.tenants.tenants.get(tenant_id)
        if tenant is None:
            raise NotFoundError(f"tenant: no tenant {tenant_id!r} in the active tenants version")
        if policy not in tenant.policies:
            raise FailedPreconditionError(f"tenant: tenant {tenant_id!r} is not given policy {policy!r} "
                                          f"(it has {list(tenant.policies)})")

    def _check_tenants(self, stored: StoredVersion, source: str) -> None:
        """ConfigError (naming `source`) unless every policy named has a global version and the QoS
        classes are the running router's."""
        known = {p.name for p in self.store.pointers() if p.kind == "policy" and not p.scope}
        directory = tenants_directory(stored.content, source, known)
        if self._qos_classes is not None and directory.qos_classes != self._qos_classes:
            raise ConfigError(source, "qos_classes", "differ from the running router's; QoS classes change only "
                                                     "with a restart")

    # -- canaries ----------------------------------------------------------------------------------

    def start_canary(self, policy: str, scope: str, candidate: str, percent: float, *, shadow: bool,
                     bounds: RollbackBounds | None, author: str) -> CanarySpec:
        """Start (or replace) the canary of (policy, scope)."""
        with self._lock:
            if scope:
                self._check_tenant(policy, scope)
            baseline = self.runtime.snapshot.effective(policy, scope)
            if baseline is None:
                raise FailedPreconditionError(f"policy {policy!r} has no active version to compare with")
            if baseline.version == candidate:
                raise InvalidRequestError(f"candidate_version: {candidate!r} is already the active version")
            self.runtime.compile(self._version("policy", policy, candidate))
            try:
                spec = CanarySpec(policy, scope, baseline.version, candidate, percent, shadow, bounds or self.default_bounds,
                                  author, self._clock())
            except ValueError as error:
                raise InvalidRequestError(str(error)) from None
            self.store.put_canary(spec)
            self.reload()
            log.info("canary of %s@%s against %s for %s: %.1f%%%s, by %s", policy, candidate, baseline.version,
                     scope or "all tenants", percent, " (shadow)" if shadow else "", author)
            return spec

    def stop_canary(self, policy: str, scope: str, *, promote: bool = False, author: str, reason: str = "",
                    started_at: float | None = None) -> CanarySpec:
        """Stop the canary of (policy, scope); with `promote`, activate its candidate in that scope.
        With `started_at`, only that canary (not one started since: an automatic rollback comes late). The
        stop is conditional in the store: when another replica stopped (or replaced) the canary meanwhile,
        nothing is written and the stored canary is returned."""
        with self._lock:
            spec = self.canary_spec(policy, scope)
            if not spec.running or (started_at is not None and spec.started_at != started_at):
                return spec
            stopped = replace(spec, running=False,
                              stopped_reason=reason or ("promoted" if promote else "stopped") + f" by {author}")
            if not self.store.stop_canary(stopped):
                self.reload()
                return self.canary_spec(policy, scope)
            if promote:
                self.activate("policy", policy, spec.candidate, scope, author=author, reason="canary promoted")
            self.reload()
            return stopped

    def canary_spec(self, policy: str, scope: str) -> CanarySpec:
        """The canary of (policy, scope), running or stopped (its counters: `runtime.monitor(spec)`)."""
        spec = next((c for c in self.store.canaries() if (c.policy, c.scope) == (policy, scope)), None)
        if spec is None:
            raise NotFoundError(f"no canary for policy {policy!r} (scope {scope or 'all tenants'})")
        return spec

    # -- config files ------------------------------------------------------------------------------

    def import_file(self, kind: Kind, path: Path, *, at_start: bool = False) -> StoredVersion | None:
        """Import a config file as a version and activate it globally, unless its content is what was
        imported from that path last time. Raises ConfigError (naming the file and key) when invalid.

        `at_start` (a router starting, not a file that changed under a running one): a file whose content
        is an already stored version that is no longer active, while the store recorded other content for
        that path, is left alone: it is an older copy (a replica of the previous rollout restarting with
        the previous ConfigMap), and activating it would take the whole fleet back."""
        with self._lock:
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as error:
                raise ConfigError(str(path), "", f"cannot read file: {error.strerror}") from None
            document = parse_document(kind, text, str(path), name=path.stem if kind == "policy" else "")
            recorded = self.store.file_hash(str(path))
            if recorded == document.content_hash:
                return None
            if at_start and recorded and self._superseded(kind, document.name, document.version, document.content_hash):
                log.warning("%s holds %s %s@%s, which is stored and no longer active (this path last imported other "
                            "content, e.g. by a newer replica): not activated at start; activate it through the admin "
                            "API if it is meant", path, kind, document.name, document.version)
                return None
            try:
                stored = self._put(document, f"file:{path}", "imported from the config file")
            except AlreadyExistsError:
                raise ConfigError(str(path), "version", f"{document.version!r} is already stored with different "
                                                        f"content; versions are immutable: change `version`") from None
            if self.active(kind, document.name, "") != stored.version:
                if kind == "tenants":
                    self._check_tenants(stored, str(path))
                try:
                    self.store.set_pointer(kind, document.name, "", stored.version, expected=self.active(kind, document.name, ""),
                                           author=f"file:{path}", reason="config file changed")
                except ConflictError:
                    # Another replica (e.g. a router lane starting at the same moment) moved the pointer
                    # meanwhile; fine if it activated this same version, a real conflict otherwise.
                    if self.active(kind, document.name, "") != stored.version:
                        raise
            self.store.set_file_hash(str(path), document.content_hash)
            if self._runtime is not None:
                self.reload()
            log.info("imported %s as %s %s@%s", path, kind, document.name, stored.version)
            return stored

    def import_files(self, policies_dir: Path, tenants_file: Path) -> Snapshot:
        """Import every policy file, then the tenants file, and build the first snapshot (at start)."""
        files = sorted(policies_dir.glob("*.yaml"))
        if not files:
            raise ConfigError(str(policies_dir), "", "no policy files (*.yaml) found")
        for path in files:
            self.import_file("policy", path, at_start=True)
        self.import_file("tenants", tenants_file, at_start=True)
        return self.reload(force=True)

    def _superseded(self, kind: str, name: str, version: str, content_hash: str) -> bool:
        """True when (kind, name, version) is stored with this content and is not the active version."""
        stored = self.store.get_version(kind, name, version)
        return stored is not None and stored.content_hash == content_hash and self.active(kind, name, "") != version


_EMPTY = Snapshot(-1, tenants_directory("tenants: []\n", "<empty>", set()), "", {})

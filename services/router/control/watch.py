"""Watching the file-based configuration (Kubernetes ConfigMaps: `config/policies/*.yaml` and
`config/tenants.yaml`) and reloading it the same way the admin API does.

Every `interval_s` the watcher stats the files (following symlinks, so a ConfigMap's atomic `..data`
swap is seen). A file whose size, mtime or inode changed is imported (`PolicyControl.import_file`:
validated, stored as a new version, activated globally); policies before the tenants file, so a
tenants change may name a policy added in the same update. A file that does not validate is
rejected with an error log naming the file, the key and the problem, and the active version stays;
it is tried again only when it changes again. Each poll also reloads the store when its generation
moved (another process or replica changed a pointer: see `policy_store`).

Example::

    watcher = ConfigWatcher(control, Path("config/policies"), Path("config/tenants.yaml"))
    task = asyncio.create_task(watcher.run(1.0))
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from services.common.config import ConfigError
from services.common.errors import AuditmeshError
from services.router.control.control import PolicyControl
from services.router.control.versions import Kind

log = logging.getLogger(__name__)

Signature = tuple[int, int, int]


def signature(path: Path) -> Signature | None:
    """(size, mtime_ns, inode) of `path`, None if it does not exist."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns, stat.st_ino


class ConfigWatcher:
    """See the module docstring. `poll` is blocking (run it in a worker thread)."""

    def __init__(self, control: PolicyControl, policies_dir: Path, tenants_file: Path) -> None:
        self.control = control
        self.policies_dir = policies_dir
        self.tenants_file = tenants_file
        self._seen = {path: signature(path) for path, _ in self._files()}  # imported at start
        self.rejected: dict[str, str] = {}

    def _files(self) -> list[tuple[Path, Kind]]:
        policies: list[tuple[Path, Kind]] = [(path, "policy") for path in sorted(self.policies_dir.glob("*.yaml"))]
        return [*policies, (self.tenants_file, "tenants")]

    def poll(self) -> list[str]:
        """Import what changed; returns one line per file imported or rejected."""
        events = []
        for path, kind in self._files():
            current = signature(path)
            if current is None or current == self._seen.get(path):
                continue
            self._seen[path] = current
            events.append(self._import(path, kind))
        self.control.reload()
        return events

    def _import(self, path: Path, kind: Kind) -> str:
        try:
            stored = self.control.import_file(kind, path)
        except (ConfigError, AuditmeshError) as error:
            self.rejected[str(path)] = str(error)
            log.error("config file rejected, the active version is kept: %s", error)
            return f"rejected {path}: {error}"
        self.rejected.pop(str(path), None)
        if stored is None:
            return f"unchanged {path}"
        return f"imported {path} as {kind} {stored.name}@{stored.version}"

    async def run(self, interval_s: float) -> None:
        """Poll until cancelled. A surprise is logged with its traceback and polling goes on."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                await asyncio.to_thread(self.poll)
            except Exception:
                log.exception("config watch: poll failed")

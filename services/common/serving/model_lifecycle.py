"""Hot model reload for a modality service, behind the KServe v2 repository API (RepositoryIndex,
RepositoryModelLoad, RepositoryModelUnload). No gRPC here: `kserve_servicer` adapts it.

`load(name)` builds the model again from the model repository (whatever `config.json`'s
`default_version` of each ONNX file now says, as Triton reloads from its repository), beside the
one serving:

1. load it in a worker thread (ONNX Runtime sessions are created off the event loop);
2. check every file it uses against the SHA-256 the repository records for it;
3. warm it up (one representative batch);
4. switch: new calls go to the new runner (one dict assignment);
5. drain: the old runner finishes every row it had accepted, then stops (its threads end).

A failure in 1-3 leaves the old version serving and is reported (`ModelLoadError`, which the servicer
maps to FAILED_PRECONDITION; the reason also shows in RepositoryIndex). The served model's version
becomes the `version` parameter of the load request, or the previous version + 1; a model whose
version is a digest of its content (`versioned_by_content`, e.g. a tenant classifier) keeps its own.

With `open_names`, `load` also takes a name the service did not start with (a tenant classifier trained
after the service started): the loader builds it or raises NotFoundError, and once loaded it is listed,
reloaded and unloaded like the others.

A memory budget (`budget_bytes`) bounds the models that say what they hold (`memory_bytes()`: the tenant
classifiers; the shipped models neither count nor are evicted). Past it, after a load, the least recently
used of them (`touch` on every inference) are evicted: stopped and listed UNAVAILABLE with the reason. An
evicted model is loaded again on its next request (`reload_evicted`: that request waits for the load, one
load however many wait), so a policy that reads it never sees it missing. Every inference
response names the served model version and the versions of the files behind it
(`models_parameter`), so the router knows which versions answered each item.

Example::

    lifecycle = ModelLifecycle(servicer.runners, load=lambda name: build(config, name), start=start_runner)
    version = await lifecycle.load("text_moderation")      # "2"
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Generic, Iterable, MutableMapping, Protocol, TypeVar

from services.common.errors import FailedPreconditionError, NotFoundError
from services.common.serving.model_api import ServedModel
from services.common.serving.model_repository import sha256_of

log = logging.getLogger(__name__)


class ModelLoadError(FailedPreconditionError):
    """A new model version could not be loaded, verified or warmed up; the old one still serves."""


class Runner(Protocol):
    """What the lifecycle needs of a running model (kserve_servicer.ModelRunner is one)."""

    @property
    def model(self) -> ServedModel: ...

    async def close(self) -> None:
        """Finish every accepted row, then stop."""
        ...


R = TypeVar("R", bound=Runner)


@dataclass(frozen=True)
class ModelState:
    """One RepositoryIndex entry. state: READY, LOADING or UNAVAILABLE (with a reason)."""

    name: str
    version: str
    state: str
    reason: str = ""


def models_parameter(model: ServedModel) -> str:
    """JSON list of [name, version]: the served model and the files behind it (for responses)."""
    pairs = [[model.name, model.version], *[[f.name, f.version] for f in model.model_files()]]
    return json.dumps(pairs, ensure_ascii=False)


def footprint(model: ServedModel) -> int | None:
    """The bytes `model` says it holds (`memory_bytes()`), or None for a model that does not count against
    a memory budget."""
    measure = getattr(model, "memory_bytes", None)
    return int(measure()) if callable(measure) else None


def verify_files(model: ServedModel) -> None:
    """ModelLoadError if a file the model uses differs from the SHA-256 its repository records."""
    for file in model.model_files():
        path = Path(file.path)
        if file.sha256 and path.is_file():
            actual = sha256_of(path)
            if actual != file.sha256:
                raise ModelLoadError(f"{path}: SHA-256 {actual[:16]}… does not match the repository's "
                                     f"{file.sha256[:16]}… for {file.name} version {file.version}")


def next_version(version: str) -> str:
    """"2" after "1"; "<version>.1" after a non-numeric one."""
    return str(int(version) + 1) if version.isdigit() else f"{version}.1"


class ModelLifecycle(Generic[R]):
    """Loads, switches and unloads the models of one service (see the module docstring)."""

    def __init__(self, runners: MutableMapping[str, R], *, load: Callable[[str], ServedModel],
                 start: Callable[[ServedModel], R], names: Iterable[str] | None = None,
                 open_names: bool = False, budget_bytes: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.runners = runners
        self._load = load
        self._start = start
        self._names = sorted(names if names is not None else runners)
        self._open_names = open_names
        self._reasons: dict[str, str] = {}
        self._loading: set[str] = set()
        self._versions = {name: runner.model.version for name, runner in runners.items()}
        self._lock = asyncio.Lock()
        self.budget_bytes = budget_bytes
        self._clock = clock
        started = clock()
        self._used = {name: started for name in runners}
        self._evicted: set[str] = set()
        #: Models evicted for the budget since the start (a metric's source).
        self.evictions = 0

    def touch(self, name: str) -> None:
        """`name` was just used (an inference): the last to be evicted."""
        self._used[name] = self._clock()

    def evicted(self, name: str) -> bool:
        """Whether the budget evicted `name` and it is not loaded again yet."""
        return name in self._evicted and name not in self.runners

    def held_bytes(self) -> int:
        """What the loaded models that count against the budget hold."""
        return sum(size for size in (footprint(r.model) for r in self.runners.values()) if size is not None)

    def index(self) -> list[ModelState]:
        """Every model this service can serve, with its state."""
        states = []
        for name in self._names:
            runner = self.runners.get(name)
            version = runner.model.version if runner is not None else self._versions.get(name, "")
            state = "LOADING" if name in self._loading else "READY" if runner is not None else "UNAVAILABLE"
            states.append(ModelState(name, version, state, self._reasons.get(name, "")))
        return states

    async def load(self, name: str, version: str = "") -> str:
        """Load `name` again from the repository and switch to it; returns the new served version."""
        if not self._open_names:
            self._require(name)
        async with self._lock:
            return await self._load_locked(name, version)

    async def reload_evicted(self, name: str) -> None:
        """Load `name` again when the budget evicted it (a request for it came); nothing when it is loaded
        (another request's reload got there first)."""
        async with self._lock:
            if self.evicted(name):
                await self._load_locked(name, "")

    def trim_unstarted(self) -> list[str]:
        """At start, before any runner started: set aside (as evicted) the counted models past the budget, in
        name order; the names. A request for one loads it then."""
        evicted: list[str] = []
        while self.budget_bytes is not None and self.held_bytes() > self.budget_bytes:
            counted = sorted(n for n, r in self.runners.items() if footprint(r.model) is not None)
            if len(counted) <= 1:
                break
            victim = counted[-1]
            self.runners.pop(victim)
            self._mark_evicted(victim)
            evicted.append(victim)
        if evicted:
            log.info("memory budget of %d bytes: %d models set aside at start, loaded on their first request: %s",
                     self.budget_bytes, len(evicted), ", ".join(evicted))
        return evicted

    def _mark_evicted(self, name: str) -> None:
        self._evicted.add(name)
        self._reasons[name] = (f"evicted: over the memory budget of {self.budget_bytes} bytes (least recently "
                               f"used); loaded again on its next request")
        self.evictions += 1

    async def _load_locked(self, name: str, version: str) -> str:
        old = self.runners.get(name)
        self._loading.add(name)
        try:
            model = await self._prepare(name, old)
        finally:
            self._loading.discard(name)
        if not getattr(model, "versioned_by_content", False) or version:
            model.version = version or next_version(self._versions.get(name, "0"))
        self.runners[name] = self._start(model)
        self._versions[name] = model.version
        if name not in self._names:
            self._names = sorted([*self._names, name])
        self._reasons.pop(name, None)
        self._evicted.discard(name)
        self._used[name] = self._clock()
        if old is not None:
            await old.close()
        log.info("model %s: version %s serving (was %s); old version drained and unloaded", name, model.version,
                 old.model.version if old is not None else "none")
        await self._evict_over_budget(keep=name)
        return model.version

    async def _evict_over_budget(self, keep: str) -> list[str]:
        """While the counted models hold more than the budget, stop the least recently used one (never `keep`,
        the model just loaded: a budget smaller than one model still serves that one)."""
        evicted: list[str] = []
        if self.budget_bytes is None:
            return evicted
        while self.held_bytes() > self.budget_bytes:
            counted = [n for n, r in self.runners.items() if n != keep and footprint(r.model) is not None]
            if not counted:
                log.warning("model %s alone holds %d bytes, over the memory budget of %d bytes; serving it",
                            keep, self.held_bytes(), self.budget_bytes)
                break
            victim = min(counted, key=lambda n: (self._used.get(n, 0.0), n))
            runner = self.runners.pop(victim)
            self._mark_evicted(victim)
            evicted.append(victim)
            await runner.close()
            log.info("model %s: version %s evicted (memory budget %d bytes, least recently used)", victim,
                     runner.model.version, self.budget_bytes)
        return evicted

    async def _prepare(self, name: str, old: R | None) -> ServedModel:
        try:
            model = await asyncio.to_thread(self._load, name)
            await asyncio.to_thread(verify_files, model)
            await asyncio.to_thread(model.warmup)
            return model
        except NotFoundError:
            if name not in self._names:  # a name this service cannot build: NOT_FOUND, nothing recorded
                raise
            reason = "load failed: no longer in the repository"
            self._reasons[name] = reason
            raise ModelLoadError(f"model {name!r}: {reason}") from None
        except Exception as error:
            keeping = f"version {old.model.version} still serving" if old is not None else "not serving"
            reason = f"load failed: {error}"
            self._reasons[name] = reason
            log.error("model %s: %s (%s)", name, reason, keeping)
            raise ModelLoadError(f"model {name!r}: {reason} ({keeping})") from None

    async def unload(self, name: str) -> None:
        """Stop serving `name` (after draining what it accepted); it is not loaded again by a request."""
        self._require(name)
        async with self._lock:
            self._evicted.discard(name)
            runner = self.runners.pop(name, None)
            if runner is not None:
                self._reasons[name] = "unloaded"
                await runner.close()
                log.info("model %s: version %s unloaded", name, runner.model.version)

    async def close(self) -> None:
        """Drain and stop every runner (service shutdown)."""
        for runner in list(self.runners.values()):
            await runner.close()

    def _require(self, name: str) -> None:
        if name not in self._names:
            raise NotFoundError(f"unknown model {name!r}; this service has: {', '.join(self._names)}")

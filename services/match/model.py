"""The KServe v2 model `match` (contract: services/common/contracts/match.py): hashes each item and
searches the banks its tenant may see (services/match/matcher.py).

The banks are loaded from the bank store (services/match/banks.py) when the model is built, so the
service reports ready only once its indexes are loaded. A background thread looks at the store's
generation every `reload_interval_s` (with up to 20 % jitter, so replicas do not reload at once) and,
when it changed, loads the new set off the request path and swaps it in in one assignment: a request is
matched against one generation, never a mix. A bank that only gained hashes since is not rebuilt: the
store answers only the added hashes, which join a small second index layer (services/match/banks.py,
`LoadedBanks.load`); a bank with hashes removed, a new bank, or a delta layer past MAX_DELTA is built whole. A reload that fails keeps the old
set and is logged; `stale_s` says how long ago the set was last confirmed current, and past
`max_stale_s` `serving_problem` names why the model is not ready (ModelReady and grpc.health say so).

Every match of a bank's entry is counted by the flood guard (services/match/flood.py): a flood is logged
and exported, and with `flood.quarantine` its matches come back suppressed. `collector` exports the
banks (hashes per bank and signal, generation, age, staleness), matches per bank and signal, floods, and
the time spent hashing and searching per item.

Example::

    model = MatchModel(BankStore(Path("var/banks.sqlite")), MatchSettings())
    out = model.infer({"ITEM": np.array([[encode_item("acme", "text", b"free airdrop")]], dtype=object)})
"""

from __future__ import annotations

import hashlib
import logging
import random
import threading
import time
from dataclasses import replace
from typing import Callable, Mapping, Sequence, cast

import numpy as np
from prometheus_client.registry import Collector

from services.common.contracts import match as contract
from services.common.contracts.tensors import TensorSpec
from services.common.errors import ImageRejectedError, InvalidInputError
from services.common.image_decode import ImageLimits, decode_rgb
from services.common.serving.model_api import ModelFile
from services.match.banks import BankRepository, LoadedBanks
from services.match.flood import FloodGuard
from services.match.matcher import match_file, match_image, match_text
from services.match.metrics import MatchCollector
from services.match.settings import MatchSettings
from services.match.signals import MAX_TEXT_CHARS, image_signals, text_signals

__all__ = ["MatchModel", "MatchSettings"]

log = logging.getLogger("services.match")
#: A reload in progress keeps the model ready this many times `max_stale_s` (then it is not ready: stuck).
LOAD_GRACE = 10


class MatchModel:
    """Implements `services.common.serving.model_api.ServedModel` (see the module docstring)."""

    name = contract.MODEL_NAME
    version = "1"
    platform = "auditmesh_match"
    max_batch_size = 64
    inputs: Sequence[TensorSpec] = (contract.INPUT,)
    outputs: Sequence[TensorSpec] = contract.OUTPUTS

    def __init__(self, store: BankRepository, settings: MatchSettings = MatchSettings(), *,
                 limits: ImageLimits = ImageLimits(), watch: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.settings = settings
        self.limits = limits
        self._clock = clock
        self.banks = LoadedBanks.load(store)
        #: When the loaded set was last confirmed current (read from the store, or the store's generation seen).
        self._current_at = clock()
        #: When the reload in progress began (None: none): a load of a large set is not staleness.
        self._loading_since: float | None = None
        self.flood = FloodGuard(settings.flood)
        #: Guards the flood guard and the counters below against batches run on several threads.
        self._counting = threading.Lock()
        #: Matches per (bank, signal type), floods per bank, and (seconds, items) hashing and searching per kind:
        #: written by the batch thread, read at scrape time.
        self.matches: dict[tuple[str, str], int] = {}
        self.floods: dict[str, int] = {}
        self.work: dict[str, list[float]] = {kind: [0.0, 0] for kind in contract.KINDS}
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="match-banks", daemon=True) if watch else None
        if self._watcher is not None:
            self._watcher.start()
        log.info("banks loaded: %d banks, generation %d", len(self.banks.banks), self.banks.generation)

    @property
    def stale_s(self) -> float:
        """Seconds since the loaded banks were last confirmed current (up to a reload interval when healthy)."""
        return max(0.0, self._clock() - self._current_at)

    def serving_problem(self) -> str | None:
        """Why this model should not take traffic now (its banks not confirmed current for `max_stale_s`), or None."""
        stale = self.stale_s
        loading = self._loading_since
        if stale <= self.settings.max_stale_s:
            return None
        if loading is not None and self._clock() - loading <= LOAD_GRACE * self.settings.max_stale_s:
            return None  # a large bank set takes a while to load: the store was readable, the load goes on
        return (f"banks not confirmed current for over max_stale_s ({self.settings.max_stale_s:g} s): the store "
                f"{self.settings.store_location} could not be read or reloaded; serving generation {self.banks.generation}")

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Match one batch; InvalidInputError for a malformed ITEM tensor or envelope."""
        items = _decode(inputs, self.max_batch_size)
        banks = self.banks  # one generation for the whole batch
        matches = np.empty((len(items), 1), dtype=object)
        errors = np.empty((len(items), 1), dtype=object)
        for row, (tenant, kind, content) in enumerate(items):
            started = time.perf_counter()
            visible = banks.visible_to(tenant)
            found: list[contract.Match] = []
            error = ""
            if kind == "text":
                found = match_text(visible, text_signals(content.decode("utf-8", "replace")[:MAX_TEXT_CHARS]))
            elif kind == "file":
                found = match_file(visible, hashlib.md5(content).hexdigest(), hashlib.sha256(content).hexdigest())
            else:
                try:
                    rgb = decode_rgb(content, self.limits)
                    found = match_image(visible, image_signals(content, rgb, dihedral=self.settings.dihedral))
                except ImageRejectedError as rejected:
                    error = str(rejected)
            with self._counting:
                spent = self.work[kind]
                spent[0] += time.perf_counter() - started
                spent[1] += 1
            matches[row, 0] = contract.encode_matches(self._guarded(found))
            errors[row, 0] = error.encode("utf-8")
        with self._counting:
            floods = self.flood.take_new()
            for flood in floods:
                bank = cast(tuple[str, str, str], flood.key)[0]
                self.floods[bank] = self.floods.get(bank, 0) + 1
        for flood in floods:
            bank, signal, content_id = cast(tuple[str, str, str], flood.key)
            log.warning("flood: bank %s entry %s (%s) matched %d items this window, baseline %.1f%s", bank, content_id,
                        signal, flood.count, flood.baseline,
                        "; its matches are quarantined (suppressed)" if self.settings.flood.quarantine else "")
        return {contract.MATCHES: matches, contract.ERROR: errors}

    def _guarded(self, found: list[contract.Match]) -> list[contract.Match]:
        """Count each acting match (per bank and signal, and in the flood guard); with quarantine, a flooding
        entry's match comes back suppressed."""
        now = self._clock()
        out = []
        with self._counting:  # batches may run on more than one thread (batching.max_concurrency)
            for match in found:
                if not match.negative and not match.suppressed:
                    key = (match.bank, match.signal_type)
                    self.matches[key] = self.matches.get(key, 0) + 1
                    flooding = self.flood.observe((match.bank, match.signal_type, match.content_id), now)
                    if flooding and self.settings.flood.quarantine:
                        match = replace(match, suppressed=True)
                out.append(match)
        return out

    def flood_snapshot(self) -> list[str]:
        """The bank of each entry flooding in the current window (one name per entry)."""
        return [cast(tuple[str, str, str], key)[0] for key in self.flood.active(self._clock())]

    def collector(self) -> Collector:
        """Prometheus metrics of the banks and the matching (read at scrape time; services/match/metrics.py)."""
        return MatchCollector(self)

    def warmup(self) -> None:
        """Hash and match a text and a small image once."""
        import io

        from PIL import Image

        buffer = io.BytesIO()
        Image.new("RGB", (64, 64), (120, 30, 200)).save(buffer, "PNG")
        self.infer({contract.INPUT.name: np.array([[contract.encode_item("warmup", "text", b"hello there")],
                                                   [contract.encode_item("warmup", "image", buffer.getvalue())]],
                                                  dtype=object)})

    #: The banks change while the model serves: responses name the generation they were matched at.
    files_change = True

    def model_files(self) -> Sequence[ModelFile]:
        """No ONNX file: the banks are its data, named `banks` at the store generation loaded (so a router's
        verdict cache keys on it), besides each match's own bank version."""
        return [ModelFile("banks", f"g{self.banks.generation}", self.settings.store_location, source="bank store")]

    def close(self) -> None:
        self._stop.set()

    def reload_if_changed(self) -> bool:
        """Load the banks again when the store's generation moved; True when a new set was swapped in. Either
        way the set is then confirmed current; an error (the store unreadable) leaves it unconfirmed."""
        looked_at = self._clock()
        generation = self.store.generation()
        if generation == self.banks.generation:
            self._current_at = looked_at
            return False
        self._loading_since = looked_at
        try:
            loaded = LoadedBanks.load(self.store, previous=self.banks)  # banks that only gained hashes: only those read
        finally:
            self._loading_since = None
        self.banks = loaded  # one assignment: requests see the old set or the new one
        self._current_at = self._clock()  # read and loaded: current now, however long the load took
        log.info("banks reloaded: %d banks, generation %d, %d hashes read", len(loaded.banks), loaded.generation, loaded.read)
        return True

    def _watch(self) -> None:
        interval = self.settings.reload_interval_s
        while not self._stop.wait(interval * random.uniform(0.8, 1.2)):
            try:
                self.reload_if_changed()
            except Exception:  # keep serving the loaded set; say why it is not the newest
                log.exception("banks: reload failed; still serving generation %d", self.banks.generation)


def _decode(inputs: Mapping[str, np.ndarray], max_batch_size: int) -> list[tuple[str, contract.Kind, bytes]]:
    name = contract.INPUT.name
    if name not in inputs:
        raise InvalidInputError(f"missing input tensor {name!r} (got {sorted(inputs)}); expected BYTES [N, 1]")
    array = np.asarray(inputs[name])
    if array.ndim != 2 or array.shape[1] != 1:
        raise InvalidInputError(f"{name} must have shape [N, 1], got {list(array.shape)}")
    if array.shape[0] > max_batch_size:
        raise InvalidInputError(f"{name} batch of {array.shape[0]} exceeds max_batch_size {max_batch_size}")
    items = []
    for index, value in enumerate(array[:, 0]):
        if not isinstance(value, (bytes, bytearray, np.bytes_)):
            raise InvalidInputError(f"{name}[{index}] must be bytes, got {type(value).__name__}")
        try:
            items.append(contract.decode_item(bytes(value)))
        except ValueError as error:
            raise InvalidInputError(f"{name}[{index}]: {error}") from None
    return items

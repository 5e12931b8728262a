"""The verdict cache in front of the pipeline: one item's verdict is reused for the same content under
the same policy, canary arm, shadow candidate and model versions (`services.router.verdict_cache`).

`CachedPipeline.run` builds the item's key, answers a hit at once (timings: a single `cache` stage;
`Outcome.cached` is True so the response and the audit record say so), and on a miss runs the
pipeline and stores the verdict when it may be reused:

- never a degraded verdict (a failed or skipped stage), nor an error (nothing is stored on an exception);
- only when the model versions of every stage the item may use are known (the router learns them from
  the services' responses and ModelConfig; `text_semantic` counts whenever text does, since which texts
  the balanced profile sends there depends on their scores), and every model the services named for
  this very item is one of them: a model swapped behind an upstream changes the key of the next item,
  and the verdict that revealed the swap is not stored under the old key (a tenant classifier's version is
  pinned by the policy version, already in the key);
- the shadow candidate's verdict is cached with the baseline's, so canary counters still see both.

Text parts are keyed by their normalised form (or as sent, `text_key: exact`). Two texts with one
normalised form differ in their raw offsets, so a cached verdict keeps its text-span evidence in
normalised coordinates and maps it back onto the text of the item being answered; a span that does not
map back exactly (it starts or ends on a character normalisation dropped) makes the verdict uncacheable.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from services.common.text_match.normalize import NormalizedText, normalize
from services.router.control.runtime import Selection, Snapshot
from services.router.fusion import Evidence, TextSpanEvidence, Verdict
from services.common.contracts.classifier import model_name
from services.router.pipeline import Outcome, Pipeline
from services.router.scheduler import Requester
from services.router.validation import ImagePart, ValidItem
from services.router.verdict_cache import VerdictCache, VerdictCacheConfig

#: Estimated bytes per category verdict, per evidence entry, per model name (see `_estimate`).
_CATEGORY_BYTES, _EVIDENCE_BYTES, _MODEL_BYTES, _VERDICT_BYTES = 300, 400, 150, 400
#: Marks a span covering a whole text part (fusion's score evidence): maps to the whole answered text.
_WHOLE = -1


@dataclass(frozen=True)
class CachedVerdict:
    """What is stored: text-span evidence of text parts in normalised offsets (`_to_normalized`)."""

    verdict: Verdict
    shadow: Verdict | None
    models: tuple[tuple[str, str], ...]


class CachedPipeline:
    """`Pipeline.run` behind a `VerdictCache` (see the module docstring). `cache=None`: no caching."""

    def __init__(self, pipeline: Pipeline, cache: VerdictCache[CachedVerdict] | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pipeline = pipeline
        self.cache = cache
        self._clock = clock

    @classmethod
    def from_config(cls, pipeline: Pipeline, config: VerdictCacheConfig) -> CachedPipeline:
        """The pipeline with a cache when `config.enabled`, else without."""
        return cls(pipeline, VerdictCache(config, clock=time.monotonic) if config.enabled else None)

    async def run(self, selection: Selection, item: ValidItem, deadline: float, requester: Requester,
                  skippable: Sequence[str] = ()) -> Outcome:
        """The item's outcome under `selection`: from the cache when it may be, else from the pipeline."""
        cache = self.cache
        if cache is None:
            return await self.pipeline.run(item, selection.policy, deadline, requester, skippable, shadow=selection.shadow)
        started = self._clock()
        models = self._models(item, selection)
        if models is None:  # a stage's model versions are not known yet: the key would not pin them
            return await self.pipeline.run(item, selection.policy, deadline, requester, skippable, shadow=selection.shadow)
        tenant = selection.tenant.id
        texts = {part.index: self._normalized(part.text) for part in item.texts}
        key = cache.key(tenant, _scope(selection, models), _parts(item, texts))
        hit = cache.get(tenant, key)
        if hit is not None:
            verdict = _from_normalized(hit.verdict, texts)
            shadow = _from_normalized(hit.shadow, texts) if hit.shadow is not None else None
            if verdict is not None and (hit.shadow is None or shadow is not None):
                return Outcome(verdict, {"cache": (self._clock() - started) * 1000}, list(hit.models), shadow,
                               cached=True)
        outcome = await self.pipeline.run(item, selection.policy, deadline, requester, skippable, shadow=selection.shadow)
        self._store(cache, tenant, key, outcome, models, texts)
        return outcome

    def retain_tenants(self, tenants: Sequence[str]) -> None:
        """Drop the cached verdicts of every tenant not in `tenants` (call on the event loop)."""
        if self.cache is not None:
            self.cache.retain(tenants)

    def _normalized(self, text: str) -> NormalizedText:
        if self.cache is not None and self.cache.config.text_key == "normalized":
            return normalize(text)
        return NormalizedText(text, tuple(range(len(text))), text)

    def _models(self, item: ValidItem, selection: Selection) -> list[tuple[str, str]] | None:
        """The model versions the item's stages use, in the order the pipeline lists them, or None when
        one of them is not known yet."""
        known = self.pipeline.models
        used: list[tuple[str, str]] = []
        for stage in ("text", "text_semantic", "vision", "ocr", "match"):
            if self.pipeline.uses(stage, item, selection.policy):
                if not known.get(stage):
                    return None
                used.extend(known[stage])
        use = selection.policy.document.tenant_classifier
        if use is not None:  # what the classifier names in its answers (model and file: the pinned version)
            used.append((model_name(selection.tenant.id, use.version), use.version))
        return list(dict.fromkeys(used))

    @staticmethod
    def _store(cache: VerdictCache[CachedVerdict], tenant: str, key: bytes, outcome: Outcome,
               models: list[tuple[str, str]], texts: dict[int, NormalizedText]) -> None:
        verdict, shadow = outcome.verdict, outcome.shadow
        if outcome.short_circuited:  # decided on partial signals: answered, never reused
            return
        if verdict.degradations or (shadow is not None and shadow.degradations) or not set(outcome.models) <= set(models):
            return
        stored = _to_normalized(verdict, texts)
        stored_shadow = _to_normalized(shadow, texts) if shadow is not None else None
        if stored is None or (shadow is not None and stored_shadow is None):
            return
        entry = CachedVerdict(stored, stored_shadow, tuple(outcome.models))
        cache.put(tenant, key, entry, _estimate(entry))


def retain_on_tenant_change(pipeline: CachedPipeline, loop: asyncio.AbstractEventLoop) -> Callable[[Snapshot, Snapshot], None]:
    """A `PolicyRuntime.on_swap` listener: when a swap changes the set of tenant ids (a tenants file or
    version without some tenant), the cache drops the removed tenants' verdicts. The drop runs on
    `loop`, the cache's thread: reloads swap from worker threads (the config watcher, the admin API).

    Example::

        runtime.on_swap(retain_on_tenant_change(servicer.verdicts, asyncio.get_running_loop()))
    """
    def listener(old: Snapshot, new: Snapshot) -> None:
        kept = tuple(new.tenants.tenants)
        if pipeline.cache is None or set(kept) == set(old.tenants.tenants):
            return
        try:
            loop.call_soon_threadsafe(pipeline.retain_tenants, kept)
        except RuntimeError:  # the loop is closed: the process is stopping, the cache goes with it
            pass
    return listener


def _scope(selection: Selection, models: Sequence[tuple[str, str]]) -> list[str]:
    policy = selection.policy
    shadow = selection.shadow
    return [policy.name, policy.version, selection.canary_arm, shadow.version if shadow is not None else "",
            *(f"{name}={version}" for name, version in models)]


def _parts(item: ValidItem, texts: dict[int, NormalizedText]) -> list[tuple[str, bytes]]:
    # each part under its index: an animation's frames come in an order of their own (services/router/frames.py);
    # and an animation's file as sent (two files whose sampled frames agree may still differ in their exact hashes)
    return [*((f"image@{part.index}", part.data) if isinstance(part, ImagePart)
              else (f"text@{part.index}", texts[part.index].text.encode("utf-8")) for part in item.parts),
            *((f"animation@{part.index}", part.data) for part in item.animations)]


def _is_text_part_span(evidence: Evidence, texts: dict[int, NormalizedText]) -> bool:
    return isinstance(evidence, TextSpanEvidence) and evidence.ocr_line < 0 and evidence.part_index in texts


def _to_normalized(verdict: Verdict, texts: dict[int, NormalizedText]) -> Verdict | None:
    """`verdict` with each text part's span in normalised offsets and its text dropped, or None when a
    span does not map back onto the same raw span (it would be wrong on another spelling)."""
    evidence: list[Evidence] = []
    for entry in verdict.evidence:
        if isinstance(entry, TextSpanEvidence) and _is_text_part_span(entry, texts):
            text = texts[entry.part_index]
            if entry.text and entry.text != text.original[entry.start:entry.end]:
                return None
            if (entry.start, entry.end) == (0, len(text.original)):
                start, end = _WHOLE, _WHOLE
            else:
                start, end = bisect_left(text.offsets, entry.start), bisect_left(text.offsets, entry.end)
                if start >= end or text.original_span(start, end) != (entry.start, entry.end):
                    return None
            entry = replace(entry, start=start, end=end, text="\x00" if entry.text else "")
        evidence.append(entry)
    return replace(verdict, evidence=evidence)


def _from_normalized(verdict: Verdict, texts: dict[int, NormalizedText]) -> Verdict | None:
    """The inverse of `_to_normalized` on the answered item's texts (None if a span no longer fits)."""
    evidence: list[Evidence] = []
    for entry in verdict.evidence:
        if isinstance(entry, TextSpanEvidence) and _is_text_part_span(entry, texts):
            text = texts[entry.part_index]
            if entry.start == _WHOLE:
                start, end = 0, len(text.original)
            elif entry.end <= len(text.text):
                start, end = text.original_span(entry.start, entry.end)
            else:
                return None
            entry = replace(entry, start=start, end=end, text=text.original[start:end] if entry.text else "")
        evidence.append(entry)
    return replace(verdict, evidence=evidence, categories=list(verdict.categories), degradations=[])


def _estimate(entry: CachedVerdict) -> int:
    """A deterministic estimate of an entry's memory (CPython objects), in bytes."""
    size = _MODEL_BYTES * len(entry.models)
    for verdict in (entry.verdict, entry.shadow):
        if verdict is not None:
            size += _VERDICT_BYTES + _CATEGORY_BYTES * len(verdict.categories)
            size += sum(_EVIDENCE_BYTES + 4 * len(getattr(e, "text", "")) for e in verdict.evidence)
    return size

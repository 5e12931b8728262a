"""The verdict cache in front of a (fake) pipeline: hits and misses, what is never cached (degraded
verdicts, errors, unknown or changed model versions), canary arms and shadow verdicts, and evidence
offsets mapped onto each spelling of one normalised text."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Sequence

import pytest

from services.router.cached_pipeline import CachedPipeline, CachedVerdict, retain_on_tenant_change
from services.router.control.watch import ConfigWatcher
from services.router.control.runtime import Selection
from services.router.fusion import Degradation, Evidence, TextSpanEvidence, Verdict
from services.router.pipeline import Outcome, Pipeline
from services.router.policy import CompiledPolicy, PolicyDocument, compile_policy
from services.router.scheduler import Requester
from services.router.tenants import Tenant
from services.common.image_decode import ImageHeader
from services.router.validation import ImagePart, TextPart, ValidItem
from services.router.verdict_cache import VerdictCache, VerdictCacheConfig
from tests.stubs import open_control, policy_yaml, settle, tenants_yaml

MODELS = [("text_moderation", "1"), ("toxicity_en", "3")]
REQUESTER = Requester("acme", 0)


class FakePipeline(Pipeline):
    """Answers from a script: a verdict that blocks the first "idiot" with its raw offsets."""

    def __init__(self) -> None:
        super().__init__(None, None, None)  # type: ignore[arg-type]  # the dispatchers are never used
        self.models = {"text": list(MODELS)}
        self.calls = 0
        self.degraded = False
        self.fail = False
        self.answer_models = list(MODELS)

    async def run(self, item: ValidItem, policy: CompiledPolicy, deadline: float, requester: Requester,
                  skippable: Sequence[str] = (), shadow: CompiledPolicy | None = None) -> Outcome:
        self.calls += 1
        if self.fail:
            raise RuntimeError("upstream broke")
        text = item.texts[0].text
        start = text.lower().find("idiot")
        evidence: list[Evidence] = [TextSpanEvidence("harassment", 0, start, start + 5, text[start:start + 5], matched_term="idiot",
                                     score=1.0)] if start >= 0 else []
        evidence.append(TextSpanEvidence("spam", 0, 0, len(text), text, score=0.7))
        verdict = Verdict("block" if start >= 0 else "allow", [], evidence,
                          [Degradation("text", "unavailable", "fail_open")] if self.degraded else [])
        return Outcome(verdict, {"text": 1.0}, list(self.answer_models),
                       Verdict("review") if shadow is not None else None)


def policy(version: str = "v1") -> CompiledPolicy:
    return compile_policy(PolicyDocument("default", version))


def selection(tenant: str = "acme", version: str = "v1", arm: str | None = None,
              shadow: CompiledPolicy | None = None) -> Selection:
    return Selection(Tenant(tenant, "0" * 64, ("default",)), policy(version), shadow, None, arm)  # type: ignore[arg-type]


def item(text: str) -> ValidItem:
    return ValidItem("it", (TextPart(0, text),))


def make(text_key: str = "normalized") -> tuple[CachedPipeline, FakePipeline]:
    fake = FakePipeline()
    config = VerdictCacheConfig(enabled=True, text_key=text_key)  # type: ignore[arg-type]
    return CachedPipeline(fake, VerdictCache[CachedVerdict](config, clock=lambda: 0.0)), fake


def run(cached: CachedPipeline, chosen: Selection, text: str) -> Outcome:
    return asyncio.run(cached.run(chosen, item(text), deadline=1e12, requester=REQUESTER))


def test_the_second_identical_item_is_answered_from_the_cache() -> None:
    cached, fake = make()
    first = run(cached, selection(), "you idiot")
    second = run(cached, selection(), "you idiot")
    assert fake.calls == 1 and not first.cached and second.cached
    assert second.verdict.decision == "block" and second.models == MODELS
    assert set(second.timings_ms) == {"cache"}


def test_a_respelling_with_the_same_normalised_form_gets_its_own_offsets() -> None:
    cached, fake = make()
    run(cached, selection(), "you idiot")
    other = "  YOU   IDIOT "
    outcome = run(cached, selection(), other)
    assert fake.calls == 1 and outcome.cached
    spans = {e.category: e for e in outcome.verdict.evidence if isinstance(e, TextSpanEvidence)}
    assert (spans["harassment"].start, spans["harassment"].end, spans["harassment"].text) == (8, 13, "IDIOT")
    assert (spans["spam"].start, spans["spam"].end, spans["spam"].text) == (0, len(other), other)


def test_parts_at_other_indexes_are_another_item() -> None:
    # an animation's frames come with indexes of their own (services/router/frames.py): the same bytes at
    # other indexes must not share a cached verdict whose evidence names the indexes
    cached, fake = make()
    fake.models.update({"vision": [("opennsfw", "1")], "ocr": [("ppocr", "1")]})
    header = ImageHeader("PNG", 4, 4)
    first = ValidItem("it", (TextPart(0, "you idiot"), ImagePart(1, b"a", header), ImagePart(2, b"b", header)))
    second = ValidItem("it", (TextPart(0, "you idiot"), ImagePart(2, b"a", header), ImagePart(1, b"b", header)))
    for one in (first, second, first):
        asyncio.run(cached.run(selection(), one, deadline=1e12, requester=REQUESTER))
    assert fake.calls == 2


def test_animations_whose_sampled_frames_agree_are_another_item_when_their_files_differ() -> None:
    # the match service matches an animation's file by exact hash: a banked file must not be answered with the
    # verdict of another file whose sampled frames are the same
    cached, fake = make()
    fake.models.update({"vision": [("opennsfw", "1")], "ocr": [("ppocr", "1")]})
    header, moving = ImageHeader("PNG", 4, 4), ImageHeader("GIF", 4, 4, frames=9, animated=True)
    frames = (TextPart(0, "you idiot"), ImagePart(1, b"frame-0", header, (1, 0)), ImagePart(2, b"frame-5", header, (1, 5)))
    first = ValidItem("it", frames, animations=(ImagePart(1, b"GIF89a one", moving),))
    second = ValidItem("it", frames, animations=(ImagePart(1, b"GIF89a two", moving),))
    for one in (first, second, first, second):
        asyncio.run(cached.run(selection(), one, deadline=1e12, requester=REQUESTER))
    assert fake.calls == 2


def test_exact_text_keys_do_not_merge_spellings() -> None:
    cached, fake = make("exact")
    run(cached, selection(), "you idiot")
    assert not run(cached, selection(), "YOU IDIOT").cached
    assert run(cached, selection(), "YOU IDIOT").cached and fake.calls == 2


def test_other_tenants_versions_and_arms_miss() -> None:
    cached, fake = make()
    run(cached, selection(), "gg")
    for other in (selection(tenant="other"), selection(version="v2"), selection(arm="candidate"),
                  selection(shadow=policy("v9"))):
        assert not run(cached, other, "gg").cached
    assert fake.calls == 5


def test_a_shadow_verdict_is_cached_with_the_baseline() -> None:
    cached, _ = make()
    run(cached, selection(shadow=policy("v9")), "gg")
    outcome = run(cached, selection(shadow=policy("v9")), "gg")
    assert outcome.cached and outcome.shadow is not None and outcome.shadow.decision == "review"


def test_degraded_verdicts_and_errors_are_not_cached() -> None:
    cached, fake = make()
    fake.degraded = True
    run(cached, selection(), "gg")
    assert not run(cached, selection(), "gg").cached
    fake.degraded, fake.fail = False, True
    with pytest.raises(RuntimeError):
        run(cached, selection(), "hello")
    fake.fail = False
    assert not run(cached, selection(), "hello").cached


def test_unknown_or_changed_model_versions_are_not_cached() -> None:
    cached, fake = make()
    fake.models = {}
    run(cached, selection(), "gg")
    assert not run(cached, selection(), "gg").cached  # versions unknown: no key
    fake.models = {"text": list(MODELS)}
    fake.answer_models = [("text_moderation", "2")]  # the service swapped models behind the router
    run(cached, selection(), "gg")
    assert not run(cached, selection(), "gg").cached
    fake.models = {"text": [("text_moderation", "2")]}  # the router learnt the new versions: a new key
    run(cached, selection(), "gg")
    assert run(cached, selection(), "gg").cached


def test_without_a_cache_every_item_runs() -> None:
    fake = FakePipeline()
    cached = CachedPipeline(fake, None)
    run(cached, selection(), "gg")
    assert not run(cached, selection(), "gg").cached and fake.calls == 2


async def test_a_reload_that_removes_a_tenant_drops_its_cached_verdicts(tmp_path: Path) -> None:
    control, files = open_control(tmp_path)  # tenants a and b
    cached = CachedPipeline(FakePipeline(), VerdictCache(VerdictCacheConfig(), clock=lambda: 0.0))
    assert cached.cache is not None
    control.runtime.on_swap(retain_on_tenant_change(cached, asyncio.get_running_loop()))
    for tenant in ("a", "b"):
        cached.cache.put(tenant, cached.cache.key(tenant, ["default"], [("text", b"gg")]), "verdict", 100)  # type: ignore[arg-type]
    watcher = ConfigWatcher(control, files.policies_dir, files.tenants_file)

    files.write_policy("strict", policy_yaml("strict", "2", hate_block=0.5))  # same tenants: nothing dropped
    await asyncio.to_thread(watcher.poll)  # reloads swap in a worker thread, as the watcher's do
    await settle()
    assert control.runtime.snapshot.policies["strict"].version == "2"
    assert sorted(cached.cache.stats()) == ["a", "b"]

    files.tenants_file.write_text(tenants_yaml([("a", "key-a", ["default", "strict"])]))  # b removed
    await asyncio.to_thread(watcher.poll)
    await settle()
    assert set(control.runtime.snapshot.tenants.tenants) == {"a"}
    assert sorted(cached.cache.stats()) == ["a"]

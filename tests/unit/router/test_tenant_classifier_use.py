"""A policy that reads the tenant's own classifier (issue 40): how its scores merge with the text models'
(add / replace / custom categories), that a policy without it ignores them and their failures (a shadow
candidate can try a classifier while the active policy does not act on it), the classifier's own failure
mode, and the pipeline calling `classifier.<tenant>` beside the text model (fake dispatchers, no gRPC)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Sequence, cast

import numpy as np
import pytest

from services.common.contracts import classifier as classifier_contract
from services.common.contracts import text as text_contract
from services.common.contracts.rows import MalformedRowError
from services.router.cached_pipeline import CachedPipeline, CachedVerdict
from services.router.classifiers import TenantClassifiers
from services.router.config import Upstream
from services.router.control.runtime import Selection
from services.common.errors import DeadlineExceededError, LimitExceededError, QueueFullError
from services.router.dispatch import MODELS_OUTPUT, ModalityDispatcher, ModelUnloadedError, Row, UpstreamError
from services.router.evaluate import evaluate, with_classifier
from services.router.fusion import ClassifierFinding, Signals, StageFailure, TextFinding, TextSpanEvidence
from services.router.pipeline import Pipeline
from services.router.policy import (CompiledPolicy, FailureModes, PolicyDocument, TenantClassifierUse, Thresholds,
                                    compile_policy)
from services.router.scheduler import Requester
from services.router.tenants import Tenant
from tests.stubs import text_row
from services.router.validation import TextPart, ValidItem
from services.router.verdict_cache import VerdictCache, VerdictCacheConfig

VERSION = "c0ffee123456"
MODEL = f"classifier.acme.{VERSION}"
THRESHOLDS = {"harassment": Thresholds(review=0.5, block=0.9), "custom.crypto_scam": Thresholds(review=0.5, block=0.8)}


def policy(use: TenantClassifierUse | None = TenantClassifierUse(VERSION), failure: FailureModes = FailureModes(),
           version: str = "1") -> CompiledPolicy:
    return compile_policy(PolicyDocument("p", version, profile="fast", categories=THRESHOLDS, failure=failure,
                                         tenant_classifier=use))


def finding(text: str = "free airdrop, connect your wallet", harassment: float = 0.3) -> TextFinding:
    return TextFinding(0, text, {"harassment": harassment, "spam": 0.2}, (),
                       evidence=[text_contract.EvidenceSpan("harassment", 0, 4, harassment, "head:text")])


def classified(scores: dict[str, float], text: str = "free airdrop, connect your wallet") -> ClassifierFinding:
    return ClassifierFinding(0, -1, text, MODEL, VERSION, scores)


# -- merging (pure) ---------------------------------------------------------------------------------------

def test_add_takes_the_higher_score_and_cites_the_classifier_when_its_score_is_taken() -> None:
    higher = with_classifier([finding(harassment=0.3)], [classified({"harassment": 0.7})], TenantClassifierUse(VERSION, "add"))[0]
    assert higher.scores["harassment"] == 0.7 and higher.scores["spam"] == 0.2
    assert [(s.category, s.start, s.end, s.source) for s in higher.evidence] == [("harassment", 0, 33, MODEL)]
    lower = with_classifier([finding(harassment=0.8)], [classified({"harassment": 0.1})], TenantClassifierUse(VERSION, "add"))[0]
    assert lower.scores["harassment"] == 0.8 and [s.source for s in lower.evidence] == ["head:text"]


def test_replace_takes_the_classifier_score_even_when_lower() -> None:
    merged = with_classifier([finding(harassment=0.8)], [classified({"harassment": 0.1})], TenantClassifierUse(VERSION, "replace"))[0]
    assert merged.scores["harassment"] == 0.1 and [s.source for s in merged.evidence] == [MODEL]


def test_custom_categories_come_from_the_classifier_and_malformed_names_are_ignored() -> None:
    merged = with_classifier([finding()], [classified({"custom.crypto_scam": 0.95, "custom.Bad-Name": 1.0, "gore": 1.0})],
                             TenantClassifierUse(VERSION))[0]
    assert merged.scores == {"harassment": 0.3, "spam": 0.2, "custom.crypto_scam": 0.95}


def test_a_text_only_the_classifier_scored_gets_a_finding_of_its_own() -> None:
    merged = with_classifier([], [ClassifierFinding(2, 1, "buy now", MODEL, VERSION, {"custom.crypto_scam": 0.9})],
                             TenantClassifierUse(VERSION))
    assert [(f.part_index, f.ocr_line, f.text, dict(f.scores)) for f in merged] == [(2, 1, "buy now", {"custom.crypto_scam": 0.9})]


def test_the_policy_that_reads_the_classifier_acts_on_it_and_one_that_does_not_ignores_it() -> None:
    signals = Signals(texts=[finding()], classified=[classified({"custom.crypto_scam": 0.85})])
    reading = evaluate(policy(), signals, [])
    assert reading.decision == "block"
    verdict = {c.category: c for c in reading.categories}["custom.crypto_scam"]
    assert (verdict.action, verdict.rule) == ("block", "categories.custom.crypto_scam.block >= 0.8")
    cited = [e for e in reading.evidence if isinstance(e, TextSpanEvidence) and e.category == "custom.crypto_scam"]
    assert [(e.lexicon, e.start, e.end) for e in cited] == [(MODEL, 0, 33)]
    ignoring = evaluate(policy(use=None), signals, [])
    assert ignoring.decision == "allow"
    assert {c.category: c.score for c in ignoring.categories}["custom.crypto_scam"] == 0.0


@pytest.mark.parametrize("unloaded", [False, True])
def test_a_failed_classifier_fails_open_by_default_and_closed_when_the_policy_says(unloaded: bool) -> None:
    signals = Signals(texts=[finding()], failures=[StageFailure("classifier", "classifier down", unloaded=unloaded,
                                                                version=VERSION)])
    default = evaluate(policy(), signals, [])  # model_unloaded: closed does not apply to the tenant's classifier
    assert default.decision == "allow" and [(d.stage, d.handling) for d in default.degradations] == [("classifier", "fail_open")]
    closed = evaluate(policy(failure=FailureModes(classifier="closed")), signals, [])
    assert closed.decision == "review" and [d.handling for d in closed.degradations] == ["fail_closed"]
    assert evaluate(policy(use=None), signals, []).degradations == []  # not read: its failure is not this policy's
    other = TenantClassifierUse("0ddba11aaaaa")
    assert evaluate(policy(use=other), signals, []).degradations == []  # another version failed, not this one


def test_decode_row_refuses_a_score_outside_0_1() -> None:
    good = {"SCORES": np.array([classifier_contract.encode_scores({"spam": 0.4}, {"spam": False})], object)}
    assert classifier_contract.decode_row(good) == {"spam": 0.4}
    for value in (b'{"spam": {"score": 1.5, "flagged": true}}', b'{"spam": {"score": NaN, "flagged": true}}', b"[1]"):
        with pytest.raises(MalformedRowError, match="SCORES"):
            classifier_contract.decode_row({"SCORES": np.array([value], object)})


# -- the pipeline (fake dispatchers) ----------------------------------------------------------------------

@dataclass
class FakeDispatcher:
    """The text model (harassment = the number after '=') or a tenant classifier (custom.crypto_scam = 0.9
    for texts that say 'wallet')."""

    modality: str
    upstream: Upstream = field(default_factory=lambda: Upstream("localhost:1", MODEL))
    fail: Exception | None = None
    seen: list[str] = field(default_factory=list)
    busy: bool = False

    def overloaded(self, requester: Requester) -> bool:
        return self.busy

    async def submit(self, requester: Requester, payloads: Sequence[bytes], deadline: float) -> list[Row]:
        if self.fail is not None:
            raise self.fail
        texts = [p.decode() for p in payloads]
        self.seen.extend(texts)
        return [self._classifier_row(t) if self.modality == "classifier" else text_row(t) for t in texts]

    def _classifier_row(self, text: str) -> Row:
        score = 0.9 if "wallet" in text else 0.05
        return {"SCORES": np.array([classifier_contract.encode_scores({"custom.crypto_scam": score}, {"custom.crypto_scam": score > 0.5})], object),
                MODELS_OUTPUT: np.array([json.dumps([[self.upstream.model, self.upstream.model_version]])], object)}


class Factory:
    """Tenant classifiers by (tenant, version): each version its own fake (`fail` for the ones in `failing`)."""

    def __init__(self, fail: Exception | None = None, failing: Sequence[str] = ()) -> None:
        self.fail, self.failing = fail, set(failing)
        self.made: dict[str, FakeDispatcher] = {}
        self.calls: list[tuple[str, str]] = []

    def __call__(self, tenant: str, version: str) -> ModalityDispatcher:
        self.calls.append((tenant, version))
        name = classifier_contract.model_name(tenant, version)
        if name not in self.made:
            self.made[name] = FakeDispatcher("classifier", Upstream("localhost:1", name, model_version=version),
                                             fail=self.fail if not self.failing or version in self.failing else None)
        return cast(ModalityDispatcher, self.made[name])

    @property
    def dispatcher(self) -> FakeDispatcher:
        return next(iter(self.made.values()))


ITEM = ValidItem("i", (TextPart(0, "connect your wallet now"), TextPart(1, "you idiot=0.95")))


def make(factory: Factory | None = None) -> tuple[Pipeline, FakeDispatcher, Factory]:
    text = FakeDispatcher("text")
    unused = cast(ModalityDispatcher, FakeDispatcher("unused"))
    factory = factory or Factory()
    return Pipeline(cast(ModalityDispatcher, text), unused, unused, classifiers=factory), text, factory


async def test_the_pipeline_asks_the_requesting_tenants_classifier_and_names_its_version() -> None:
    pipeline, text, factory = make()
    outcome = await pipeline.run(ITEM, policy(), time.monotonic() + 5, Requester("acme"))
    assert factory.calls == [("acme", VERSION)] and factory.dispatcher.seen == text.seen == ["connect your wallet now", "you idiot=0.95"]
    categories = {c.category: c.action for c in outcome.verdict.categories}
    assert categories == {"harassment": "block", "custom.crypto_scam": "block"}
    assert outcome.models == [("text_moderation", "1"), (MODEL, VERSION)] and "classifier" in outcome.timings_ms


async def test_a_shadow_candidate_reads_the_classifier_while_the_active_policy_ignores_it() -> None:
    pipeline, _, factory = make()
    item = ValidItem("i", (TextPart(0, "connect your wallet now"),))
    outcome = await pipeline.run(item, policy(use=None), time.monotonic() + 5, Requester("acme"), shadow=policy(version="2"))
    assert factory.dispatcher.seen == ["connect your wallet now"]
    assert outcome.verdict.decision == "allow" and outcome.models == [("text_moderation", "1")]
    assert outcome.shadow is not None and outcome.shadow.decision == "block"


async def test_active_and_shadow_read_their_own_pinned_versions_and_failures() -> None:
    newer = "0ddba11aaaaa"
    pipeline, _, factory = make(Factory(UpstreamError("not yet warm"), failing=[newer]))
    item = ValidItem("i", (TextPart(0, "connect your wallet now"),))
    outcome = await pipeline.run(item, policy(), time.monotonic() + 5, Requester("acme"),
                                 shadow=policy(use=TenantClassifierUse(newer), version="2"))
    assert factory.calls == [("acme", VERSION), ("acme", newer)]
    assert outcome.verdict.decision == "block" and outcome.verdict.degradations == []  # v1 answered; v2's failure is not its
    assert outcome.shadow is not None and [(d.stage, d.handling) for d in outcome.shadow.degradations] == [
        ("classifier", "fail_open")]
    assert (MODEL, VERSION) in outcome.models and all(newer not in name for name, _ in outcome.models)


async def test_no_policy_reading_it_means_no_classifier_call() -> None:
    pipeline, _, factory = make()
    await pipeline.run(ITEM, policy(use=None), time.monotonic() + 5, Requester("acme"))
    assert factory.calls == [] and factory.made == {}


@pytest.mark.parametrize("error", [UpstreamError("classifier down"), ModelUnloadedError("not loaded"),
                                   DeadlineExceededError("shed early"), QueueFullError("queue full"),
                                   LimitExceededError("too big"), RuntimeError("a bug")])
async def test_any_classifier_error_leaves_the_text_models_verdict_and_reports_it(error: Exception) -> None:
    pipeline, _, _ = make(Factory(error))
    outcome = await pipeline.run(ITEM, policy(), time.monotonic() + 5, Requester("acme"))
    verdict = outcome.verdict
    assert verdict.decision == "block"  # the text model's harassment 0.95
    assert [(d.stage, d.handling) for d in verdict.degradations] == [("classifier", "fail_open")]
    assert "a bug" not in verdict.degradations[0].reason  # an unexpected error's message is not passed on


@pytest.mark.serial  # it bounds the wait to 0.2 s past a deadline, which other workers' load would skew
async def test_a_slow_classifier_gets_half_the_remaining_time_and_never_the_items_deadline() -> None:
    seen: list[float] = []

    class Slow(FakeDispatcher):
        async def submit(self, requester: Requester, payloads: Sequence[bytes], deadline: float) -> list[Row]:
            seen.append(deadline)
            await asyncio.sleep(max(0.0, deadline - time.monotonic()))
            raise DeadlineExceededError("deadline exceeded waiting for the classifier stage")

    factory = Factory()
    factory.made[MODEL] = Slow("classifier", Upstream("localhost:1", MODEL, model_version=VERSION))
    pipeline, _, _ = make(factory)
    deadline = time.monotonic() + 0.4
    started = time.monotonic()
    outcome = await pipeline.run(ITEM, policy(), deadline, Requester("acme"))
    assert seen and seen[0] <= started + 0.21 and outcome.verdict.decision == "block"
    assert [(d.stage, d.reason) for d in outcome.verdict.degradations] == [("classifier", "over its time budget")]


async def test_under_overload_a_tenant_may_let_the_router_skip_its_classifier() -> None:
    factory = Factory()
    pipeline, _, _ = make(factory)
    factory("acme", VERSION)
    factory.dispatcher.busy = True
    outcome = await pipeline.run(ITEM, policy(), time.monotonic() + 5, Requester("acme"), skippable=("classifier",))
    assert factory.dispatcher.seen == []
    assert [(d.stage, d.handling) for d in outcome.verdict.degradations] == [("classifier", "skipped")]


async def test_without_a_classifier_factory_a_reading_policy_gets_a_stage_failure() -> None:
    text = FakeDispatcher("text")
    unused = cast(ModalityDispatcher, FakeDispatcher("unused"))
    pipeline = Pipeline(cast(ModalityDispatcher, text), unused, unused)
    verdict = (await pipeline.run(ITEM, policy(), time.monotonic() + 5, Requester("acme"))).verdict
    assert [(d.stage, d.reason) for d in verdict.degradations] == [("classifier", "this router serves no tenant classifiers")]



# -- the dispatchers and the verdict cache ----------------------------------------------------------------

async def test_tenant_classifiers_make_one_dispatcher_per_tenant_and_version_on_its_own_model() -> None:
    made: list[Upstream] = []

    def make_dispatcher(name: str, upstream: Upstream) -> ModalityDispatcher:
        made.append(upstream)
        fake = FakeDispatcher(name, upstream)
        fake.start = lambda: None  # type: ignore[attr-defined]
        return cast(ModalityDispatcher, fake)

    text = Upstream("text:8001", "text_moderation", model_version="3", semantic_model="text_semantic")
    classifiers = TenantClassifiers(text, make_dispatcher)
    assert classifiers("acme", VERSION) is classifiers("acme", VERSION) and len(classifiers) == 1
    classifiers("acme", "0ddba11aaaaa")
    classifiers("globex", VERSION)
    assert [(u.url, u.model, u.model_version) for u in made] == [
        ("text:8001", MODEL, VERSION), ("text:8001", "classifier.acme.0ddba11aaaaa", "0ddba11aaaaa"),
        ("text:8001", f"classifier.globex.{VERSION}", VERSION)]
    for tenant, version in (("../etc", VERSION), ("acme", "latest"), ("acme.x", VERSION)):
        with pytest.raises(ValueError):
            classifiers(tenant, version)


def test_the_verdict_cache_keys_on_the_pinned_classifier_version() -> None:
    pipeline, _, _ = make()
    pipeline.models = {"text": [("text_moderation", "1")], "text_semantic": [("text_semantic", "1")]}
    cached = CachedPipeline(pipeline, VerdictCache[CachedVerdict](VerdictCacheConfig(enabled=True), clock=lambda: 0.0))
    chosen = Selection(Tenant("acme", "0" * 64, ("p",)), policy(), None, None, None)
    item = ValidItem("i", (TextPart(0, "connect your wallet now"),))
    assert cached._models(item, chosen) == [("text_moderation", "1"), (MODEL, VERSION)]
    first = asyncio.run(cached.run(chosen, item, time.monotonic() + 5, Requester("acme")))
    again = asyncio.run(cached.run(chosen, item, time.monotonic() + 5, Requester("acme")))
    assert not first.cached and again.cached and again.verdict.decision == "block" and (MODEL, VERSION) in again.models


async def test_the_classifier_queues_count_as_one_upstream_and_evicted_sheds_are_kept() -> None:
    import services.router.classifiers as module

    def make_dispatcher(name: str, upstream: Upstream) -> ModalityDispatcher:
        fake = FakeDispatcher(name, upstream)
        fake.start = lambda: None  # type: ignore[attr-defined]
        fake.scheduler = type("S", (), {"queue_depth": 2, "shed_count": 3})()  # type: ignore[attr-defined]

        async def close() -> None:
            return None
        fake.close = close  # type: ignore[attr-defined]
        return cast(ModalityDispatcher, fake)

    classifiers = TenantClassifiers(Upstream("text:8001", "text_moderation"), make_dispatcher)
    saved = module.MAX_DISPATCHERS
    module.MAX_DISPATCHERS = 2
    try:
        for version in ("aaaaaa", "bbbbbb", "cccccc"):
            classifiers("acme", version)
        await asyncio.sleep(0)
        assert len(classifiers) == 2 and classifiers.queue_depth == 4 and classifiers.shed_count == 9
    finally:
        module.MAX_DISPATCHERS = saved
        await classifiers.close()

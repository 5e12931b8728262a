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
from services.router.dispatch import MODELS_OUTPUT, ModalityDispatcher, ModelUnloadedError, Row, UpstreamError
from services.router.evaluate import evaluate, with_classifier
from services.router.fusion import ClassifierFinding, Signals, StageFailure, TextFinding, TextSpanEvidence
from services.router.pipeline import Pipeline
from services.router.policy import (CompiledPolicy, FailureModes, PolicyDocument, TenantClassifierUse, Thresholds,
                                    compile_policy)
from services.router.scheduler import Requester
from services.router.tenants import Tenant
from services.router.validation import TextPart, ValidItem
from services.router.verdict_cache import VerdictCache, VerdictCacheConfig

MODEL = "classifier.acme"
THRESHOLDS = {"harassment": Thresholds(review=0.5, block=0.9), "custom.crypto_scam": Thresholds(review=0.5, block=0.8)}


def policy(use: TenantClassifierUse | None = TenantClassifierUse(), failure: FailureModes = FailureModes(),
           version: str = "1") -> CompiledPolicy:
    return compile_policy(PolicyDocument("p", version, profile="fast", categories=THRESHOLDS, failure=failure,
                                         tenant_classifier=use))


def finding(text: str = "free airdrop, connect your wallet", harassment: float = 0.3) -> TextFinding:
    return TextFinding(0, text, {"harassment": harassment, "spam": 0.2}, (),
                       evidence=[text_contract.EvidenceSpan("harassment", 0, 4, harassment, "head:text")])


def classified(scores: dict[str, float], text: str = "free airdrop, connect your wallet") -> ClassifierFinding:
    return ClassifierFinding(0, -1, text, MODEL, scores)


# -- merging (pure) ---------------------------------------------------------------------------------------

def test_add_takes_the_higher_score_and_cites_the_classifier_when_its_score_is_taken() -> None:
    higher = with_classifier([finding(harassment=0.3)], [classified({"harassment": 0.7})], TenantClassifierUse("add"))[0]
    assert higher.scores["harassment"] == 0.7 and higher.scores["spam"] == 0.2
    assert [(s.category, s.start, s.end, s.source) for s in higher.evidence] == [("harassment", 0, 33, MODEL)]
    lower = with_classifier([finding(harassment=0.8)], [classified({"harassment": 0.1})], TenantClassifierUse("add"))[0]
    assert lower.scores["harassment"] == 0.8 and [s.source for s in lower.evidence] == ["head:text"]


def test_replace_takes_the_classifier_score_even_when_lower() -> None:
    merged = with_classifier([finding(harassment=0.8)], [classified({"harassment": 0.1})], TenantClassifierUse("replace"))[0]
    assert merged.scores["harassment"] == 0.1 and [s.source for s in merged.evidence] == [MODEL]


def test_custom_categories_come_from_the_classifier_and_malformed_names_are_ignored() -> None:
    merged = with_classifier([finding()], [classified({"custom.crypto_scam": 0.95, "custom.Bad-Name": 1.0, "gore": 1.0})],
                             TenantClassifierUse())[0]
    assert merged.scores == {"harassment": 0.3, "spam": 0.2, "custom.crypto_scam": 0.95}


def test_a_text_only_the_classifier_scored_gets_a_finding_of_its_own() -> None:
    merged = with_classifier([], [ClassifierFinding(2, 1, "buy now", MODEL, {"custom.crypto_scam": 0.9})], TenantClassifierUse())
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
    signals = Signals(texts=[finding()], failures=[StageFailure("classifier", "classifier down", unloaded=unloaded)])
    default = evaluate(policy(), signals, [])  # model_unloaded: closed does not apply to the tenant's classifier
    assert default.decision == "allow" and [(d.stage, d.handling) for d in default.degradations] == [("classifier", "fail_open")]
    closed = evaluate(policy(failure=FailureModes(classifier="closed")), signals, [])
    assert closed.decision == "review" and [d.handling for d in closed.degradations] == ["fail_closed"]
    assert evaluate(policy(use=None), signals, []).degradations == []  # not read: its failure is not this policy's


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

    def overloaded(self, requester: Requester) -> bool:
        return False

    async def submit(self, requester: Requester, payloads: Sequence[bytes], deadline: float) -> list[Row]:
        if self.fail is not None:
            raise self.fail
        texts = [p.decode() for p in payloads]
        self.seen.extend(texts)
        return [self._classifier_row(t) if self.modality == "classifier" else self._text_row(t) for t in texts]

    def _text_row(self, text: str) -> Row:
        score = float(text.split("=")[1]) if "=" in text else 0.0
        row: Row = {name: np.array([score if category == "harassment" else 0.0], np.float32)
                    for name, category in text_contract.SCORE_OUTPUTS.items()}
        row.update({text_contract.MATCHES: np.array([b"[]"], object), text_contract.EVIDENCE: np.array([b"[]"], object),
                    text_contract.TARGET: np.array([0.0], np.float32),
                    MODELS_OUTPUT: np.array([json.dumps([["text_moderation", "1"]])], object)})
        return row

    def _classifier_row(self, text: str) -> Row:
        score = 0.9 if "wallet" in text else 0.05
        return {"SCORES": np.array([classifier_contract.encode_scores({"custom.crypto_scam": score}, {"custom.crypto_scam": score > 0.5})], object),
                MODELS_OUTPUT: np.array([json.dumps([[MODEL, "c-1234"]])], object)}


class Factory:
    def __init__(self, dispatcher: FakeDispatcher) -> None:
        self.dispatcher = dispatcher
        self.tenants: list[str] = []

    def __call__(self, tenant: str) -> ModalityDispatcher:
        self.tenants.append(tenant)
        return cast(ModalityDispatcher, self.dispatcher)


ITEM = ValidItem("i", (TextPart(0, "connect your wallet now"), TextPart(1, "you idiot=0.95")))


def make(classifier: FakeDispatcher) -> tuple[Pipeline, FakeDispatcher, Factory]:
    text = FakeDispatcher("text")
    unused = cast(ModalityDispatcher, FakeDispatcher("unused"))
    factory = Factory(classifier)
    return Pipeline(cast(ModalityDispatcher, text), unused, unused, classifiers=factory), text, factory


async def test_the_pipeline_asks_the_requesting_tenants_classifier_and_names_its_version() -> None:
    pipeline, text, factory = make(FakeDispatcher("classifier"))
    outcome = await pipeline.run(ITEM, policy(), time.monotonic() + 5, Requester("acme"))
    assert factory.tenants == ["acme"] and factory.dispatcher.seen == text.seen == ["connect your wallet now", "you idiot=0.95"]
    categories = {c.category: c.action for c in outcome.verdict.categories}
    assert categories == {"harassment": "block", "custom.crypto_scam": "block"}
    assert outcome.models == [("text_moderation", "1"), (MODEL, "c-1234")]
    assert pipeline.classifier_models == {"acme": [(MODEL, "c-1234")]} and "classifier" in outcome.timings_ms


async def test_a_shadow_candidate_reads_the_classifier_while_the_active_policy_ignores_it() -> None:
    pipeline, _, factory = make(FakeDispatcher("classifier"))
    item = ValidItem("i", (TextPart(0, "connect your wallet now"),))
    outcome = await pipeline.run(item, policy(use=None), time.monotonic() + 5, Requester("acme"), shadow=policy(version="2"))
    assert factory.dispatcher.seen == ["connect your wallet now"]
    assert outcome.verdict.decision == "allow" and outcome.models == [("text_moderation", "1")]
    assert outcome.shadow is not None and outcome.shadow.decision == "block"


async def test_no_policy_reading_it_means_no_classifier_call() -> None:
    pipeline, _, factory = make(FakeDispatcher("classifier"))
    await pipeline.run(ITEM, policy(use=None), time.monotonic() + 5, Requester("acme"))
    assert factory.tenants == [] and factory.dispatcher.seen == []


@pytest.mark.parametrize("error", [UpstreamError("classifier down"), ModelUnloadedError("not loaded")])
async def test_a_failing_classifier_leaves_the_text_models_verdict_and_reports_it(error: Exception) -> None:
    pipeline, _, _ = make(FakeDispatcher("classifier", fail=error))
    verdict = (await pipeline.run(ITEM, policy(), time.monotonic() + 5, Requester("acme"))).verdict
    assert verdict.decision == "block"  # the text model's harassment 0.95
    assert [(d.stage, d.handling) for d in verdict.degradations] == [("classifier", "fail_open")]


async def test_without_a_classifier_factory_a_reading_policy_gets_a_stage_failure() -> None:
    text = FakeDispatcher("text")
    unused = cast(ModalityDispatcher, FakeDispatcher("unused"))
    pipeline = Pipeline(cast(ModalityDispatcher, text), unused, unused)
    verdict = (await pipeline.run(ITEM, policy(), time.monotonic() + 5, Requester("acme"))).verdict
    assert [(d.stage, d.reason) for d in verdict.degradations] == [("classifier", "this router serves no tenant classifiers")]


# -- the dispatchers and the verdict cache ----------------------------------------------------------------

def test_tenant_classifiers_make_one_dispatcher_per_tenant_on_its_own_model() -> None:
    made: list[Upstream] = []

    def make_dispatcher(name: str, upstream: Upstream) -> ModalityDispatcher:
        made.append(upstream)
        fake = FakeDispatcher(name, upstream)
        fake.start = lambda: None  # type: ignore[attr-defined]
        return cast(ModalityDispatcher, fake)

    text = Upstream("text:8001", "text_moderation", model_version="3", semantic_model="text_semantic")
    classifiers = TenantClassifiers(text, make_dispatcher)
    assert classifiers("acme") is classifiers("acme") and len(classifiers) == 1
    classifiers("globex")
    assert [(u.url, u.model, u.model_version) for u in made] == [("text:8001", "classifier.acme", ""),
                                                                 ("text:8001", "classifier.globex", "")]
    with pytest.raises(ValueError, match="tenant"):
        classifiers("../etc")


def test_the_verdict_cache_waits_for_the_classifier_version_and_keys_on_it() -> None:
    pipeline, _, _ = make(FakeDispatcher("classifier"))
    pipeline.models = {"text": [("text_moderation", "1")], "text_semantic": [("text_semantic", "1")]}
    cached = CachedPipeline(pipeline, VerdictCache[CachedVerdict](VerdictCacheConfig(enabled=True), clock=lambda: 0.0))
    chosen = Selection(Tenant("acme", "0" * 64, ("p",)), policy(), None, None, None)
    item = ValidItem("i", (TextPart(0, "connect your wallet now"),))
    assert cached._models(item, chosen) is None  # the classifier's version is not known yet: not cached
    outcome = asyncio.run(cached.run(chosen, item, time.monotonic() + 5, Requester("acme")))
    assert not outcome.cached and cached._models(item, chosen) == [("text_moderation", "1"), (MODEL, "c-1234")]
    stored = asyncio.run(cached.run(chosen, item, time.monotonic() + 5, Requester("acme")))  # now keyed: stored
    assert not stored.cached
    again = asyncio.run(cached.run(chosen, item, time.monotonic() + 5, Requester("acme")))
    assert again.cached and again.verdict.decision == "block" and (MODEL, "c-1234") in again.models

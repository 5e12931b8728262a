"""The pipeline sends texts to the text model(s) the policy's profile picks (fake dispatchers, no gRPC)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Sequence, cast

import numpy as np

from services.common.contracts import text as contract
from services.common.errors import DeadlineExceededError
from services.router.dispatch import MODELS_OUTPUT, ModalityDispatcher, Row, UpstreamError
from services.router.fusion import TextSpanEvidence
from services.router.pipeline import Outcome, Pipeline
from services.router.policy import BalancedRouting, CompiledPolicy, PolicyDocument, Profile, Thresholds, compile_policy
from services.router.scheduler import Requester
from services.router.validation import TextPart, ValidItem


@dataclass
class FakeTextModel:
    """A text dispatcher: scores every text `harassment` = the number after '=' in it, target if it says 'you'."""

    modality: str
    fail: bool = False
    busy: bool = False
    seen: list[str] = field(default_factory=list)
    #: Like a saturated upstream: wait until the deadline it is given, then raise DeadlineExceededError.
    saturated: bool = False
    deadlines: list[float] = field(default_factory=list)

    def overloaded(self, requester: Requester) -> bool:
        return self.busy

    async def submit(self, requester: Requester, payloads: Sequence[bytes], deadline: float) -> list[Row]:
        if self.fail:
            raise UpstreamError(f"{self.modality} down")
        self.deadlines.append(deadline)
        if self.saturated:
            await asyncio.sleep(max(0.0, deadline - time.monotonic()))
            raise DeadlineExceededError(f"{self.modality}: deadline exceeded waiting")
        texts = [p.decode() for p in payloads]
        self.seen.extend(texts)
        return [self._row(text) for text in texts]

    def _row(self, text: str) -> Row:
        score = float(text.split("=")[1]) if "=" in text else 0.0
        if self.modality == "text_semantic":
            score = min(1.0, score + 0.5)  # the semantic model is surer
        evidence = [contract.EvidenceSpan("harassment", 0, 3, score, f"head:{self.modality}")]
        row: Row = {name: np.array([score if category == "harassment" else 0.0], np.float32)
                    for name, category in contract.SCORE_OUTPUTS.items()}
        row.update({contract.MATCHES: np.array([b"[]"], object),
                    contract.EVIDENCE: np.array([contract.encode_evidence(evidence)], object),
                    contract.TARGET: np.array([1.0 if "you" in text else 0.0], np.float32),
                    **{name: np.array([0.0], np.float32) for name in contract.SUBCATEGORY_OUTPUTS},
                    MODELS_OUTPUT: np.array([json.dumps([[self.modality, "1"]])], object)})
        return row


def pipeline(fast: FakeTextModel, semantic: FakeTextModel) -> Pipeline:
    unused = cast(ModalityDispatcher, FakeTextModel("unused"))
    return Pipeline(cast(ModalityDispatcher, fast), unused, unused, text_semantic=cast(ModalityDispatcher, semantic))


def policy(profile: Profile) -> CompiledPolicy:
    return compile_policy(PolicyDocument("p", "1", profile=profile, balanced=BalancedRouting(0.2, 0.8, True),
                                         categories={"harassment": Thresholds(review=0.5, block=0.9)}))


ITEM = ValidItem("i", (TextPart(0, "a=0.05"), TextPart(1, "b=0.5"), TextPart(2, "you=0.0"), TextPart(3, "c=0.95")))


async def run(profile: Profile, fast: FakeTextModel, semantic: FakeTextModel, skippable: Sequence[str] = ()) -> Outcome:
    return await pipeline(fast, semantic).run(ITEM, policy(profile), time.monotonic() + 5, Requester("t"),
                                              skippable=skippable)


async def test_fast_uses_only_text_moderation() -> None:
    fast, semantic = FakeTextModel("text"), FakeTextModel("text_semantic")
    outcome = await run("fast", fast, semantic)
    assert len(fast.seen) == 4 and semantic.seen == []
    assert outcome.models == [("text", "1")]


async def test_accurate_uses_only_text_semantic() -> None:
    fast, semantic = FakeTextModel("text"), FakeTextModel("text_semantic")
    outcome = await run("accurate", fast, semantic)
    assert fast.seen == [] and len(semantic.seen) == 4
    assert outcome.models == [("text_semantic", "1")]


async def test_balanced_asks_semantic_only_for_uncertain_or_targeted_texts() -> None:
    fast, semantic = FakeTextModel("text"), FakeTextModel("text_semantic")
    outcome = await run("balanced", fast, semantic)
    assert len(fast.seen) == 4 and semantic.seen == ["b=0.5", "you=0.0"]
    verdict = outcome.verdict
    assert verdict.decision == "block"  # c=0.95 from the fast pass; b=0.5 -> 1.0 from the semantic pass
    spans = {(e.part_index, e.lexicon) for e in verdict.evidence if isinstance(e, TextSpanEvidence)}
    assert spans == {(1, "head:text_semantic"), (2, "head:text_semantic"), (3, "head:text")}
    assert "text_semantic" in outcome.timings_ms and outcome.models == [("text", "1"), ("text_semantic", "1")]


async def test_balanced_keeps_first_pass_scores_and_degrades_when_semantic_fails() -> None:
    fast, semantic = FakeTextModel("text"), FakeTextModel("text_semantic", fail=True)
    verdict = (await run("balanced", fast, semantic)).verdict
    assert [(d.stage, d.handling) for d in verdict.degradations] == [("text_semantic", "fail_closed")]
    assert verdict.decision == "block"  # c=0.95 still blocks


async def test_a_saturated_second_opinion_gets_half_the_items_time_then_the_first_pass_answers_degraded() -> None:
    fast, semantic = FakeTextModel("text"), FakeTextModel("text_semantic", saturated=True)
    started = time.monotonic()
    outcome = await pipeline(fast, semantic).run(ITEM, policy("balanced"), started + 0.4, Requester("t"))
    elapsed = time.monotonic() - started
    assert semantic.deadlines and semantic.deadlines[0] <= started + 0.2 + 0.05  # half of the 0.4 s left
    assert elapsed < 0.4  # answered before the item's own deadline
    verdict = outcome.verdict
    assert [(d.stage, d.reason, d.handling) for d in verdict.degradations] == \
        [("text_semantic", "over its time budget", "fail_closed")]
    assert verdict.decision == "block"  # c=0.95 from the first pass


async def test_semantic_skipped_under_overload_when_the_tenant_allows_it() -> None:
    fast, semantic = FakeTextModel("text"), FakeTextModel("text_semantic", busy=True)
    verdict = (await run("accurate", fast, semantic, skippable=("text_semantic",))).verdict
    assert len(fast.seen) == 4 and semantic.seen == []
    assert [(d.stage, d.handling) for d in verdict.degradations] == [("text_semantic", "skipped")]


async def test_balanced_under_overload_skips_only_the_second_pass_and_only_when_needed() -> None:
    fast, semantic = FakeTextModel("text"), FakeTextModel("text_semantic", busy=True)
    verdict = (await run("balanced", fast, semantic, skippable=("text_semantic",))).verdict
    assert semantic.seen == [] and [(d.stage, d.handling) for d in verdict.degradations] == [("text_semantic", "skipped")]
    sure = ValidItem("j", (TextPart(0, "a=0.01"),))
    outcome = await pipeline(fast, semantic).run(sure, policy("balanced"), time.monotonic() + 5, Requester("t"),
                                                 skippable=("text_semantic",))
    assert outcome.verdict.degradations == [] and outcome.verdict.decision == "allow"

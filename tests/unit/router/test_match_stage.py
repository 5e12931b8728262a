"""Known-content matching in the router (issue 42): bank matches become category verdicts with match
evidence under a policy's `matches` rules; a policy without them ignores them; an exact match of a
blocking bank short-circuits the stages still running; the evidence survives the response and the
audit record (fake dispatchers, no gRPC)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Sequence, cast

import numpy as np
import pytest

from services.common.contracts import match as contract
from services.router.control.audit import evidence_from_reference, evidence_reference
from services.router.dispatch import MODELS_OUTPUT, ModalityDispatcher, Row, UpstreamError
from services.router.evaluate import evaluate
from services.router.fusion import MatchEvidence, MatchFinding, Signals, StageFailure
from services.router.messages import evidence_message
from services.router.pipeline import Pipeline
from services.common.image_decode import ImageHeader
from services.router.policy import CompiledPolicy, MatchRules, OcrRules, PolicyDocument, Thresholds, compile_policy
from services.router.scheduler import Requester
from tests.stubs import text_row
from services.router.validation import ImagePart, TextPart, ValidItem


HEADER = ImageHeader("PNG", 10, 10)


def match(bank: str = "spam_waves", distance: int = 7, action: str = "review", category: str = "spam", *,
          signal: str = "text_simhash", negative: bool = False, suppressed: bool = False) -> contract.Match:
    return contract.Match(bank, 4, signal, distance, "wave-12", category, "medium", action, negative, suppressed)


def policy(rules: MatchRules | None = MatchRules(), categories: dict[str, Thresholds] | None = None) -> CompiledPolicy:
    return compile_policy(PolicyDocument("p", "1", profile="fast", categories=categories or {}, matches=rules))


def test_a_match_takes_its_banks_action_or_the_policys_and_cites_the_bank() -> None:
    signals = Signals(matches=[MatchFinding(0, match())])
    verdict = evaluate(policy(), signals, [])
    assert verdict.decision == "review"
    spam = {c.category: c for c in verdict.categories}["spam"]
    assert (spam.action, spam.rule, spam.score) == ("review", "match:spam_waves@4/text_simhash", 1.0)
    assert verdict.evidence == [MatchEvidence("spam", 0, "spam_waves", 4, "text_simhash", 7, "wave-12")]
    assert evaluate(policy(MatchRules(banks={"spam_waves": "block"})), signals, []).decision == "block"
    assert evaluate(policy(MatchRules(banks={"spam_waves": "ignore"})), signals, []).decision == "allow"
    capped = policy(MatchRules(banks={"spam_waves": "block"}), {"spam": Thresholds(max_action="review")})
    assert evaluate(capped, signals, []).decision == "review"


def test_negative_and_suppressed_matches_never_act_and_a_policy_without_matches_ignores_them() -> None:
    quiet = Signals(matches=[MatchFinding(0, match(negative=True, category="")), MatchFinding(0, match(suppressed=True))])
    assert evaluate(policy(), quiet, []).decision == "allow"
    signals = Signals(matches=[MatchFinding(0, match(action="block"))], failures=[StageFailure("match", "match service down")])
    ignoring = evaluate(policy(None), signals, [])
    assert ignoring.decision == "allow" and ignoring.degradations == [] and ignoring.evidence == []
    assert [(d.stage, d.handling) for d in evaluate(policy(), Signals(failures=[StageFailure("match", "down")]), []).degradations] \
        == [("match", "fail_open")]


def test_match_evidence_survives_the_response_and_the_audit_record() -> None:
    evidence = MatchEvidence("violence", 1, "known_gore", 9, "pdq", 12, "case-3")
    message = evidence_message(evidence)
    assert (message.category, message.part_index, message.match.bank, message.match.bank_version,
            message.match.signal_type, message.match.distance, message.match.content_id) == (
        "violence", 1, "known_gore", 9, "pdq", 12, "case-3")
    assert evidence_from_reference(json.loads(json.dumps(evidence_reference(evidence)))) == evidence


@pytest.mark.parametrize("body, problem", [
    ({"matches": {"banks": {"spam_waves": "delete"}}}, "matches.banks.spam_waves"),
    ({"failure": {"match": "maybe"}}, "failure.match"),
])
def test_match_rules_are_validated(body: dict[str, object], problem: str) -> None:
    from services.common.config import ConfigError
    from services.router.control.versions import compile_policy_text

    with pytest.raises(ConfigError, match=problem):
        compile_policy_text({"name": "p", "version": "1", **body}, "p.yaml")


# -- the pipeline (fake dispatchers) ----------------------------------------------------------------------

@dataclass
class Fake:
    """A text model that takes `delay_s` (harassment = the number after '='), or the match service."""

    modality: str
    delay_s: float = 0.0
    fail: bool = False
    seen: list[bytes] = field(default_factory=list)
    cancelled: bool = False

    def overloaded(self, requester: Requester) -> bool:
        return False

    async def submit(self, requester: Requester, payloads: Sequence[bytes], deadline: float) -> list[Row]:
        self.seen.extend(payloads)
        if self.fail:
            raise UpstreamError(f"{self.modality} down")
        try:
            await asyncio.sleep(self.delay_s)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return [self._match_row(p) if self.modality == "match" else text_row(p.decode()) for p in payloads]

    def _match_row(self, envelope: bytes) -> Row:
        tenant, kind, content = contract.decode_item(envelope)
        found = []
        if kind in ("image", "file") and content == b"KNOWN-BYTES":
            found = [contract.Match("known_gore", 9, "sha256", 0, "case-3", "violence", "high", "block")]
        elif kind == "text" and b"airdrop" in content:
            found = [contract.Match("spam_waves", 4, "text_simhash", 9, "wave-12", "spam", "medium", "review")]
        return {contract.MATCHES: np.array([contract.encode_matches(found)], object), contract.ERROR: np.array([b""], object),
                MODELS_OUTPUT: np.array([json.dumps([["match", "1"], ["banks", "g17"]])], object)}


def make(text: Fake, matcher: Fake | None) -> Pipeline:
    unused = cast(ModalityDispatcher, Fake("unused"))
    return Pipeline(cast(ModalityDispatcher, text), unused, unused,
                    match=cast(ModalityDispatcher, matcher) if matcher is not None else None)


def image_policy() -> CompiledPolicy:
    return compile_policy(PolicyDocument("p", "1", profile="fast", matches=MatchRules(),
                                         categories={"harassment": Thresholds(review=0.5, block=0.9)}))


async def test_text_matches_join_the_models_verdict_and_name_the_bank_generation() -> None:
    text, matcher = Fake("text"), Fake("match")
    item = ValidItem("i", (TextPart(0, "free airdrop now"), TextPart(1, "you=0.95")))
    outcome = await make(text, matcher).run(item, image_policy(), time.monotonic() + 5, Requester("acme"))
    assert [contract.decode_item(p)[:2] for p in matcher.seen] == [("acme", "text"), ("acme", "text")]
    actions = {c.category: c.action for c in outcome.verdict.categories}
    assert actions["spam"] == "review" and actions["harassment"] == "block" and not outcome.short_circuited
    assert ("banks", "g17") in outcome.models and ("match", "1") in outcome.models


async def test_an_exact_match_of_a_blocking_bank_short_circuits_the_slow_stages() -> None:
    text, matcher = Fake("text", delay_s=5.0), Fake("match")
    item = ValidItem("i", (TextPart(0, "caption=0.1"), ImagePart(1, b"KNOWN-BYTES", HEADER)))
    pipeline = make(text, matcher)
    pipeline.vision = cast(ModalityDispatcher, Fake("vision", delay_s=5.0))
    started = time.monotonic()
    policy = compile_policy(PolicyDocument("p", "1", profile="fast", matches=MatchRules(), ocr=OcrRules(enabled=False)))
    outcome = await pipeline.run(item, policy, time.monotonic() + 10, Requester("acme"))
    assert time.monotonic() - started < 2.0 and text.cancelled
    assert outcome.short_circuited and outcome.verdict.decision == "block"
    assert [e for e in outcome.verdict.evidence if isinstance(e, MatchEvidence)] == [
        MatchEvidence("violence", 1, "known_gore", 9, "sha256", 0, "case-3")]


async def test_an_animations_file_is_matched_by_exact_hash_besides_its_frames() -> None:
    text, matcher = Fake("text"), Fake("match")
    animation = ImagePart(1, b"KNOWN-BYTES", ImageHeader("GIF", 10, 10, frames=3, animated=True))
    frames = (ImagePart(1, b"frame-0", HEADER, (1, 0)), ImagePart(2, b"frame-2", HEADER, (1, 2)))
    item = ValidItem("i", (TextPart(0, "caption=0.1"), *frames), animations=(animation,))
    pipeline = make(text, matcher)
    pipeline.vision = cast(ModalityDispatcher, Fake("vision", delay_s=5.0))
    policy = compile_policy(PolicyDocument("p", "1", profile="fast", matches=MatchRules(), ocr=OcrRules(enabled=False)))
    outcome = await pipeline.run(item, policy, time.monotonic() + 10, Requester("acme"))
    assert [contract.decode_item(p) for p in matcher.seen] == [
        ("acme", "text", b"caption=0.1"), ("acme", "image", b"frame-0"), ("acme", "image", b"frame-2"),
        ("acme", "file", b"KNOWN-BYTES")]
    assert outcome.short_circuited and outcome.verdict.decision == "block"
    assert [e for e in outcome.verdict.evidence if isinstance(e, MatchEvidence)] == [
        MatchEvidence("violence", 1, "known_gore", 9, "sha256", 0, "case-3")]  # the part (its frame 0 once located)


async def test_without_short_circuit_or_without_a_match_service() -> None:
    text, matcher = Fake("text"), Fake("match")
    item = ValidItem("i", (ImagePart(0, b"KNOWN-BYTES", HEADER),))
    rules = compile_policy(PolicyDocument("p", "1", profile="fast", matches=MatchRules(short_circuit=False),
                                          ocr=OcrRules(enabled=False)))
    pipeline = make(text, matcher)
    pipeline.vision = cast(ModalityDispatcher, Fake("vision"))
    outcome = await pipeline.run(item, rules, time.monotonic() + 5, Requester("acme"))
    assert not outcome.short_circuited and outcome.verdict.decision == "block"
    absent = await make(text, None).run(ValidItem("j", (TextPart(0, "hi"),)), image_policy(), time.monotonic() + 5,
                                        Requester("acme"))
    assert [(d.stage, d.reason) for d in absent.verdict.degradations] == [("match", "this router has no match service")]
    failing = await make(text, Fake("match", fail=True)).run(ValidItem("k", (TextPart(0, "you=0.95"),)), image_policy(),
                                                            time.monotonic() + 5, Requester("acme"))
    assert failing.verdict.decision == "block" and [d.handling for d in failing.verdict.degradations] == ["fail_open"]


async def test_a_shadow_that_would_not_block_keeps_the_stages_running_and_short_circuits_are_not_cached() -> None:
    text, matcher = Fake("text", delay_s=0.2), Fake("match")
    item = ValidItem("i", (TextPart(0, "caption=0.95"), ImagePart(1, b"KNOWN-BYTES", HEADER)))
    pipeline = make(text, matcher)
    pipeline.vision = cast(ModalityDispatcher, Fake("vision"))
    active = compile_policy(PolicyDocument("p", "1", profile="fast", matches=MatchRules(), ocr=OcrRules(enabled=False),
                                           categories={"harassment": Thresholds(review=0.5, block=0.9)}))
    candidate = compile_policy(PolicyDocument("p", "2", profile="fast", ocr=OcrRules(enabled=False),
                                              categories={"harassment": Thresholds(review=0.5, block=0.9)}))
    outcome = await pipeline.run(item, active, time.monotonic() + 5, Requester("acme"), shadow=candidate)
    assert not outcome.short_circuited and not text.cancelled  # the candidate is judged on every signal
    assert outcome.shadow is not None and outcome.shadow.decision == "block"  # by the text model, as it would

    from services.router.cached_pipeline import CachedPipeline, CachedVerdict
    from services.router.control.runtime import Selection
    from services.router.tenants import Tenant
    from services.router.verdict_cache import VerdictCache, VerdictCacheConfig

    quick = make(Fake("text", delay_s=5.0), Fake("match"))
    quick.vision = cast(ModalityDispatcher, Fake("vision", delay_s=5.0))
    quick.models = {"text": [("text_moderation", "1")], "text_semantic": [("text_semantic", "1")],
                    "vision": [("image_safety", "1")], "match": [("match", "1"), ("banks", "g17")]}
    cached = CachedPipeline(quick, VerdictCache[CachedVerdict](VerdictCacheConfig(enabled=True), clock=lambda: 0.0))
    chosen = Selection(Tenant("acme", "0" * 64, ("p",)), active, None, None, None)
    first = await cached.run(chosen, item, time.monotonic() + 10, Requester("acme"))
    again = await cached.run(chosen, item, time.monotonic() + 10, Requester("acme"))
    assert first.short_circuited and again.short_circuited and not again.cached  # decided on partial signals
    assert ("text_moderation", "1") not in first.models  # only the stages that answered are named


async def test_a_slow_or_full_match_service_fails_open_within_its_share_of_the_time() -> None:
    from services.common.errors import DeadlineExceededError, QueueFullError

    for error in (DeadlineExceededError("deadline exceeded waiting for the match stage"), QueueFullError("full")):
        class Broken(Fake):
            async def submit(self, requester: Requester, payloads: Sequence[bytes], deadline: float) -> list[Row]:
                raise error

        outcome = await make(Fake("text"), Broken("match")).run(ValidItem("k", (TextPart(0, "you=0.95"),)), image_policy(),
                                                                time.monotonic() + 5, Requester("acme"))
        assert outcome.verdict.decision == "block"
        assert [(d.stage, d.handling) for d in outcome.verdict.degradations] == [("match", "fail_open")]

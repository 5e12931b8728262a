"""Fusion: thresholds, blocklist severities, evidence, fail-open / fail-closed degradations."""

from __future__ import annotations

from typing import Any

from services.router.fusion import (BlockMatch, CategoryVerdict, ImageFinding, ImageScoreEvidence, OcrLineEvidence,
                                    OcrLineFinding, ScoreSpan, Signals, StageFailure, TextFinding, TextSpanEvidence,
                                    Verdict, fuse)
from services.router.policy import (BlocklistRules, FailureModes, PolicyDocument, SeverityActions, Thresholds,
                                    compile_policy)

POLICY = compile_policy(PolicyDocument(
    name="p", version="7",
    categories={"harassment": Thresholds(), "hate": Thresholds(review=0.5, block=0.9),
                "sexual": Thresholds(review=0.4, block=0.8)},
    blocklist=BlocklistRules(actions=SeverityActions(low="review", medium="block", high="block")),
    failure=FailureModes(text="closed", vision="open", ocr="open")))


def verdict_for(**signals: Any) -> Verdict:
    return fuse(POLICY, Signals(**signals))


def category(verdict: Verdict, name: str) -> CategoryVerdict:
    return next(c for c in verdict.categories if c.category == name)


def test_clean_text_is_allowed_with_every_policy_category_reported() -> None:
    verdict = verdict_for(texts=[TextFinding(0, "have a nice day", {"hate": 0.02}, ())])
    assert verdict.decision == "allow"
    assert [c.category for c in verdict.categories] == ["harassment", "hate", "sexual"]
    assert category(verdict, "hate").severity == "none" and category(verdict, "hate").rule == ""
    assert verdict.evidence == [] and verdict.degradations == []


def test_score_over_block_threshold_blocks_with_the_rule_and_span() -> None:
    verdict = verdict_for(texts=[TextFinding(1, "you idiot", {"hate": 0.95}, ())])
    hate = category(verdict, "hate")
    assert verdict.decision == "block"
    assert (hate.action, hate.severity, hate.rule) == ("block", "high", "categories.hate.block >= 0.9")
    assert verdict.evidence == [TextSpanEvidence("hate", 1, 0, 9, "you idiot", score=0.95)]


def test_highest_score_over_parts_wins() -> None:
    verdict = verdict_for(texts=[TextFinding(0, "a", {"hate": 0.1}, ()), TextFinding(1, "b", {"hate": 0.6}, ())])
    assert category(verdict, "hate").score == 0.6
    assert verdict.decision == "review"


def test_blocklist_severity_maps_to_action_and_cites_the_ocr_line() -> None:
    line = OcrLineFinding(2, 0, "免费领取 傻逼", 0.98, ((10, 10), (200, 10), (200, 40), (10, 40)))
    match = BlockMatch("profanity", "傻逼", 2, 5, 7, "傻逼", "default")
    verdict = verdict_for(texts=[TextFinding(2, line.text, {"hate": 0.0}, (match,), ocr_line=0)], ocr_lines=[line])
    profanity = category(verdict, "profanity")
    assert verdict.decision == "block"
    assert (profanity.score, profanity.severity, profanity.rule) == (1.0, "medium", "blocklist:default/severity=medium")
    spans = [e for e in verdict.evidence if isinstance(e, TextSpanEvidence)]
    assert spans == [TextSpanEvidence("profanity", 2, 5, 7, "傻逼", "傻逼", "default", 0, 1.0)]
    assert [e for e in verdict.evidence if isinstance(e, OcrLineEvidence)] == [OcrLineEvidence("profanity", 2, line)]


def test_low_severity_hit_only_reviews() -> None:
    verdict = verdict_for(texts=[TextFinding(0, "darn", {}, (BlockMatch("profanity", "darn", 1, 0, 4, "darn", "default"),))])
    assert verdict.decision == "review"


def test_image_scores_are_always_reported_and_cited_when_they_fire() -> None:
    quiet = verdict_for(images=[ImageFinding(0, "image_safety", {"sexual": 0.01, "violence": 0.02})])
    assert quiet.decision == "allow"
    assert quiet.evidence == [ImageScoreEvidence("", 0, "image_safety", {"sexual": 0.01, "violence": 0.02})]
    loud = verdict_for(images=[ImageFinding(0, "image_safety", {"sexual": 0.85, "violence": 0.02})])
    assert loud.decision == "block"
    assert loud.evidence == [ImageScoreEvidence("sexual", 0, "image_safety", {"sexual": 0.85, "violence": 0.02})]


def test_fail_open_stage_allows_but_says_degraded() -> None:
    verdict = verdict_for(texts=[TextFinding(0, "hi", {"hate": 0.0}, ())],
                          failures=[StageFailure("vision", "vision service unavailable")])
    assert verdict.decision == "allow"
    assert [(d.stage, d.handling) for d in verdict.degradations] == [("vision", "fail_open")]


def test_fail_closed_stage_forces_review_and_ocr_text_follows_text() -> None:
    verdict = verdict_for(failures=[StageFailure("ocr_text", "text service unavailable")])
    assert verdict.decision == "review"
    assert verdict.degradations[0].handling == "fail_closed"


def test_fail_closed_never_weakens_a_block() -> None:
    verdict = verdict_for(texts=[TextFinding(0, "x", {"hate": 0.99}, ())], failures=[StageFailure("text", "down")])
    assert verdict.decision == "block"


# --- taxonomy 2: per-category caps, ambiguous-tier hits, model evidence spans, rule hits ---

CAPPED = compile_policy(PolicyDocument(
    name="c", version="1",
    categories={"harassment": Thresholds(review=0.5, block=0.85), "profanity": Thresholds(review=0.6, max_action="review")},
    blocklist=BlocklistRules(actions=SeverityActions(low="review", medium="block", high="block"))))


def test_profanity_capped_at_review_whatever_its_score_or_hit_severity() -> None:
    hit = BlockMatch("profanity", "shit", 3, 0, 4, "shit", "default")
    verdict = fuse(CAPPED, Signals(texts=[TextFinding(0, "shit, the bus is late", {"profanity": 0.99}, (hit,))]))
    assert verdict.decision == "review"
    profanity = category(verdict, "profanity")
    assert profanity.action == "review" and profanity.rule == "blocklist:default/severity=high/max_action=review"


def test_category_cap_names_itself_in_the_rule() -> None:
    verdict = fuse(CAPPED, Signals(texts=[TextFinding(0, "damn", {"profanity": 0.7}, ())]))
    assert category(verdict, "profanity").rule == "categories.profanity.review >= 0.6"


def test_ambiguous_tier_hit_alone_reviews_but_a_high_score_still_blocks() -> None:
    hit = BlockMatch("harassment", "pig", 3, 8, 11, "pig", "default", max_action="review")
    alone = fuse(CAPPED, Signals(texts=[TextFinding(0, "you are pig", {"harassment": 0.1}, (hit,))]))
    assert alone.decision == "review" and category(alone, "harassment").rule.endswith("/max_action=review")
    scored = fuse(CAPPED, Signals(texts=[TextFinding(0, "you are pig", {"harassment": 0.9}, (hit,))]))
    assert scored.decision == "block"


def test_score_evidence_cites_the_models_spans_not_the_whole_text() -> None:
    text = "nice day. you are worthless. bye"
    spans = (ScoreSpan("harassment", 10, 28, 0.91, "head:sentence"), ScoreSpan("spam", 0, 4, 0.9, "x"))
    verdict = fuse(CAPPED, Signals(texts=[TextFinding(3, text, {"harassment": 0.91}, (), evidence=spans)]))
    assert verdict.evidence == [TextSpanEvidence("harassment", 3, 10, 28, "you are worthless.", lexicon="head:sentence",
                                                 score=0.91)]


def test_score_evidence_falls_back_to_the_whole_text_for_out_of_range_spans() -> None:
    spans = (ScoreSpan("harassment", 5, 99, 0.9, "head"),)
    verdict = fuse(CAPPED, Signals(texts=[TextFinding(0, "you fool", {"harassment": 0.9}, (), evidence=spans)]))
    assert verdict.evidence == [TextSpanEvidence("harassment", 0, 0, 8, "you fool", score=0.9)]


def test_semantic_stage_failure_fails_like_the_text_stage() -> None:
    verdict = fuse(POLICY, Signals(texts=[TextFinding(0, "x", {"hate": 0.0}, ())],
                                   failures=[StageFailure("text_semantic", "down")]))
    assert verdict.decision == "review" and verdict.degradations[0].handling == "fail_closed"

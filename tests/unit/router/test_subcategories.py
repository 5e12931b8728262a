"""Subcategories in policies and fusion: the kind of content that fired a category decides its action."""

from __future__ import annotations

from typing import Mapping

import pytest

from services.common.config import ConfigError
from services.common.taxonomy import SUBCATEGORIES
from services.router.control.versions import parse_document
from services.common.contracts.match import Match
from services.router.evaluate import with_classifier
from services.router.fusion import BlockMatch, CategoryVerdict, ClassifierFinding, ImageFinding, MatchFinding, ScoreSpan, \
    Signals, TextFinding, TextSpanEvidence, Verdict, fuse
from services.router.policy import PolicyDocument, SubcategoryRule, TenantClassifierUse, Thresholds, compile_policy

CATEGORIES = {"harassment": Thresholds(review=0.5, block=0.85), "hate": Thresholds(review=0.5, block=0.85),
              "violence": Thresholds(review=0.5, block=0.85), "self_harm": Thresholds(review=0.4, block=0.8),
              "sexual": Thresholds(review=0.5, block=0.85)}
DEFAULTS = compile_policy(PolicyDocument(name="p", version="1", categories=CATEGORIES))


def shares(**given: float) -> dict[str, float]:
    """Every subcategory's share as a text model gives it: 0 unless named (`self_harm__intent=0.9`)."""
    values = {name: 0.0 for name in SUBCATEGORIES}
    values.update({name.replace("__", "/"): value for name, value in given.items()})
    return values


def text(scores: Mapping[str, float], kinds: Mapping[str, float], body: str = "some text", part: int = 0,
         evidence: tuple[ScoreSpan, ...] = (), matches: tuple[BlockMatch, ...] = ()) -> TextFinding:
    return TextFinding(part, body, scores, matches, evidence=evidence, subcategories=kinds)


def verdict_for(*texts: TextFinding, policy: PolicyDocument | None = None, images: tuple[ImageFinding, ...] = ()) -> Verdict:
    compiled = DEFAULTS if policy is None else compile_policy(policy)
    return fuse(compiled, Signals(texts=texts, images=images))


def category(verdict: Verdict, name: str) -> CategoryVerdict:
    return next(c for c in verdict.categories if c.category == name)


def test_ideation_that_would_block_is_reviewed_and_says_self_harm_intent() -> None:
    verdict = verdict_for(text({"self_harm": 0.95}, shares(self_harm__intent=0.93, self_harm__encouragement=0.04)))
    self_harm = category(verdict, "self_harm")
    assert (verdict.decision, self_harm.action, self_harm.subcategory) == ("review", "review", "self_harm/intent")
    assert self_harm.rule == ("categories.self_harm.block >= 0.8; "
                              "subcategories.self_harm/intent.action=review (share 0.93 >= 0.5)")
    assert self_harm.shares == {"self_harm/intent": pytest.approx(0.93), "self_harm/instructions": 0.0,
                                "self_harm/encouragement": pytest.approx(0.04)}
    assert self_harm.severity == "medium"


def test_instructions_or_encouragement_beside_intent_block_the_most_severe_kind_wins() -> None:
    verdict = verdict_for(text({"self_harm": 0.9}, shares(self_harm__intent=0.8, self_harm__instructions=0.6)))
    assert (category(verdict, "self_harm").action, category(verdict, "self_harm").subcategory) == \
        ("block", "self_harm/instructions")


def test_a_kind_names_but_never_raises_what_the_score_asked_for() -> None:
    """The kind heads only ever saw rows of their parent: at a borderline score their share is no reason
    to block (a review a person checks stays a review)."""
    verdict = verdict_for(text({"self_harm": 0.45}, shares(self_harm__encouragement=0.9)))
    assert (verdict.decision, category(verdict, "self_harm").subcategory) == ("review", "self_harm/encouragement")
    harassment = verdict_for(text({"harassment": 0.52}, shares(harassment__threatening=0.6)))
    assert (category(harassment, "harassment").action, category(harassment, "harassment").subcategory) == \
        ("review", "harassment/threatening")
    assert category(harassment, "harassment").rule == \
        "categories.harassment.review >= 0.5; subcategories.harassment/threatening.action=block (share 0.60 >= 0.5)"


def test_a_category_that_did_not_fire_is_not_refined_and_no_kind_keeps_its_action() -> None:
    quiet = verdict_for(text({"self_harm": 0.2}, shares(self_harm__encouragement=0.99)))
    assert (quiet.decision, category(quiet, "self_harm").subcategory) == ("allow", "")
    undecided = verdict_for(text({"violence": 0.9}, shares(violence__threat=0.3, violence__graphic=0.2)))
    violence = category(undecided, "violence")
    assert (violence.action, violence.subcategory) == ("block", "")
    assert violence.shares["violence/threat"] == pytest.approx(0.3)


def test_graphic_violence_is_reviewed_and_a_threat_blocks() -> None:
    gore = verdict_for(text({"violence": 0.92}, shares(violence__graphic=0.88)))
    assert (gore.decision, category(gore, "violence").subcategory) == ("review", "violence/graphic")
    threat = verdict_for(text({"violence": 0.9}, shares(violence__threat=0.9, violence__graphic=0.6)))
    assert (threat.decision, category(threat, "violence").subcategory) == ("block", "violence/threat")


def test_each_text_is_judged_on_its_own_and_the_most_severe_decides() -> None:
    verdict = verdict_for(text({"self_harm": 0.95}, shares(self_harm__intent=0.9), body="i want to end it", part=0),
                          text({"self_harm": 0.9}, shares(self_harm__instructions=0.95), body="take 40 of them", part=1))
    assert (verdict.decision, category(verdict, "self_harm").subcategory) == ("block", "self_harm/instructions")


def test_a_hit_is_never_lowered_and_keeps_a_kind_that_agrees() -> None:
    kys = BlockMatch("self_harm", "kys", 3, 0, 3, "kys", "rule:self_harm_incitement")
    lowered = verdict_for(text({"self_harm": 0.9}, shares(self_harm__intent=0.7, self_harm__encouragement=0.4),
                               body="kys lol", matches=(kys,)))
    assert (lowered.decision, category(lowered, "self_harm").subcategory) == ("block", "")
    agreeing = verdict_for(text({"self_harm": 0.9}, shares(self_harm__encouragement=0.9), body="kys lol",
                                matches=(kys,)))
    self_harm = category(agreeing, "self_harm")
    assert (self_harm.action, self_harm.subcategory) == ("block", "self_harm/encouragement")
    assert self_harm.rule.startswith("blocklist:rule:self_harm_incitement/severity=high; subcategories.")


def test_an_image_decided_category_is_not_lowered_by_a_caption() -> None:
    verdict = verdict_for(text({"violence": 0.55}, shares(violence__graphic=0.9)),
                          images=(ImageFinding(1, "image_safety", {"violence": 0.97}),))
    assert (verdict.decision, category(verdict, "violence").action) == ("block", "block")
    assert category(verdict, "violence").subcategory == ""


def test_a_policy_sets_its_own_share_and_action_and_the_parent_max_action_still_caps() -> None:
    policy = PolicyDocument(name="p", version="2", categories={**CATEGORIES,
                                                                "violence": Thresholds(review=0.5, max_action="review")},
                            subcategories={"self_harm/intent": SubcategoryRule(share=0.95, action="block"),
                                           "violence/threat": SubcategoryRule(action="block")})
    below_share = verdict_for(text({"self_harm": 0.9}, shares(self_harm__intent=0.9)), policy=policy)
    assert (category(below_share, "self_harm").action, category(below_share, "self_harm").subcategory) == ("block", "")
    capped = verdict_for(text({"violence": 0.9}, shares(violence__threat=0.9)), policy=policy)
    assert (capped.decision, category(capped, "violence").subcategory) == ("review", "violence/threat")


def test_sexual_minors_blocks_even_where_the_policy_lets_sexual_content_through() -> None:
    adult = PolicyDocument(name="adult", version="1", categories={"sexual": Thresholds(review=0.99, max_action="review")})
    reference = ScoreSpan("sexual/minors", 11, 13, 1.0, "minor_reference")
    finding = text({"sexual": 0.8}, shares(sexual__minors=1.0), body="she's only 14 and", evidence=(reference,))
    verdict = verdict_for(finding, policy=adult)
    sexual = category(verdict, "sexual")
    assert (verdict.decision, sexual.action, sexual.subcategory) == ("block", "block", "sexual/minors")
    assert TextSpanEvidence("sexual/minors", 0, 11, 13, "14", lexicon="minor_reference", score=1.0) in verdict.evidence
    # sexual content without a reference to a minor stays as the policy says; a reference alone is nothing
    assert verdict_for(text({"sexual": 0.8}, shares()), policy=adult).decision == "allow"
    assert verdict_for(text({"sexual": 0.1}, shares(sexual__minors=1.0)), policy=adult).decision == "allow"


def test_the_floor_is_a_floor_a_policy_at_review_never_lowers_sexual_content_about_a_minor() -> None:
    reviewed = PolicyDocument(name="p", version="1", categories=CATEGORIES,
                              subcategories={"sexual/minors": SubcategoryRule(action="review")})
    verdict = verdict_for(text({"sexual": 0.95}, shares(sexual__minors=1.0)), policy=reviewed)
    assert (verdict.decision, category(verdict, "sexual").subcategory) == ("block", "sexual/minors")


def test_a_reference_in_another_part_of_the_text_or_another_ocr_line_of_the_image_counts() -> None:
    lenient = PolicyDocument(name="p", version="1", categories={"sexual": Thresholds(review=0.5, max_action="review")})
    two_parts = verdict_for(text({"sexual": 0.95}, shares(), body="explicit", part=0),
                            text({"sexual": 0.8}, shares(sexual__minors=1.0), body="she's 14", part=1), policy=lenient)
    assert (two_parts.decision, category(two_parts, "sexual").subcategory) == ("block", "sexual/minors")
    age = ScoreSpan("sexual/minors", 6, 8, 1.0, "minor_reference")
    lines = [TextFinding(3, "she's 14", {"sexual": 0.1}, (), ocr_line=0, evidence=(age,),
                         subcategories=shares(sexual__minors=1.0)),
             TextFinding(3, "explicit words", {"sexual": 0.9}, (), ocr_line=1, subcategories=shares())]
    verdict = fuse(compile_policy(lenient), Signals(texts=lines))
    assert (verdict.decision, category(verdict, "sexual").subcategory) == ("block", "sexual/minors")
    assert TextSpanEvidence("sexual/minors", 3, 6, 8, "14", lexicon="minor_reference", ocr_line=0, score=1.0) \
        in verdict.evidence


def test_a_tenant_classifier_replacing_the_sexual_score_cannot_switch_the_floor_off() -> None:
    use = TenantClassifierUse(version="68b7e413a4f1", mode="replace")
    finding = text({"sexual": 0.9}, shares(sexual__minors=1.0), body="she's 14 and")
    low = ClassifierFinding(0, -1, "she's 14 and", "classifier.acme.68b7e413a4f1", "68b7e413a4f1", {"sexual": 0.05})
    merged = with_classifier([finding], [low], use)
    assert merged[0].scores["sexual"] == 0.05 and merged[0].shipped_scores == {"sexual": 0.9}
    verdict = fuse(DEFAULTS, Signals(texts=merged))
    assert (verdict.decision, category(verdict, "sexual").subcategory) == ("block", "sexual/minors")


def test_the_floor_cites_the_sexual_content_too_and_a_bank_match_keeps_the_kind() -> None:
    adult = PolicyDocument(name="adult", version="1", categories={"sexual": Thresholds()})
    age = ScoreSpan("sexual/minors", 6, 8, 1.0, "minor_reference")
    explicit = ScoreSpan("sexual", 13, 21, 0.8, "head:tokens")
    verdict = verdict_for(text({"sexual": 0.8}, shares(sexual__minors=1.0), body="she's 14 and explicit",
                               evidence=(age, explicit)), policy=adult)
    assert {(e.category, getattr(e, "text", "")) for e in verdict.evidence} == {("sexual/minors", "14"),
                                                                                ("sexual", "explicit")}
    match = MatchFinding(0, Match(bank="known", bank_version=3, category="sexual", severity="high", action="block",
                                  signal_type="text_sha256", distance=0, content_id="c1"))
    matched = fuse(DEFAULTS, Signals(texts=[text({"sexual": 0.9}, shares(sexual__minors=1.0))], matches=[match]))
    assert category(matched, "sexual").subcategory == "sexual/minors"
    assert category(matched, "sexual").rule.startswith("match:known@3")


def test_no_policy_may_lower_sexual_minors_below_review_or_hide_it() -> None:
    with pytest.raises(ValueError, match="below 'review'"):
        PolicyDocument(name="p", version="1", subcategories={"sexual/minors": SubcategoryRule(action="allow")})
    with pytest.raises(ValueError, match="harder to find"):
        PolicyDocument(name="p", version="1", subcategories={"sexual/minors": SubcategoryRule(share=0.9)})
    reviewed = PolicyDocument(name="p", version="1", categories={"sexual": Thresholds(review=0.5, max_action="allow")},
                              subcategories={"sexual/minors": SubcategoryRule(action="review")})
    verdict = verdict_for(text({"sexual": 0.7}, shares(sexual__minors=1.0)), policy=reviewed)
    assert verdict.decision == "review"


def test_policy_files_name_the_key_of_a_bad_subcategory() -> None:
    base = "name: p\nversion: '1'\n"
    with pytest.raises(ConfigError, match=r"subcategories\.self_harm/ideation.*not a taxonomy subcategory"):
        parse_document("policy", base + "subcategories: {self_harm/ideation: {action: review}}\n", "p.yaml")
    with pytest.raises(ConfigError, match=r"subcategories\.violence/graphic\.share"):
        parse_document("policy", base + "subcategories: {violence/graphic: {share: 0}}\n", "p.yaml")
    with pytest.raises(ConfigError, match=r"subcategories\.sexual/minors\.action"):
        parse_document("policy", base + "subcategories: {sexual/minors: {action: allow}}\n", "p.yaml")
    parsed = parse_document("policy", base + "subcategories: {violence/graphic: {action: block}}\n", "p.yaml")
    assert parsed.compiled is not None
    assert parsed.compiled.document.subcategory_rule("violence/graphic") == (0.5, "block")
    assert parsed.compiled.document.subcategory_rule("self_harm/intent") == (0.5, "review")


def test_policies_written_before_subcategories_keep_their_digest_and_get_the_default_kinds() -> None:
    """Migration: a policy with no `subcategories` key parses as before (its stored version's digest is
    unchanged, so its config file still imports as the same version) and acts through the defaults."""
    written = "name: p\nversion: '1'\ncategories:\n  self_harm: {review: 0.4, block: 0.8}\n"
    old = parse_document("policy", written, "p.yaml")
    explicit_empty = parse_document("policy", written + "subcategories: {}\n", "p.yaml")
    assert old.content_hash == explicit_empty.content_hash
    assert "subcategories" not in old.canonical
    set_one = parse_document("policy", written + "subcategories: {self_harm/intent: {action: block}}\n", "p.yaml")
    assert set_one.content_hash != old.content_hash
    assert old.compiled is not None
    verdict = fuse(old.compiled, Signals(texts=[text({"self_harm": 0.9}, shares(self_harm__intent=0.9))]))
    assert verdict.decision == "review"
    # without shares (a text service that does not give them) the category decides exactly as before
    assert fuse(old.compiled, Signals(texts=[text({"self_harm": 0.9}, {})])).categories == \
        [CategoryVerdict("self_harm", 0.9, "high", "block", "categories.self_harm.block >= 0.8")]


def test_a_minor_named_in_a_caption_beside_an_explicit_image_blocks_even_under_an_adult_policy() -> None:
    adult = PolicyDocument(name="adult", version="1", categories={"sexual": Thresholds(review=0.99, max_action="review")})
    age = ScoreSpan("sexual/minors", 3, 5, 1.0, "minor_reference")
    caption = text({"sexual": 0.05}, shares(sexual__minors=1.0), body="my 14yo stepsister", part=0, evidence=(age,))
    verdict = verdict_for(caption, policy=adult, images=(ImageFinding(1, "opennsfw", {"sexual": 0.97}),))
    assert (verdict.decision, category(verdict, "sexual").subcategory) == ("block", "sexual/minors")
    # without the image (or with a benign one) the caption alone is nothing
    assert verdict_for(caption, policy=adult, images=(ImageFinding(1, "opennsfw", {"sexual": 0.1}),)).decision == "allow"


def test_the_floor_kind_stays_named_when_another_part_or_a_bank_match_decides_a_higher_action() -> None:
    reviewed = PolicyDocument(name="p", version="1", categories=CATEGORIES,
                              subcategories={"sexual/minors": SubcategoryRule(action="review")})
    minor = text({"sexual": 0.6}, shares(sexual__minors=1.0), body="she's 14", part=0)
    explicit = text({"sexual": 0.97}, shares(), body="explicit", part=1)
    verdict = verdict_for(minor, explicit, policy=reviewed)
    assert (verdict.decision, category(verdict, "sexual").subcategory) == ("block", "sexual/minors")
    match = MatchFinding(0, Match(bank="known", bank_version=3, category="sexual", severity="high", action="block",
                                  signal_type="pdq", distance=2, content_id="c1"))
    matched = fuse(compile_policy(reviewed), Signals(texts=[minor], matches=[match]))
    assert (matched.decision, category(matched, "sexual").subcategory) == ("block", "sexual/minors")


def test_a_raised_text_cites_its_own_sexual_span() -> None:
    adult = PolicyDocument(name="adult", version="1", categories={"sexual": Thresholds(review=0.99, max_action="review")})
    first = text({"sexual": 0.995}, shares(), body="explicit one", part=0,
                 evidence=(ScoreSpan("sexual", 0, 8, 0.99, "head:tokens"),))
    second = text({"sexual": 0.7}, shares(sexual__minors=1.0), body="she's 14 and naked", part=1,
                  evidence=(ScoreSpan("sexual/minors", 6, 8, 1.0, "minor_reference"),
                            ScoreSpan("sexual", 13, 18, 0.7, "head:tokens")))
    verdict = verdict_for(first, second, policy=adult)
    assert verdict.decision == "block"
    cited = {(e.category, e.part_index, getattr(e, "text", "")) for e in verdict.evidence}
    assert {("sexual/minors", 1, "14"), ("sexual", 1, "naked")} <= cited

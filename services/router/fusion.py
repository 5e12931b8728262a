"""Fusion: every signal about one item + its policy → one decision with evidence. Pure, no gRPC.

Signals are per-category model scores (per text part, per OCR line, per image) with the spans the
text model says drove them, blocklist and context-rule hits (with original offsets) and stage
failures. For each category the highest score over all parts is compared with the policy's
thresholds; each hit takes the action its severity maps to, at most REVIEW for an ambiguous-tier hit
(`max_action`); a category's own `max_action` caps both; a failed stage adds a degradation, and
REVIEW when the policy says that stage fails closed. The item's decision is the most severe action
over all categories.

Subcategories (`refine_by_subcategory`): when a category with kinds (docs/taxonomy.md) fires from its score
or a hit, the text that decided it (its highest score, a hit counting 1) says which kinds it is: every kind
whose share reaches the policy's `share` counts, and the most severe of their actions becomes the
category's action (an ideation post: `self_harm/intent`, REVIEW; a threatening insult:
`harassment/threatening`, BLOCK). A kind with a floor (`sexual/minors`) also counts when the category
scored at least `DEFAULT_SHARE` although the policy's own thresholds let it through, and its action is
never capped below the floor.

Evidence: a score that takes an action cites the model's spans for that category (`ScoreSpan`), or
the whole text when the model gave none; a hit cites its span; text read by OCR also cites its line.

Example::

    verdict = fuse(policy, Signals(texts=[TextFinding(0, "you idiot", {"harassment": 0.93}, ())]))
    verdict.decision   # "block" with default thresholds
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from services.common.contracts.match import Match
from services.common.contracts.text import EvidenceSpan, LexiconHit
from services.common.taxonomy import SUBCATEGORIES, subcategories_of
from services.router.policy import (ACTION_RANK, DEFAULT_SHARE, SEVERITY_NAMES, Action, CompiledPolicy, PolicyDocument,
                                    Thresholds)

#: The stages of the tenant's own classifier: on text parts, and on OCR lines.
CLASSIFIER_STAGES = ("classifier", "ocr_text_classifier")
#: The known-content matching stage.
MATCH_STAGE = "match"
#: Stages that only add signals (their own failure mode applies even to an unloaded model: `model_unloaded`
#: is for the stages every decision needs).
OPTIONAL_STAGES = (*CLASSIFIER_STAGES, MATCH_STAGE)
#: The stage whose failure mode applies when a stage fails ("ocr_text" and the semantic second passes
#: follow the text service).
FAILURE_MODE_OF_STAGE = {"text": "text", "ocr_text": "text", "text_semantic": "text", "ocr_text_semantic": "text",
                         "vision": "vision", "ocr": "ocr", MATCH_STAGE: "match",
                         **{stage: "classifier" for stage in CLASSIFIER_STAGES}}
#: A hit whose lexicon starts with this is a context rule of the text model (`rule:<id>`).
RULE_PREFIX = "rule:"
#: Thresholds of a category the policy does not list: its score never acts, its hits are not capped.
NO_THRESHOLDS = Thresholds()
#: The categories that have kinds (taxonomy order).
_PARENTS: tuple[str, ...] = tuple(dict.fromkeys(kind.parent for kind in SUBCATEGORIES.values()))


#: A blocklist or context-rule hit in a text (offsets into that text's original form): the text
#: contract's hit record, whose `source` names the lexicon (`default`, `policy:<name>`) or the rule
#: (`rule:<id>`); `max_action` "review" caps an ambiguous-tier hit at REVIEW.
BlockMatch = LexiconHit


#: A span the text model says drove a category's score (offsets into that text's original form): the
#: text contract's evidence record, as the pipeline decodes it.
ScoreSpan = EvidenceSpan


@dataclass(frozen=True)
class TextFinding:
    """Scores, hits and score spans for one text: a text part (ocr_line = -1) or one OCR line of an image part."""

    part_index: int
    text: str
    scores: Mapping[str, float]
    matches: Sequence[BlockMatch]
    ocr_line: int = -1
    evidence: Sequence[ScoreSpan] = ()
    #: Share of each subcategory (taxonomy name -> 0..1), as the text model gave it.
    subcategories: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ImageFinding:
    part_index: int
    model: str
    scores: Mapping[str, float]


@dataclass(frozen=True)
class OcrLineFinding:
    part_index: int
    line_index: int
    text: str
    confidence: float
    polygon: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class StageFailure:
    """A stage that failed, or (`skipped`) that the scheduler skipped under overload for this tenant.
    `unloaded`: the service answered that it does not serve the model (policy `failure.model_unloaded`)."""

    stage: str
    reason: str
    skipped: bool = False
    unloaded: bool = False
    #: For a tenant classifier's stage: the version that failed (a policy reading another one ignores it).
    version: str = ""


@dataclass(frozen=True)
class ClassifierFinding:
    """The tenant classifier's scores for one text: a text part (ocr_line = -1) or one OCR line, from the
    classifier at `version`. Kept apart from the text models' findings: only a policy that reads that
    version sees them (services.router.evaluate merges them into its view)."""

    part_index: int
    ocr_line: int
    text: str
    model: str
    version: str
    scores: Mapping[str, float]


@dataclass(frozen=True)
class MatchFinding:
    """One bank's match of one part (a text part or an image), as the match service answered it."""

    part_index: int
    match: Match


@dataclass(frozen=True)
class Signals:
    texts: Sequence[TextFinding] = ()
    images: Sequence[ImageFinding] = ()
    ocr_lines: Sequence[OcrLineFinding] = ()
    failures: Sequence[StageFailure] = ()
    classified: Sequence[ClassifierFinding] = ()
    matches: Sequence[MatchFinding] = ()


@dataclass(frozen=True)
class CategoryVerdict:
    category: str
    score: float
    severity: str  # "none" | "low" | "medium" | "high"
    action: Action
    rule: str
    #: The kind that decided the action ("" when none counted: the score and hits decided alone).
    subcategory: str = ""
    #: The deciding text's share of each of this category's kinds (empty when no text decided it).
    shares: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TextSpanEvidence:
    category: str
    part_index: int
    start: int
    end: int
    text: str
    matched_term: str = ""
    lexicon: str = ""
    ocr_line: int = -1
    score: float = 0.0


@dataclass(frozen=True)
class OcrLineEvidence:
    category: str
    part_index: int
    line: OcrLineFinding


@dataclass(frozen=True)
class ImageScoreEvidence:
    category: str
    part_index: int
    model: str
    scores: Mapping[str, float]


@dataclass(frozen=True)
class MatchEvidence:
    """The part matched known content: which bank (at which version), by which signal, how close, what."""

    category: str
    part_index: int
    bank: str
    bank_version: int
    signal_type: str
    distance: int
    content_id: str


Evidence = TextSpanEvidence | OcrLineEvidence | ImageScoreEvidence | MatchEvidence


@dataclass(frozen=True)
class Degradation:
    stage: str
    reason: str
    handling: str  # "fail_open" | "fail_closed" | "skipped"


@dataclass
class Verdict:
    decision: Action
    categories: list[CategoryVerdict] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    degradations: list[Degradation] = field(default_factory=list)


def _severity_for(action: Action, score: float) -> str:
    if action == "block":
        return "high"
    if action == "review":
        return "medium"
    return "low" if score >= 0.2 else "none"


def _stronger(a: Action, b: Action) -> Action:
    return a if ACTION_RANK[a] >= ACTION_RANK[b] else b


class _EvidenceList:
    """Evidence in the order it was found; each OCR line cited once per category."""

    def __init__(self, lines: Sequence[OcrLineFinding]) -> None:
        self.items: list[Evidence] = []
        self._lines = {(line.part_index, line.line_index): line for line in lines}
        self._cited: set[tuple[str, int, int]] = set()

    def add_text(self, evidence: TextSpanEvidence) -> None:
        self.items.append(evidence)
        key = (evidence.category, evidence.part_index, evidence.ocr_line)
        line = self._lines.get(key[1:])
        if line is not None and key not in self._cited:
            self._cited.add(key)
            self.items.append(OcrLineEvidence(evidence.category, evidence.part_index, line))


def fuse(policy: CompiledPolicy, signals: Signals) -> Verdict:
    """Decide one item (see module docstring). Deterministic for the same inputs."""
    document = policy.document
    evidence = _EvidenceList(signals.ocr_lines)
    verdicts = _score_verdicts(document, signals, evidence)
    _apply_hits(document, signals.texts, verdicts, evidence)
    refine_by_subcategory(document, signals.texts, verdicts, evidence)
    _apply_matches(document, signals.matches, verdicts, evidence)
    _report_images(signals.images, evidence)
    decision: Action = "allow"
    for verdict in verdicts.values():
        decision = _stronger(decision, verdict.action)
    decision, degradations = _degrade(document, signals.failures, decision)
    return Verdict(decision, sorted(verdicts.values(), key=lambda v: v.category), evidence.items, degradations)


def _score_verdicts(document: PolicyDocument, signals: Signals, evidence: _EvidenceList) -> dict[str, CategoryVerdict]:
    """Per policy category: the best score over every text and image, its (capped) action, and the
    evidence of each part whose own score takes an action."""
    verdicts: dict[str, CategoryVerdict] = {}
    for category, thresholds in document.categories.items():
        text_scores = [(f.scores[category], f) for f in signals.texts if category in f.scores]
        image_scores = [(f.scores[category], f) for f in signals.images if category in f.scores]
        best = max([score for score, _ in text_scores] + [score for score, _ in image_scores], default=0.0)
        raw, rule = thresholds.action_for(best)
        action = thresholds.capped(raw)
        if action != raw:
            rule = f"{rule}, max_action {action}"
        verdicts[category] = CategoryVerdict(category, best, _severity_for(action, best), action,
                                             f"categories.{category}.{rule}" if rule else "")
        if action == "allow":
            continue
        for score, finding in text_scores:
            if thresholds.action_for(score)[0] != "allow":
                for span in _score_spans(category, score, finding):
                    evidence.add_text(span)
        for score, image in image_scores:
            if thresholds.action_for(score)[0] != "allow":
                evidence.items.append(ImageScoreEvidence(category, image.part_index, image.model, image.scores))
    return verdicts


def _score_spans(category: str, score: float, finding: TextFinding) -> list[TextSpanEvidence]:
    """The spans behind `finding`'s score in `category` (the model's, else the whole text)."""
    spans = [span for span in finding.evidence if span.category == category and 0 <= span.start < span.end <= len(finding.text)]
    if not spans:
        return [TextSpanEvidence(category, finding.part_index, 0, len(finding.text), finding.text,
                                 ocr_line=finding.ocr_line, score=score)]
    return [TextSpanEvidence(category, finding.part_index, span.start, span.end, finding.text[span.start:span.end],
                             lexicon=span.source, ocr_line=finding.ocr_line, score=span.score) for span in spans]


def _hit_action(document: PolicyDocument, match: BlockMatch) -> Action:
    """The action one hit takes: its severity's, at most its own `max_action`, at most its category's."""
    action = document.blocklist.actions.for_level(match.severity)
    if match.max_action == "review":
        action = "review" if action == "block" else action
    return document.categories.get(match.category, NO_THRESHOLDS).capped(action)


def _apply_hits(document: PolicyDocument, texts: Sequence[TextFinding], verdicts: dict[str, CategoryVerdict],
                evidence: _EvidenceList) -> None:
    """Every blocklist and rule hit raises its category to the hit's action and cites its span."""
    for finding in texts:
        for match in finding.matches:
            action = _hit_action(document, match)
            severity = SEVERITY_NAMES.get(match.severity, "high")
            previous = verdicts.get(match.category)
            if previous is None or ACTION_RANK[action] > ACTION_RANK[previous.action] or (
                    previous.action == action and previous.score < 1.0):
                capped = action != document.blocklist.actions.for_level(match.severity)
                cap = f"/max_action={action}" if capped else ""
                verdicts[match.category] = CategoryVerdict(match.category, 1.0, severity, action,
                                                           f"blocklist:{match.source}/severity={severity}{cap}")
            evidence.add_text(TextSpanEvidence(match.category, finding.part_index, match.start, match.end, match.text,
                                               matched_term=match.term, lexicon=match.source,
                                               ocr_line=finding.ocr_line, score=1.0))


def _deciding_text(category: str, texts: Sequence[TextFinding], minimum: float, hits: bool) -> TextFinding | None:
    """The text whose own signal for `category` is strongest: its score, or 1 for a hit of the category
    (when `hits`); only a text whose signal reaches `minimum` (the lowest score that acts), so an
    image-decided category is not refined by a benign caption."""
    best: tuple[float, TextFinding] | None = None
    for finding in texts:
        strength = float(finding.scores.get(category, 0.0))
        if hits and any(m.category == category for m in finding.matches):
            strength = 1.0
        if strength >= minimum and (best is None or strength > best[0]):
            best = (strength, finding)
    return None if best is None else best[1]


def refine_by_subcategory(document: PolicyDocument, texts: Sequence[TextFinding], verdicts: dict[str, CategoryVerdict],
                          evidence: _EvidenceList) -> None:
    """Each category with kinds takes the action of the kinds its deciding text is (module docstring)."""
    for category in _PARENTS:
        kinds = subcategories_of(category)
        verdict = verdicts.get(category)
        fired = verdict is not None and verdict.action != "allow"
        if not fired and not any(k.floor for k in kinds):
            continue
        thresholds = document.categories.get(category, NO_THRESHOLDS)
        # A category that fired is refined by the text that fired it; one that did not, only for a kind
        # with a floor, by a text whose score reaches the calibrated operating point.
        acting = [t for t in (thresholds.review, thresholds.block) if t is not None]
        minimum = min([*acting, DEFAULT_SHARE]) if fired else DEFAULT_SHARE
        finding = _deciding_text(category, texts, minimum, hits=fired)
        if finding is None:
            continue
        shares = {k.name: float(finding.subcategories[k.name]) for k in kinds if k.name in finding.subcategories}
        counted: list[tuple[int, float, str, Action]] = []
        for kind in kinds:
            if not fired and kind.floor is None:
                continue
            share, rule_action = document.subcategory_rule(kind.name)
            if shares.get(kind.name, 0.0) < share:
                continue
            action = rule_action if kind.floor else thresholds.capped(rule_action)
            counted.append((ACTION_RANK[action], shares[kind.name], kind.name, action))
        score = verdict.score if verdict is not None else float(finding.scores.get(category, 0.0))
        if not counted:
            if verdict is not None and shares:
                verdicts[category] = replace(verdict, shares=shares)
            continue
        _, share, name, action = max(counted)
        rule = f"subcategories.{name}.action={action} (share {share:.2f} >= {document.subcategory_rule(name)[0]:g})"
        before = f"{verdict.rule}; " if verdict is not None and verdict.rule else ""
        verdicts[category] = CategoryVerdict(category, score, _severity_for(action, score), action, before + rule,
                                             name, shares)
        for span in finding.evidence:
            if span.category == name and 0 <= span.start < span.end <= len(finding.text):
                evidence.add_text(TextSpanEvidence(name, finding.part_index, span.start, span.end,
                                                   finding.text[span.start:span.end], lexicon=span.source,
                                                   ocr_line=finding.ocr_line, score=share))


def match_action(document: PolicyDocument, match: Match) -> Action | None:
    """What one bank match does under `document` (None: nothing; a negative or suppressed match never
    acts): the policy's action for the bank, else the bank's own, capped by the category's `max_action`."""
    if match.negative or match.suppressed:
        return None
    rules = document.matches
    chosen = rules.banks.get(match.bank, match.action) if rules is not None else match.action
    if chosen not in ("block", "review"):
        return None
    action: Action = "block" if chosen == "block" else "review"
    return document.categories.get(match.category, NO_THRESHOLDS).capped(action)


def _apply_matches(document: PolicyDocument, matches: Sequence[MatchFinding], verdicts: dict[str, CategoryVerdict],
                   evidence: _EvidenceList) -> None:
    """Every acting bank match raises its category to its action and cites the bank, version and signal."""
    for finding in matches:
        match = finding.match
        action = match_action(document, match)
        if action is None:
            continue
        previous = verdicts.get(match.category)
        if previous is None or ACTION_RANK[action] > ACTION_RANK[previous.action] or (
                previous.action == action and previous.score < 1.0):
            verdicts[match.category] = CategoryVerdict(match.category, 1.0, match.severity, action,
                                                       f"match:{match.bank}@{match.bank_version}/{match.signal_type}")
        evidence.items.append(MatchEvidence(match.category, finding.part_index, match.bank, match.bank_version,
                                            match.signal_type, match.distance, match.content_id))


def _report_images(images: Sequence[ImageFinding], evidence: _EvidenceList) -> None:
    """Image-level scores are always reported, once per image not already cited for a category."""
    cited = {e.part_index for e in evidence.items if isinstance(e, ImageScoreEvidence)}
    for image in images:
        if image.part_index not in cited:
            evidence.items.append(ImageScoreEvidence("", image.part_index, image.model, image.scores))


def _degrade(document: PolicyDocument, failures: Sequence[StageFailure], decision: Action) -> tuple[Action, list[Degradation]]:
    """A degradation per failed or skipped stage; a failed stage that fails closed raises the decision to REVIEW."""
    degradations = []
    for failure in failures:
        if failure.skipped:  # a degradation the tenant opted into: reported, never escalated
            degradations.append(Degradation(failure.stage, failure.reason, "skipped"))
            continue
        mode = getattr(document.failure, FAILURE_MODE_OF_STAGE.get(failure.stage, "text"))
        if failure.unloaded and document.failure.model_unloaded == "closed" and failure.stage not in OPTIONAL_STAGES:
            mode = "closed"  # an unloaded model is never a silent fail-open unless the policy says so
        degradations.append(Degradation(failure.stage, failure.reason, f"fail_{mode}"))
        if mode == "closed":
            decision = _stronger(decision, "review")
    return decision, degradations

"""Fusion: every signal about one item + its policy → one decision with evidence. Pure, no gRPC.

Signals are per-category model scores (per text part, per OCR line, per image) with the spans the
text model says drove them, blocklist and context-rule hits (with original offsets) and stage
failures. For each category the highest score over all parts is compared with the policy's
thresholds; each hit takes the action its severity maps to, at most REVIEW for an ambiguous-tier hit
(`max_action`); a category's own `max_action` caps both; a failed stage adds a degradation, and
REVIEW when the policy says that stage fails closed. The item's decision is the most severe action
over all categories.

Subcategories (`refine_by_subcategory`, docs/taxonomy.md): each text is judged on its own. Where a
text's own score takes an action in a category with kinds, the kinds whose share reaches the policy's
`share` count, and the most severe of their actions may *lower* what that score asked for (an ideation
post: `self_harm/intent`, REVIEW instead of BLOCK), never raise it; a hit's action is never lowered. A
kind with a floor (`sexual/minors`: a reference to a minor anywhere in the item) *raises* the texts'
action to the kind's whenever the item is sexual content: a text's own signal acts, or a text's score
(the shipped models', whatever a tenant classifier replaced) or an image's reaches `DEFAULT_SHARE` under
a lenient policy. The category takes the most severe action over its texts, images and hits; the kind of
the text that decided it is named, and a floor kind whenever it counts. A kind never lowers an image's
action or another text's.

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
    #: The shipped text models' scores where a tenant classifier replaced them (`mode: replace`): the floor of
    #: `sexual/minors` reads these, so a tenant's classifier cannot switch it off. None: `scores` are theirs.
    shipped_scores: Mapping[str, float] | None = None


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
    #: For an image part: its frame the evidence is from (0: a still image, or an animation's first frame).
    frame: int = 0


@dataclass(frozen=True)
class OcrLineEvidence:
    category: str
    part_index: int
    line: OcrLineFinding
    #: For an image part: its frame the evidence is from (0: a still image, or an animation's first frame).
    frame: int = 0


@dataclass(frozen=True)
class ImageScoreEvidence:
    category: str
    part_index: int
    model: str
    scores: Mapping[str, float]
    #: For an image part: its frame the evidence is from (0: a still image, or an animation's first frame).
    frame: int = 0


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
    #: For an image part: its frame the evidence is from (0: a still image, or an animation's first frame).
    frame: int = 0


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
    refine_by_subcategory(document, signals.texts, signals.images, verdicts, evidence)
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


@dataclass(frozen=True)
class _TextJudgement:
    """One text's own action in a category with kinds; the kind that set or named it, with its share; and
    `rule`: why, when the kind changed the action (else "": the category's rule stands)."""

    action: Action
    kind: str
    share: float
    finding: TextFinding
    rule: str
    note: str
    #: A floor kind raised the text above what its own signals asked for.
    raised: bool = False


def _judge_text(document: PolicyDocument, category: str, finding: TextFinding, floor_shares: Mapping[str, float],
                item_content: bool) -> _TextJudgement:
    """`finding`'s own action in `category` (module docstring): its score's action lowered by the kinds that
    count, its hits' actions, raised by a floor kind. `floor_shares`: the floor kinds' shares over the item;
    `item_content`: another text or an image of the item is content of the category."""
    thresholds = document.categories.get(category, NO_THRESHOLDS)
    score = float(finding.scores.get(category, 0.0))
    raw, rule = thresholds.action_for(score)
    score_action = thresholds.capped(raw)
    hit_action: Action = "allow"
    for match in finding.matches:
        if match.category == category:
            hit_action = _stronger(hit_action, _hit_action(document, match))
    action, kind, share, why, note = score_action, "", 0.0, "", ""
    counted = []
    for sub in subcategories_of(category):
        if sub.floor is None and score_action != "allow":
            needed, sub_action = document.subcategory_rule(sub.name)
            given = float(finding.subcategories.get(sub.name, 0.0))
            if given >= needed:
                counted.append((ACTION_RANK[sub_action], given, sub.name, sub_action, needed))
    if counted:
        _, share, kind, sub_action, needed = max(counted)
        note = f"subcategories.{kind}.action={sub_action} (share {share:.2f} >= {needed:g})"
        if ACTION_RANK[sub_action] < ACTION_RANK[action]:
            action, why = sub_action, f"categories.{category}.{rule}; {note}"
        if ACTION_RANK[hit_action] > ACTION_RANK[action]:  # a hit is never lowered; it keeps the kind if that agrees
            action, why = hit_action, ""
            if ACTION_RANK[sub_action] < ACTION_RANK[hit_action]:
                kind, share, note = "", 0.0, ""
    action = _stronger(action, hit_action)
    raised = False
    for sub in subcategories_of(category):
        if sub.floor is None or not (item_content or _is_content(document, category, finding)):
            continue
        needed, sub_action = document.subcategory_rule(sub.name)
        given = float(floor_shares.get(sub.name, 0.0))
        if given >= needed:  # named whenever it counts (a platform may have to report it), raising if below
            note = f"subcategories.{sub.name}.action={sub_action} (share {given:.2f} >= {needed:g}, floor {sub.floor})"
            if ACTION_RANK[sub_action] > ACTION_RANK[action]:
                action, why, raised = sub_action, f"categories.{category}: {note}", True
            kind, share = sub.name, given
    return _TextJudgement(action, kind, share, finding, why, note, raised)


def _is_content(document: PolicyDocument, category: str, finding: TextFinding) -> bool:
    """Whether `finding` is content of `category` for a floor kind: its own score or a hit of it acts, or its
    score (the shipped models', where a tenant classifier replaced it) reaches `DEFAULT_SHARE`."""
    thresholds = document.categories.get(category, NO_THRESHOLDS)
    score = float(finding.scores.get(category, 0.0))
    if thresholds.capped(thresholds.action_for(score)[0]) != "allow":
        return True
    if any(m.category == category and _hit_action(document, m) != "allow" for m in finding.matches):
        return True
    return max(score, float((finding.shipped_scores or {}).get(category, 0.0))) >= DEFAULT_SHARE


def refine_by_subcategory(document: PolicyDocument, texts: Sequence[TextFinding], images: Sequence[ImageFinding],
                          verdicts: dict[str, CategoryVerdict], evidence: _EvidenceList) -> None:
    """Each category with kinds takes the most severe of its texts' own judgements (`_judge_text`), its
    images' actions and its hits' actions (module docstring)."""
    floor_kinds = [sub.name for sub in SUBCATEGORIES.values() if sub.floor is not None]
    # A floor kind reads the whole item: a caption's "14yo" beside an explicit image, an age on one OCR line
    # and the content on the next, a story's first part and its third.
    item_floor = {name: max((float(f.subcategories.get(name, 0.0)) for f in texts), default=0.0) for name in floor_kinds}
    for category in _PARENTS:
        verdict = verdicts.get(category)
        candidates = [f for f in texts if category in f.scores or any(m.category == category for m in f.matches)]
        if not candidates:
            continue
        thresholds = document.categories.get(category, NO_THRESHOLDS)
        image_action: Action = "allow"
        image_content = False
        for image in images:
            if category in image.scores:
                image_action = _stronger(image_action, thresholds.capped(thresholds.action_for(image.scores[category])[0]))
                image_content = image_content or float(image.scores[category]) >= DEFAULT_SHARE
        text_content = any(_is_content(document, category, f) for f in candidates)
        judged = [_judge_text(document, category, finding, item_floor, image_content or text_content)
                  for finding in candidates]
        best = max(judged, key=lambda j: (ACTION_RANK[j.action], bool(j.kind), j.share))
        final = _stronger(best.action, image_action)
        before: Action = verdict.action if verdict is not None else "allow"
        floored = [j for j in judged if j.kind and SUBCATEGORIES[j.kind].floor is not None]
        if floored:  # a floor kind is named whatever decided (a platform may have to report it)
            best = max(floored, key=lambda j: (ACTION_RANK[j.action], float(j.finding.subcategories.get(j.kind, 0.0))))
        named = best.kind if best.action == final or floored else ""
        shares = {sub.name: float(best.finding.subcategories[sub.name]) for sub in subcategories_of(category)
                  if sub.name in best.finding.subcategories} if final != "allow" else {}
        if final == before and not named:
            if verdict is not None and shares:
                verdicts[category] = replace(verdict, shares=shares)
            continue
        score = max(verdict.score if verdict is not None else 0.0, float(best.finding.scores.get(category, 0.0)))
        if best.rule and final == best.action:
            rule = best.rule
        else:
            rule = "; ".join(part for part in (verdict.rule if verdict is not None else "", best.note if named else "")
                             if part)
        verdicts[category] = CategoryVerdict(category, score, _severity_for(final, score), final, rule, named, shares)
        if named:
            _cite_kind(category, named, best, texts, raised=best.raised, evidence=evidence)


def _cite_kind(category: str, kind: str, best: _TextJudgement, texts: Sequence[TextFinding], *, raised: bool,
               evidence: _EvidenceList) -> None:
    """The evidence of a kind that decided a category: its spans in the deciding text (for a floor kind, in
    every text of the item: other parts, the OCR lines of an image), and the category's own spans in the
    deciding text when the kind raised it (`raised`: its own signals asked for less)."""
    finding = best.finding
    if raised:
        for cited in _score_spans(category, float(finding.scores.get(category, 0.0)), finding):
            evidence.add_text(cited)
    floor = SUBCATEGORIES[kind].floor is not None
    for other in texts:
        if other is finding or floor:
            for span in other.evidence:
                if span.category == kind and 0 <= span.start < span.end <= len(other.text):
                    evidence.add_text(TextSpanEvidence(kind, other.part_index, span.start, span.end,
                                                       other.text[span.start:span.end], lexicon=span.source,
                                                       ocr_line=other.ocr_line, score=best.share))


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
            # a kind stays named: at the same action, or a floor kind whatever the match's action
            kept = previous if previous is not None and (previous.action == action or (
                previous.subcategory and SUBCATEGORIES[previous.subcategory].floor is not None)) else None
            verdicts[match.category] = CategoryVerdict(match.category, 1.0, match.severity, action,
                                                       f"match:{match.bank}@{match.bank_version}/{match.signal_type}",
                                                       kept.subcategory if kept else "", kept.shares if kept else {})
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

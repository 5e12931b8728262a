"""Fusion: every signal about one item + its policy → one decision with evidence. Pure, no gRPC.

Signals are model scores (per text part, per OCR line, per image), blocklist hits (with original
offsets) and stage failures. For each category the highest score over all parts is compared with the
policy's thresholds; each blocklist hit takes the action its severity maps to; a failed stage adds a
degradation, and REVIEW when the policy says that stage fails closed. The item's decision is the most
severe action over all categories.

Example::

    verdict = fuse(policy, Signals(texts=[TextFinding(0, "you idiot", {"hate": 0.93}, ())]))
    verdict.decision   # "block" with default thresholds
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from services.router.policy import ACTION_RANK, SEVERITY_NAMES, Action, CompiledPolicy

#: The stage whose failure mode applies when a stage fails ("ocr_text" follows the text service).
FAILURE_MODE_OF_STAGE = {"text": "text", "ocr_text": "text", "vision": "vision", "ocr": "ocr"}


@dataclass(frozen=True)
class BlockMatch:
    """A blocklist hit in a text (offsets into that text's original form)."""

    category: str
    term: str
    severity: int
    start: int
    end: int
    text: str
    lexicon: str


@dataclass(frozen=True)
class TextFinding:
    """Scores and hits for one text: a text part (ocr_line = -1) or one OCR line of an image part."""

    part_index: int
    text: str
    scores: Mapping[str, float]
    matches: Sequence[BlockMatch]
    ocr_line: int = -1


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


@dataclass(frozen=True)
class Signals:
    texts: Sequence[TextFinding] = ()
    images: Sequence[ImageFinding] = ()
    ocr_lines: Sequence[OcrLineFinding] = ()
    failures: Sequence[StageFailure] = ()


@dataclass(frozen=True)
class CategoryVerdict:
    category: str
    score: float
    severity: str  # "none" | "low" | "medium" | "high"
    action: Action
    rule: str


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


Evidence = TextSpanEvidence | OcrLineEvidence | ImageScoreEvidence


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


def fuse(policy: CompiledPolicy, signals: Signals) -> Verdict:
    """Decide one item (see module docstring). Deterministic for the same inputs."""
    document = policy.document
    verdicts: dict[str, CategoryVerdict] = {}
    evidence: list[Evidence] = []
    lines_cited: set[tuple[str, int, int]] = set()
    lines = {(line.part_index, line.line_index): line for line in signals.ocr_lines}

    def cite_line(category: str, part_index: int, line_index: int) -> None:
        line = lines.get((part_index, line_index))
        if line is not None and (category, part_index, line_index) not in lines_cited:
            lines_cited.add((category, part_index, line_index))
            evidence.append(OcrLineEvidence(category, part_index, line))

    for category, thresholds in document.categories.items():
        text_scores = [(f.scores[category], f) for f in signals.texts if category in f.scores]
        image_scores = [(f.scores[category], f) for f in signals.images if category in f.scores]
        best = max([score for score, _ in text_scores] + [score for score, _ in image_scores], default=0.0)
        action, rule = thresholds.action_for(best)
        verdicts[category] = CategoryVerdict(category, best, _severity_for(action, best), action,
                                             f"categories.{category}.{rule}" if rule else "")
        if action == "allow":
            continue
        for score, finding in text_scores:
            if thresholds.action_for(score)[0] != "allow":
                evidence.append(TextSpanEvidence(category, finding.part_index, 0, len(finding.text), finding.text,
                                                 ocr_line=finding.ocr_line, score=score))
                if finding.ocr_line >= 0:
                    cite_line(category, finding.part_index, finding.ocr_line)
        for score, image in image_scores:
            if thresholds.action_for(score)[0] != "allow":
                evidence.append(ImageScoreEvidence(category, image.part_index, image.model, image.scores))

    actions = document.blocklist.actions
    for finding in signals.texts:
        for match in finding.matches:
            action = actions.for_level(match.severity)
            severity = SEVERITY_NAMES.get(match.severity, "high")
            previous = verdicts.get(match.category)
            if previous is None or ACTION_RANK[action] > ACTION_RANK[previous.action] or (
                    previous.action == action and previous.score < 1.0):
                verdicts[match.category] = CategoryVerdict(match.category, 1.0, severity, action,
                                                           f"blocklist:{match.lexicon}/severity={severity}")
            evidence.append(TextSpanEvidence(match.category, finding.part_index, match.start, match.end, match.text,
                                             matched_term=match.term, lexicon=match.lexicon, ocr_line=finding.ocr_line,
                                             score=1.0))
            if finding.ocr_line >= 0:
                cite_line(match.category, finding.part_index, finding.ocr_line)

    cited_images = {(e.part_index) for e in evidence if isinstance(e, ImageScoreEvidence)}
    for image in signals.images:
        if image.part_index not in cited_images:  # image-level scores are always reported
            evidence.append(ImageScoreEvidence("", image.part_index, image.model, image.scores))

    decision: Action = "allow"
    for verdict in verdicts.values():
        decision = _stronger(decision, verdict.action)

    degradations = []
    for failure in signals.failures:
        if failure.skipped:  # a degradation the tenant opted into: reported, never escalated
            degradations.append(Degradation(failure.stage, failure.reason, "skipped"))
            continue
        mode = getattr(document.failure, FAILURE_MODE_OF_STAGE.get(failure.stage, "text"))
        if failure.unloaded and document.failure.model_unloaded == "closed":
            mode = "closed"  # an unloaded model is never a silent fail-open unless the policy says so
        degradations.append(Degradation(failure.stage, failure.reason, f"fail_{mode}"))
        if mode == "closed":
            decision = _stronger(decision, "review")
    return Verdict(decision, sorted(verdicts.values(), key=lambda v: v.category), evidence, degradations)

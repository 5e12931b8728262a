"""Moderation policies: per-category thresholds → actions, blocklist rules, failure handling.

A policy is a YAML document (`config/policies/<name>.yaml`), validated on load with errors that name
the file and the key. Loading compiles it (tenant blocklists into an Aho-Corasick automaton) so the
request path only reads an immutable `CompiledPolicy`. Files and stored versions are parsed by
`services/router/control/versions.py` (`parse_document`), the one loading path.

Example (`config/policies/default.yaml`)::

    name: default
    version: "2026-12-01.1"
    profile: balanced                 # fast | balanced | accurate (services/router/profiles.py)
    balanced: {low: 0.2, high: 0.8, escalate_targeted: true}
    categories:
      harassment: {review: 0.5, block: 0.85}
      hate: {review: 0.5, block: 0.85}
      profanity: {review: 0.6, max_action: review}   # swearing alone is at most reviewed
    blocklist:
      actions: {low: review, medium: block, high: block}
      custom:
        brand_safety: {severity: high, terms: ["competitor-x"]}
    failure: {text: closed, vision: open, ocr: open, classifier: open, model_unloaded: closed}
    audit: {include_content: false}   # the audit log keeps no raw text unless this is true

Subcategories (docs/taxonomy.md) refine a category that fires: `subcategories: {self_harm/intent: {share: 0.5,
action: review}}` (`SubcategoryRule`: a kind lowers what a text's score asked for, `sexual/minors` raises);
a policy that does not name one gets the taxonomy's default action for it, and no policy may give
`sexual/minors` less than REVIEW.

A policy may also read the requesting tenant's own classifier (`tenant_classifier: {version: 68b7e413a4f1}`,
`TenantClassifierUse`; docs/tenant-classifiers.md) and set thresholds on the custom categories it was
trained for (`categories: {custom.crypto_scam: {review: 0.5, block: 0.9}}`), and match known content
against the tenant's hash banks (`matches: {banks: {spam_waves: review}}`, `MatchRules`; docs/matching.md).

Old (taxonomy 1) files keep loading: `services.router.policy_migration` (docs/taxonomy.md, "Migration").
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field, replace
from typing import Literal, Mapping

from services.common.config import FieldError
from services.common.contracts.classifier import is_version
from services.common.taxonomy import CATEGORIES, CUSTOM_PREFIX, SUBCATEGORIES, is_well_formed_custom_category
from services.common.text_match.lexicon import Lexicon, LexiconEntry
from services.router.policy_migration import migrate_categories

log = logging.getLogger("services.router.policy")

Action = Literal["allow", "review", "block"]
#: Which text model(s) a policy's texts go through (services/router/profiles.py).
Profile = Literal["fast", "balanced", "accurate"]
PROFILES: tuple[Profile, ...] = ("fast", "balanced", "accurate")
FailureMode = Literal["open", "closed"]
SeverityName = Literal["low", "medium", "high"]
ACTION_RANK: dict[str, int] = {"allow": 0, "review": 1, "block": 2}
#: Lexicon severity levels (services.common.text_match.lexicon uses 1..3).
SEVERITY_LEVELS: dict[str, int] = {"low": 1, "medium": 2, "high": 3}
SEVERITY_NAMES: dict[int, str] = {level: name for name, level in SEVERITY_LEVELS.items()}


@dataclass(frozen=True)
class Thresholds:
    """Scores at or above `review` / `block` get that action. Omit one to never take that action.

    `max_action` caps what this category may do from any signal (score or blocklist hit): e.g.
    `profanity: {review: 0.6, max_action: review}` reviews swearing but never blocks it.
    """

    review: float | None = None
    block: float | None = None
    max_action: Action = "block"

    def __post_init__(self) -> None:
        for name in ("review", "block"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {value}")
        if self.review is not None and self.block is not None and self.review > self.block:
            raise ValueError(f"review ({self.review}) must not be above block ({self.block})")
        if self.block is not None and self.max_action != "block":
            raise ValueError(f"block ({self.block}) is set but max_action is {self.max_action!r}: "
                             f"remove block or raise max_action")

    @property
    def acts(self) -> bool:
        """True when some score can change the decision (a review or block threshold is set)."""
        return self.review is not None or self.block is not None

    def action_for(self, score: float) -> tuple[Action, str]:
        """(action, the comparison that decided it) for `score`."""
        if self.block is not None and score >= self.block:
            return "block", f"block >= {self.block:g}"
        if self.review is not None and score >= self.review:
            return "review", f"review >= {self.review:g}"
        return "allow", ""

    def capped(self, action: Action) -> Action:
        """`action`, lowered to `max_action`."""
        return action if ACTION_RANK[action] <= ACTION_RANK[self.max_action] else self.max_action


@dataclass(frozen=True)
class BalancedRouting:
    """Profile `balanced`: which texts the fast model's answer is not enough for.

    A text goes on to `text_semantic` when its fast score in a category the policy acts on lies in
    `[low, high)` (uncertain), or, with `escalate_targeted`, when it addresses a person or names a
    protected group (TARGET 1) and its highest acting score is at least `target_floor` (0 = every
    targeted text; raise it to spend the semantic model only on targeted texts with some signal).
    """

    low: float = 0.2
    high: float = 0.8
    escalate_targeted: bool = True
    target_floor: float = 0.0

    def __post_init__(self) -> None:
        for name in ("low", "high", "target_floor"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {value}")
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must not be above high ({self.high})")


@dataclass(frozen=True)
class CustomBlocklist:
    """A tenant's own terms; matches are category `custom.<name>`."""

    terms: tuple[str, ...]
    severity: SeverityName = "high"

    def __post_init__(self) -> None:
        if not self.terms:
            raise ValueError("terms must list at least one term")
        blank = [i for i, term in enumerate(self.terms) if not term.strip()]
        if blank:
            raise ValueError(f"terms[{blank[0]}] is blank")


@dataclass(frozen=True)
class SeverityActions:
    """The action a blocklist hit of each severity takes."""

    low: Action = "review"
    medium: Action = "block"
    high: Action = "block"

    def for_level(self, level: int) -> Action:
        action: Action = getattr(self, SEVERITY_NAMES.get(level, "high"))
        return action


@dataclass(frozen=True)
class BlocklistRules:
    """How blocklist hits become actions, and which lexicons apply."""

    actions: SeverityActions = field(default_factory=SeverityActions)
    use_default_lexicon: bool = True
    custom: Mapping[str, CustomBlocklist] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.custom:
            if not name.replace("_", "").isalnum():
                raise ValueError(f"custom blocklist name {name!r} must be letters, digits and underscores")


@dataclass(frozen=True)
class FailureModes:
    """Per stage: `open` answers without it (degraded), `closed` answers REVIEW (degraded).

    `model_unloaded`: a stage whose service answers but does not serve the model (it was unloaded
    through RepositoryModelUnload, or never loaded). `closed` (default): REVIEW, whatever the stage's
    mode; `stage`: the stage's own mode. Either way the degradation's reason says "not loaded", and the
    router's `auditmesh_degraded_total` counts it under reason `model_unloaded`."""

    text: FailureMode = "closed"
    vision: FailureMode = "open"
    ocr: FailureMode = "open"
    #: The tenant's own classifier (`tenant_classifier`): `open` (default) answers with the shipped
    #: models alone. Its mode applies whether the classifier failed or is not loaded (`model_unloaded`
    #: does not apply to it: a tenant without a classifier must not send everything to REVIEW).
    classifier: FailureMode = "open"
    #: Known-content matching (`matches`): `open` (default) answers with the other stages alone.
    match: FailureMode = "open"
    model_unloaded: Literal["closed", "stage"] = "closed"


@dataclass(frozen=True)
class OcrRules:
    enabled: bool = True
    min_confidence: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be between 0 and 1, got {self.min_confidence}")


@dataclass(frozen=True)
class AuditRules:
    """What the decision audit log keeps. By default no raw content: only scores, decisions, versions and
    evidence references (offsets, lexicon terms, OCR line indexes and boxes)."""

    include_content: bool = False


@dataclass(frozen=True)
class TenantClassifierUse:
    """Read the requesting tenant's own classifier at `version`: the model `classifier.<tenant>.<version>` on
    the text service, trained from its labelled examples with `auditmesh classifier train`
    (docs/tenant-classifiers.md).
    Always the tenant's own: a policy cannot name another tenant's classifier, so a policy shared by
    several tenants reads each one's own.

    Every text part and readable OCR line goes to it beside the text models. `mode` says what its score
    does for a built-in category it was trained for: `add` takes the higher of the shipped model's score
    and the classifier's; `replace` takes the classifier's alone. A custom category (`custom.<name>`)
    has only the classifier's score. A category acts through the thresholds in `categories` (one
    without thresholds is reported, never acts). To try a classifier before it acts, put the policy
    version that uses it in shadow or canary (docs/policy-lifecycle.md)."""

    #: The classifier version this policy reads (`auditmesh classifier train` prints it): pinned, so a
    #: retrained classifier acts only through a new policy version (shadow, canary, then active).
    version: str = ""
    mode: Literal["add", "replace"] = "add"

    def __post_init__(self) -> None:
        if not is_version(self.version):
            raise FieldError("version", f"the classifier version this policy reads is required (6-64 lower-case hex "
                                        f"digits, as `auditmesh classifier train` prints it), got {self.version!r}")


MatchAction = Literal["block", "review", "ignore"]


@dataclass(frozen=True)
class MatchRules:
    """Known-content matching (the match service, docs/matching.md): every text part and image of the item
    is matched against the hash banks the tenant may see, concurrently with the other stages.

    A match takes its bank's default action unless `banks` says otherwise for that bank (`block`,
    `review`, or `ignore`: reported nowhere); the category's `max_action` caps it as for any signal.
    With `short_circuit` (default), an exact match (distance 0: the same bytes, or the same canonical
    text) of a bank whose action here is `block` answers BLOCK at once and cancels the stages still
    running (saving the models' and OCR's time; the response says `short_circuited`)."""

    banks: Mapping[str, MatchAction] = field(default_factory=dict)
    short_circuit: bool = True


#: A subcategory's share at or above this (the heads' calibrated operating point) makes it the category's kind.
DEFAULT_SHARE = 0.5


@dataclass(frozen=True)
class SubcategoryRule:
    """What a category that fires does when its text is of this kind (docs/taxonomy.md, "Subcategories").

    `share`: the kind counts for a text when the text models' share for it (the probability that the
    category's content is of this kind) is at least this. `action`: what the text's own score may at most
    ask for when this kind counts (the most severe when several count): a kind lowers, never raises, and
    never lowers a hit (services/router/fusion.py); a kind with a floor (`sexual/minors`) instead raises
    the text's action to it, past the category's `max_action`. None: the taxonomy's default action."""

    share: float = DEFAULT_SHARE
    action: Action | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.share <= 1.0:
            raise FieldError("share", f"must be above 0 and at most 1, got {self.share}")


@dataclass(frozen=True)
class PolicyDocument:
    """The YAML document, as validated."""

    name: str
    version: str
    description: str = ""
    profile: Profile = "balanced"
    balanced: BalancedRouting = field(default_factory=BalancedRouting)
    categories: Mapping[str, Thresholds] = field(default_factory=dict)
    blocklist: BlocklistRules = field(default_factory=BlocklistRules)
    failure: FailureModes = field(default_factory=FailureModes)
    ocr: OcrRules = field(default_factory=OcrRules)
    audit: AuditRules = field(default_factory=AuditRules)
    tenant_classifier: TenantClassifierUse | None = None
    matches: MatchRules | None = None
    #: Per subcategory, as written; `subcategory_rule` fills in the taxonomy's defaults.
    subcategories: Mapping[str, SubcategoryRule] = field(default_factory=dict)

    def subcategory_rule(self, name: str) -> tuple[float, Action]:
        """(share, action) for subcategory `name`: as this policy writes it, else the taxonomy's default."""
        rule = self.subcategories.get(name, SubcategoryRule())
        action: Action = rule.action or SUBCATEGORIES[name].default_action  # type: ignore[assignment]
        return rule.share, action

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"name must be letters, digits, '-' and '_', got {self.name!r}")
        if not self.version:
            raise ValueError("version must not be empty")
        unknown = [c for c in self.categories if c not in CATEGORIES and not is_well_formed_custom_category(c)]
        if unknown:
            raise FieldError(f"categories.{unknown[0]}", f"not a taxonomy category; expected one of {sorted(CATEGORIES)} "
                                                         f"(docs/taxonomy.md) or {CUSTOM_PREFIX}<name> (lower-case "
                                                         f"letters, digits, underscores)")
        for name, rule in self.subcategories.items():
            kind = SUBCATEGORIES.get(name)
            if kind is None:
                raise FieldError(f"subcategories.{name}", f"not a taxonomy subcategory; expected one of "
                                                           f"{sorted(SUBCATEGORIES)} (docs/taxonomy.md)")
            if kind.floor is not None and rule.action is not None and ACTION_RANK[rule.action] < ACTION_RANK[kind.floor]:
                raise FieldError(f"subcategories.{name}.action", f"{rule.action!r} is below {kind.floor!r}: no policy "
                                                                  f"may lower {name} below {kind.floor} (docs/taxonomy.md)")
            if kind.floor is not None and rule.share > DEFAULT_SHARE:
                raise FieldError(f"subcategories.{name}.share", f"{rule.share:g} is above {DEFAULT_SHARE:g}: no policy "
                                                                 f"may make {name} harder to find than the default")


@dataclass(frozen=True)
class CompiledPolicy:
    """A validated policy plus what the request path needs prebuilt. Immutable; swap whole objects."""

    #: The document the request path reads: as written, after the taxonomy-1 migration.
    document: PolicyDocument
    custom_lexicon: Lexicon | None
    content_hash: str
    #: The document exactly as written and validated (versions, diffs and hashes use this); None = `document`.
    written: PolicyDocument | None = None

    @property
    def name(self) -> str:
        return self.document.name

    @property
    def version(self) -> str:
        return self.document.version

    @property
    def profile(self) -> Profile:
        return self.document.profile

    @property
    def acting_categories(self) -> frozenset[str]:
        """Categories whose score can change this policy's decision (balanced's band looks only at these)."""
        return frozenset(name for name, thresholds in self.document.categories.items() if thresholds.acts)


def compile_policy(document: PolicyDocument) -> CompiledPolicy:
    """Migrate a taxonomy-1 document (logged), build the custom blocklist automaton and the content hash
    (off the request path)."""
    written = document
    categories, notes = migrate_categories(document.categories)
    for note in notes:
        log.info("policy %s@%s: %s", document.name, document.version, note)
    if notes:
        document = replace(document, categories=categories)
    entries = [LexiconEntry(term=term, category=f"{CUSTOM_PREFIX}{name}", severity=SEVERITY_LEVELS[rules.severity],
                            source=f"policy:{document.name}@{document.version}")
               for name, rules in sorted(document.blocklist.custom.items()) for term in rules.terms]
    lexicon = Lexicon.build(entries) if entries else None
    digest = hashlib.sha256(json.dumps(asdict(written), sort_keys=True, default=str).encode()).hexdigest()
    return CompiledPolicy(document, lexicon, digest, written)

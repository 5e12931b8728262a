"""Moderation policies: per-category thresholds → actions, blocklist rules, failure handling.

A policy is a YAML document (`config/policies/<name>.yaml`), validated on load with errors that name
the file and the key. Loading compiles it (tenant blocklists into an Aho-Corasick automaton) so the
request path only reads an immutable `CompiledPolicy`.

Example (`config/policies/default.yaml`)::

    name: default
    version: "2026-12-01.1"
    categories:
      hate: {review: 0.5, block: 0.85}
    blocklist:
      actions: {low: review, medium: block, high: block}
      custom:
        brand_safety: {severity: high, terms: ["competitor-x"]}
    failure: {text: closed, vision: open, ocr: open, model_unloaded: closed}
    audit: {include_content: false}   # the audit log keeps no raw text unless this is true
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, Mapping

from services.common.config import ConfigError, load_dataclass, read_yaml
from services.common.taxonomy import CATEGORIES, CUSTOM_PREFIX
from services.common.text_match.lexicon import Lexicon, LexiconEntry

Action = Literal["allow", "review", "block"]
FailureMode = Literal["open", "closed"]
SeverityName = Literal["low", "medium", "high"]
ACTION_RANK: dict[str, int] = {"allow": 0, "review": 1, "block": 2}
#: Lexicon severity levels (services.common.text_match.lexicon uses 1..3).
SEVERITY_LEVELS: dict[str, int] = {"low": 1, "medium": 2, "high": 3}
SEVERITY_NAMES: dict[int, str] = {level: name for name, level in SEVERITY_LEVELS.items()}


@dataclass(frozen=True)
class Thresholds:
    """Scores at or above `review` / `block` get that action. Omit one to never take that action."""

    review: float | None = None
    block: float | None = None

    def __post_init__(self) -> None:
        for name in ("review", "block"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {value}")
        if self.review is not None and self.block is not None and self.review > self.block:
            raise ValueError(f"review ({self.review}) must not be above block ({self.block})")

    def action_for(self, score: float) -> tuple[Action, str]:
        """(action, the comparison that decided it) for `score`."""
        if self.block is not None and score >= self.block:
            return "block", f"block >= {self.block:g}"
        if self.review is not None and score >= self.review:
            return "review", f"review >= {self.review:g}"
        return "allow", ""


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
class PolicyDocument:
    """The YAML document, as validated."""

    name: str
    version: str
    description: str = ""
    categories: Mapping[str, Thresholds] = field(default_factory=dict)
    blocklist: BlocklistRules = field(default_factory=BlocklistRules)
    failure: FailureModes = field(default_factory=FailureModes)
    ocr: OcrRules = field(default_factory=OcrRules)
    audit: AuditRules = field(default_factory=AuditRules)

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"name must be letters, digits, '-' and '_', got {self.name!r}")
        if not self.version:
            raise ValueError("version must not be empty")
        unknown = [c for c in self.categories if c not in CATEGORIES]
        if unknown:
            raise ValueError(f"categories.{unknown[0]} is not a taxonomy category; expected one of {sorted(CATEGORIES)}")


@dataclass(frozen=True)
class CompiledPolicy:
    """A validated policy plus what the request path needs prebuilt. Immutable; swap whole objects."""

    document: PolicyDocument
    custom_lexicon: Lexicon | None
    content_hash: str

    @property
    def name(self) -> str:
        return self.document.name

    @property
    def version(self) -> str:
        return self.document.version


def compile_policy(document: PolicyDocument) -> CompiledPolicy:
    """Build the custom blocklist automaton and the content hash (off the request path)."""
    entries = [LexiconEntry(term=term, category=f"{CUSTOM_PREFIX}{name}", severity=SEVERITY_LEVELS[rules.severity],
                            source=f"policy:{document.name}@{document.version}")
               for name, rules in sorted(document.blocklist.custom.items()) for term in rules.terms]
    lexicon = Lexicon.build(entries) if entries else None
    digest = hashlib.sha256(json.dumps(asdict(document), sort_keys=True, default=str).encode()).hexdigest()
    return CompiledPolicy(document, lexicon, digest)


def load_policy_file(path: Path) -> CompiledPolicy:
    """Load, validate and compile one policy file; the file name (without .yaml) must equal `name`."""
    document = load_dataclass(PolicyDocument, read_yaml(path), str(path))
    if document.name != path.stem:
        raise ConfigError(str(path), "name", f"must equal the file name {path.stem!r}, got {document.name!r}")
    return compile_policy(document)


def load_policy_dir(directory: Path) -> dict[str, CompiledPolicy]:
    """Every `*.yaml` in `directory`, keyed by policy name."""
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise ConfigError(str(directory), "", "no policy files (*.yaml) found")
    return {policy.name: policy for policy in map(load_policy_file, files)}

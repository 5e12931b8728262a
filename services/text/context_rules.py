"""Loading and validating the context-rule data file (`services/text/data/context_rules.yaml`).

The file is data, not code: word classes, allow-context expressions, target-required terms, severity
tiers and positive rules (see the file's header). Loading compiles every pattern once (`{class}`
placeholders expanded) and refuses a malformed file with a ValueError naming the file and the key.

Example::

    rules = load_context_rules()
    rules.rules[0].id            # "threat_first_person"
    rules.tier_of("dick")        # "review"
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from services.common.taxonomy import TEXT_CATEGORIES

__all__ = ["CONDITIONS", "DEFAULT_RULES_PATH", "AllowContext", "ContextRules", "Rule", "TargetRequired",
           "load_context_rules"]

DEFAULT_RULES_PATH = Path(__file__).resolve().parent / "data" / "context_rules.yaml"
FORMAT = "auditmesh-context-rules/1"
#: The structural conditions a rule's `unless` may name (computed in services/text/context.py).
CONDITIONS = ("quoted", "mention", "negated", "game", "self", "addressed")
#: The categories a rule may give: the taxonomy's text categories (services/common/taxonomy.py).
RULE_CATEGORIES = TEXT_CATEGORIES
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class AllowContext:
    """A benign multi-word expression; a lexicon hit inside a match of `pattern` is dropped."""

    id: str
    pattern: re.Pattern[str]
    provenance: str


@dataclass(frozen=True)
class TargetRequired:
    """Lexicon terms that count only with a person target within `window` tokens after the hit."""

    id: str
    terms: frozenset[str]
    window: int
    unless: tuple[str, ...]
    provenance: str


@dataclass(frozen=True)
class Rule:
    """A positive rule: a match is a hit of `category` when every `requires` condition holds and none of
    the `unless` conditions does."""

    id: str
    category: str
    severity: int
    pattern: re.Pattern[str]
    unless: tuple[str, ...]
    requires: tuple[str, ...] = ()


@dataclass(frozen=True)
class ContextRules:
    """The compiled file. `classes` maps a class name to its words; `class_patterns` to a compiled alternation."""

    path: Path
    classes: Mapping[str, tuple[str, ...]]
    class_patterns: Mapping[str, re.Pattern[str]]
    allow_context: tuple[AllowContext, ...]
    target_required: tuple[TargetRequired, ...]
    tiers: Mapping[str, str]
    lexicon_unless: tuple[str, ...]
    rules: tuple[Rule, ...]
    #: Per lexicon category, conditions under which its hits do not count (the heads still score it).
    category_unless: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def tier_of(self, term: str) -> str | None:
        """The `max_action` for a lexicon term in an ambiguous tier, else None."""
        return self.tiers.get(term)

    def target_rule_for(self, term: str) -> TargetRequired | None:
        """The target-required entry naming `term`, if any."""
        return next((entry for entry in self.target_required if term in entry.terms), None)


def load_context_rules(path: Path = DEFAULT_RULES_PATH) -> ContextRules:
    """Read, validate and compile the rule file (ValueError naming `path` and the key on any problem)."""
    document = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    where = str(path)
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"{where}: key 'format' must be {FORMAT!r}")
    classes = {name: tuple(_strings(words, f"{where}: classes.{name}"))
               for name, words in _mapping(document.get("classes"), f"{where}: classes").items()}
    class_patterns = {name: re.compile(r"\b(?:" + _alternation(words) + r")\b") for name, words in classes.items()}
    allow = tuple(AllowContext(str(e.get("id")), _compile(e.get("pattern"), classes, f"{where}: allow_context.{e.get('id')}"),
                               str(e.get("provenance", "")))
                  for e in _entries(document, "allow_context", where, ("id", "pattern", "provenance")))
    targets = tuple(TargetRequired(str(e["id"]), frozenset(_strings(e["terms"], f"{where}: target_required.{e['id']}.terms")),
                                   _int(e.get("window", 3), f"{where}: target_required.{e['id']}.window"),
                                   _conditions(e.get("unless", []), f"{where}: target_required.{e['id']}.unless"),
                                   str(e["provenance"]))
                    for e in _entries(document, "target_required", where, ("id", "terms", "provenance")))
    tiers: dict[str, str] = {}
    for tier in _entries(document, "severity_tiers", where, ("id", "max_action", "terms")):
        if tier["max_action"] != "review":
            raise ValueError(f"{where}: severity_tiers.{tier['id']}.max_action must be 'review'")
        tiers.update({term: "review" for term in _strings(tier["terms"], f"{where}: severity_tiers.{tier['id']}.terms")})
    rules = tuple(_rule(e, classes, where) for e in _entries(document, "rules", where, ("id", "category", "pattern")))
    ids = [r.id for r in rules] + [a.id for a in allow] + [t.id for t in targets]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"{where}: duplicate ids {duplicates}")
    category_unless = {}
    for category, conditions in _mapping(document.get("category_unless", {}), f"{where}: category_unless").items():
        if category not in RULE_CATEGORIES:
            raise ValueError(f"{where}: category_unless.{category}: not one of {RULE_CATEGORIES}")
        category_unless[str(category)] = _conditions(conditions, f"{where}: category_unless.{category}")
    return ContextRules(Path(path), classes, class_patterns, allow, targets, tiers,
                        _conditions(document.get("lexicon_unless", []), f"{where}: lexicon_unless"), rules,
                        category_unless)


def _rule(entry: Mapping[str, Any], classes: Mapping[str, tuple[str, ...]], where: str) -> Rule:
    key = f"{where}: rules.{entry['id']}"
    if entry["category"] not in RULE_CATEGORIES:
        raise ValueError(f"{key}.category: {entry['category']!r} is not one of {RULE_CATEGORIES}")
    severity = _int(entry.get("severity", 2), f"{key}.severity")
    if severity not in (1, 2, 3):
        raise ValueError(f"{key}.severity: must be 1, 2 or 3, got {severity}")
    return Rule(str(entry["id"]), str(entry["category"]), severity, _compile(entry["pattern"], classes, f"{key}.pattern"),
                _conditions(entry.get("unless", []), f"{key}.unless"),
                _conditions(entry.get("requires", []), f"{key}.requires"))


def _compile(pattern: Any, classes: Mapping[str, tuple[str, ...]], key: str) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"{key}: must be a non-empty string")

    def expand(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in classes:
            raise ValueError(f"{key}: unknown class {{{name}}} (known: {sorted(classes)})")
        return _alternation(classes[name])

    try:
        return re.compile(_PLACEHOLDER.sub(expand, pattern))
    except re.error as error:
        raise ValueError(f"{key}: not a valid regular expression ({error})") from None


def _alternation(words: tuple[str, ...]) -> str:
    # Longest first, so "gay people" wins over "gay" inside one alternation.
    return "|".join(re.escape(w) for w in sorted(words, key=lambda w: (-len(w), w)))


def _entries(document: Mapping[str, Any], name: str, where: str, required: tuple[str, ...]) -> list[dict[str, Any]]:
    entries = document.get(name, [])
    if not isinstance(entries, list):
        raise ValueError(f"{where}: key {name!r} must be a list")
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: {name}[{index}] must be a mapping")
        missing = [k for k in required if k not in entry]
        if missing:
            raise ValueError(f"{where}: {name}[{index}] ({entry.get('id', '?')}) is missing {missing}")
    return entries


def _mapping(value: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{key}: must be a mapping")
    return value


def _strings(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{key}: must be a non-empty list of strings")
    return list(value)


def _int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key}: must be a non-negative integer, got {value!r}")
    return value


def _conditions(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or any(v not in CONDITIONS for v in value):
        raise ValueError(f"{key}: must be a list of conditions from {CONDITIONS}, got {value!r}")
    return tuple(value)

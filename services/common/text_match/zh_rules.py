"""Chinese phrase rules with slots: the frames that carry harm when no single word does.

Much harmful Chinese uses only ordinary words: 我知道你住哪 (a threat), 你怎么还不去死 (self-harm
incitement), 河南人都是骗子 (group hate), 回家照照镜子吧 (an insult). A word list cannot hold these;
a frame with slots can: `{GROUP}(都是|全是){NEGATIVE}`. Rules are data (data/zh_rules.json):

* `slots`: NAME -> list of literal alternatives; `{NAME}` in a pattern stands for any of them.
* `macros`: NAME -> a pattern (which may use slots and earlier macros), e.g. GROUP = `{PLACE}人|{GROUPWORD}`.
* `rules`: each with `id`, `category` (one, or a list in `categories`), `severity` 1-3, `pattern`
  (a Python regular expression over the NORMALISED text, with `{NAME}` slots), and optionally
  `requires` (a pattern that must also occur somewhere in the text: an offer plus a contact for spam),
  `unless` (a pattern that, found anywhere in the text, vetoes the rule), `starts_with` (slot names:
  the pattern can only start where one of their values starts, so it is tried only there, found
  with one Aho-Corasick pass; this keeps slot-initial rules cheap on long texts), `needs_target` (only when
  someone is addressed, zh_context.addressed), `max_action` ("review": a weak signal that alone
  may at most send the text to review) and `examples` (`{"hit": [...], "miss": [...]}`: texts the rule
  must and must not fire on through the default lexicon; tests/unit/common/text_match checks every one).

Patterns are compiled once; `find_rules` first finds, with one Aho-Corasick pass, which of the
literals the rules need (zh_rule_literals.py) occur in the text, and searches only the rules whose
needs are met: on a long text most rules are skipped without a regex search
(bench/text_match_speed.py measures it).

Example::

    >>> [(hit.rule.id, hit.start, hit.end) for hit in find_rules("我知道你住哪", load_rules())][:1]
    [('vio-located', 0, 6)]
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import ahocorasick

from services.common.taxonomy import TEXT_CATEGORIES
from services.common.text_match.zh_rule_literals import needs, satisfied

__all__ = ["RULES_PATH", "Rule", "RuleHit", "find_rules", "load_rules", "parse_rules"]

RULES_PATH = Path(__file__).resolve().parent / "data" / "zh_rules.json"
_SLOT = re.compile(r"\{([A-Z][A-Z0-9_]*)\}")
_ACTIONS = (None, "review")


@dataclass(frozen=True)
class Rule:
    """One compiled phrase rule (see the module docstring for the fields)."""

    id: str
    categories: tuple[str, ...]
    severity: int
    pattern: re.Pattern[str]
    requires: re.Pattern[str] | None
    unless: re.Pattern[str] | None
    needs_target: bool
    max_action: str | None
    #: when the pattern can only start where one of these literals starts (`starts_with` slots in
    #: the data), an Aho-Corasick automaton over them; the pattern is then tried only there
    starts: Any = None
    #: literal groups the pattern, `requires` and `unless` need before they can match
    #: (zh_rule_literals.needs): a pattern whose needs are absent from the text is not searched
    needs: tuple[frozenset[str], ...] = ()
    requires_needs: tuple[frozenset[str], ...] = ()
    unless_needs: tuple[frozenset[str], ...] = ()
    #: texts the rule must fire on and must not fire on (the `examples` of the data; checked in tests)
    hits: tuple[str, ...] = ()
    misses: tuple[str, ...] = ()


@dataclass(frozen=True)
class RuleHit:
    """A rule matched the normalised text on [start, end)."""

    rule: Rule
    start: int
    end: int


def _trie_pattern(values: list[str]) -> str:
    """An alternation of literals factored by common prefix (a trie), longest match first.

    Python's regex engine tries every branch of a flat alternation at every position; a trie makes
    the first step one character class, so positions where no value starts fail at once (a 5,000-
    character text against a 200-value slot: tens of milliseconds -> well under one).
    """
    trie: dict[str, Any] = {}
    for value in values:
        node = trie
        for char in value:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + emit(child) for char, child in sorted(node.items()) if char]
        optional = "" in node
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if optional:  # the value may end here; trying the longer values first keeps longest-match
            return "(?:" + body + ")?" if len(branches) == 1 else body[:-1] + "|)"
        return body

    return "(?:" + emit(trie) + ")"


def _expand(pattern: str, slots: dict[str, str], where: str) -> re.Pattern[str]:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in slots:
            raise ValueError(f"{where}: unknown slot {{{name}}}")
        return slots[name]

    try:
        return re.compile(_SLOT.sub(replace, pattern))
    except re.error as error:
        raise ValueError(f"{where}: invalid pattern {pattern!r}: {error}") from error


def parse_rules(document: dict[str, Any], path: Path | str = "<rules>") -> tuple[Rule, ...]:
    """Validate and compile a rules document; errors name the file and key."""
    raw_slots = document.get("slots")
    if not isinstance(raw_slots, dict):
        raise ValueError(f"{path}: slots: must be an object of NAME -> list of strings")
    slots: dict[str, str] = {}
    for name, values in raw_slots.items():
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
            raise ValueError(f"{path}: slots.{name}: names are upper-case letters, digits and _")
        if not isinstance(values, list) or not values or not all(isinstance(v, str) and v for v in values):
            raise ValueError(f"{path}: slots.{name}: must be a non-empty list of non-empty strings")
        slots[name] = _trie_pattern(values)
    raw_macros = document.get("macros", {})
    if not isinstance(raw_macros, dict):
        raise ValueError(f"{path}: macros: must be an object of NAME -> pattern")
    for name, body in raw_macros.items():  # in order: a macro may use slots and earlier macros
        if name in slots or not isinstance(body, str) or not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
            raise ValueError(f"{path}: macros.{name}: needs an unused upper-case name and a pattern string")
        slots[name] = "(?:" + _expand(body, slots, f"{path}: macros.{name}").pattern + ")"
    literals = {name: values for name, values in raw_slots.items()}
    rules: list[Rule] = []
    seen: set[str] = set()
    for index, raw in enumerate(document.get("rules", [])):
        where = f"{path}: rules[{index}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not isinstance(raw.get("pattern"), str):
            raise ValueError(f"{where}: needs string fields id and pattern")
        where = f"{path}: rules[{index}] ({raw['id']})"
        if raw["id"] in seen:
            raise ValueError(f"{where}: duplicate id")
        seen.add(raw["id"])
        categories = tuple(raw["categories"]) if "categories" in raw else (raw.get("category"),)
        if not categories or any(c not in TEXT_CATEGORIES for c in categories):
            raise ValueError(f"{where}: category: must be one of {TEXT_CATEGORIES}, got {categories!r}")
        severity = raw.get("severity", 2)
        if isinstance(severity, bool) or severity not in (1, 2, 3):
            raise ValueError(f"{where}: severity: must be 1, 2 or 3, got {severity!r}")
        max_action = raw.get("max_action")
        if max_action not in _ACTIONS:
            raise ValueError(f"{where}: max_action: must be null or 'review', got {max_action!r}")
        pattern = _expand(raw["pattern"], slots, f"{where}: pattern")
        hits, misses = _examples(raw.get("examples"), where)
        requires = _expand(raw["requires"], slots, f"{where}: requires") if raw.get("requires") else None
        unless = _expand(raw["unless"], slots, f"{where}: unless") if raw.get("unless") else None
        rules.append(Rule(
            raw["id"], categories, severity, pattern, requires, unless,
            bool(raw.get("needs_target", False)), max_action,
            _starts_automaton(raw.get("starts_with"), literals, where),
            needs(pattern), needs(requires) if requires else (), needs(unless) if unless else (), hits, misses))
    return tuple(rules)


def _examples(raw: Any, where: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The `examples` of a rule: `{"hit": [texts], "miss": [texts]}` (both optional lists of strings)."""
    if raw is None:
        return (), ()
    if not isinstance(raw, dict) or set(raw) - {"hit", "miss"}:
        raise ValueError(f"{where}: examples: must be an object with lists 'hit' and 'miss'")
    lists = []
    for key in ("hit", "miss"):
        values = raw.get(key, [])
        if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
            raise ValueError(f"{where}: examples.{key}: must be a list of non-empty strings")
        lists.append(tuple(values))
    return lists[0], lists[1]


def _starts_automaton(names: Any, literals: dict[str, list[str]], where: str) -> Any:
    if names is None:
        return None
    if not isinstance(names, list) or not names or any(n not in literals for n in names):
        raise ValueError(f"{where}: starts_with: must list slot names, got {names!r}")
    automaton = ahocorasick.Automaton(ahocorasick.STORE_LENGTH)
    for name in names:
        for value in literals[name]:
            automaton.add_word(value)
    automaton.make_automaton()
    return automaton


@lru_cache(maxsize=4)
def load_rules(path: Path = RULES_PATH) -> tuple[Rule, ...]:
    """The compiled rules of a rules file (cached per path)."""
    return parse_rules(json.loads(Path(path).read_text(encoding="utf-8")), path)


class _Literals:
    """The literals all rules of one rules tuple need, in one Aho-Corasick automaton (multi-character
    ones; single characters are looked up in the text's character set)."""

    __slots__ = ("automaton", "rules", "_always", "_triggered")

    def __init__(self, rules: tuple[Rule, ...]) -> None:
        self.rules = rules  # held so that the id() key below cannot be reused by another tuple
        # each rule with needs is filed under the strings of one of its groups (its trigger): a rule
        # none of whose trigger strings is present cannot be satisfied, so it is never looked at
        self._always: list[int] = []
        self._triggered: dict[str, list[int]] = {}
        for index, rule in enumerate(rules):
            if not rule.needs:
                self._always.append(index)
                continue
            trigger = min(rule.needs, key=lambda group: (-min(map(len, group)), len(group)))
            for literal in trigger:
                self._triggered.setdefault(literal, []).append(index)
        longer = {s for rule in rules for groups in (rule.needs, rule.requires_needs, rule.unless_needs)
                  for group in groups for s in group if len(s) > 1}
        self.automaton: Any = None
        if longer:
            self.automaton = ahocorasick.Automaton(ahocorasick.STORE_ANY, ahocorasick.KEY_STRING)
            for literal in sorted(longer):
                self.automaton.add_word(literal, literal)
            self.automaton.make_automaton()

    def present(self, text: str) -> set[str]:
        """The needed literals that occur in `text` (plus every character of it)."""
        found = set(text)
        if self.automaton is not None:
            found.update(literal for _, literal in self.automaton.iter(text))
        return found

    def candidates(self, present: set[str]) -> list[Rule]:
        """The rules, in their order, whose trigger group has a string in `present`, plus those that
        need nothing: a superset of the rules whose needs are `satisfied`."""
        indices = set(self._always)
        for literal in present:
            indices.update(self._triggered.get(literal, ()))
        return [self.rules[index] for index in sorted(indices)]


_LITERALS: dict[int, _Literals] = {}


def _literals(rules: tuple[Rule, ...]) -> _Literals:
    index = _LITERALS.get(id(rules))
    if index is None or index.rules is not rules:
        if len(_LITERALS) >= 16:  # a few rule sets per process (default, tests): bound it anyway
            _LITERALS.clear()
        index = _LITERALS[id(rules)] = _Literals(rules)
    return index


def find_rules(text: str, rules: tuple[Rule, ...]) -> list[RuleHit]:
    """Every rule hit in the normalised `text` (one per rule and start; overlapping starts allowed
    only across rules). `needs_target` is left to the caller, which knows the text's context.

    A rule whose pattern needs a literal absent from `text` (zh_rule_literals.py) is not searched:
    on a long text most rules are decided by one Aho-Corasick pass instead of a regex search each."""
    hits: list[RuleHit] = []
    if not rules:
        return hits
    literals = _literals(rules)
    present = literals.present(text)
    for rule in literals.candidates(present):
        if not satisfied(rule.needs, present):
            continue  # the pattern cannot match: same result as searching, without the search
        if rule.starts is not None:
            hits.extend(_anchored(text, rule, present))
            continue
        first = rule.pattern.search(text)
        if first is None:
            continue
        if _vetoed(text, rule, present):
            continue
        hits.append(RuleHit(rule, first.start(), first.end()))
        for match in rule.pattern.finditer(text, first.end()):
            if match.end() > match.start():
                hits.append(RuleHit(rule, match.start(), match.end()))
    return hits


def _vetoed(text: str, rule: Rule, present: set[str]) -> bool:
    """True when the rule's `unless` occurs in the text or its `requires` does not (each regex
    searched only when the literals it needs are present)."""
    if rule.unless is not None and satisfied(rule.unless_needs, present) and rule.unless.search(text):
        return True
    return rule.requires is not None and not (satisfied(rule.requires_needs, present) and rule.requires.search(text))


def _anchored(text: str, rule: Rule, present: set[str]) -> list[RuleHit]:
    """Hits of a rule with `starts_with`: the pattern is tried only where a start literal begins."""
    starts = sorted({end - length + 1 for end, length in rule.starts.iter(text)})
    if not starts:
        return []
    if _vetoed(text, rule, present):
        return []
    hits: list[RuleHit] = []
    covered = -1
    for start in starts:
        if start < covered:
            continue
        match = rule.pattern.match(text, start)
        if match is not None and match.end() > match.start():
            hits.append(RuleHit(rule, match.start(), match.end()))
            covered = match.end()
    return hits

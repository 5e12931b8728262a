"""Context on top of the lexicon: which blocklist hits count, what the positive rules find, and the target.

Input: the segmented, normalised text (`services.text.segment`) and the lexicon's matches on it.
Output (`ContextResult`): the hits that count (lexicon hits that survive the allow-context list, the
target-required entries and the `lexicon_unless` conditions, with `max_action: review` for ambiguous
terms) plus rule hits (`source: rule:<id>`), and the structural flags the heads use as features.

The conditions are structural (see `services/text/data/context_rules.yaml`): inside quotation marks, a
meta/reporting frame in the sentence, a negator just before, a game term in the text, a sentence about
the speaker, a person target after a verb. They are computed from word classes in the data file.

Example::

    engine = ContextEngine(load_context_rules())
    result = engine.analyse(segmented, lexicon.find(segmented))
    [h.source for h in result.hits]   # ["rule:insult_you"] for "you are an idiot"
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from services.common.contracts.text import LexiconHit
from services.common.text_match.lexicon import Match
from services.common.text_match.normalize import NormalizedText
from services.text.context_rules import ContextRules

__all__ = ["ContextEngine", "ContextResult", "Flags", "sentence_spans"]

_SENTENCE_END = re.compile(r"[.!?;\n]+|\s[-–—]\s")
_TOKEN = re.compile(r"[\w']+")
_QUOTED = re.compile(r"[\"“”«»](.+?)[\"“”«»]|(?<![\w])['‘’](.+?)['‘’](?![\w])")
_NAME = re.compile(r"\b[A-Z][a-z]{2,}\b")
_NEGATION_WINDOW = 3
_NOT_NAMES = frozenset({
    "the", "this", "that", "these", "those", "what", "when", "where", "why", "how", "who", "which", "and", "but",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january", "february",
    "march", "april", "may", "june", "july", "august", "september", "october", "november", "december",
    "god", "english", "ok", "okay", "yes", "no", "hey", "hello", "thanks", "please", "dear", "congratulations",
    "urgent", "winner", "free", "click", "call", "reply", "your", "you", "our", "get", "buy", "join", "just",
    "lol", "omg", "if", "so", "nice", "good", "great", "happy", "hi", "well", "oh", "ugh", "wow", "yeah",
    "nobody", "everyone", "someone", "somebody", "anyone", "stop", "let", "let's", "don't", "can", "could",
    "would", "should", "will", "shut", "go", "come", "see", "look", "do", "does", "did", "is", "are", "was",
    "we", "they", "he", "she", "it", "there", "here", "my", "his", "her", "their", "in", "on", "at", "for",
})


@dataclass(frozen=True)
class Flags:
    """Structural facts about one text, used as head features and for the TARGET output."""

    second_person: bool = False
    named_person: bool = False
    group: bool = False
    first_person: bool = False
    quoted: bool = False
    mention: bool = False
    negated: bool = False
    game: bool = False
    dropped_hits: int = 0

    @property
    def target(self) -> bool:
        """A person or second-person target, or a protected group named."""
        return self.second_person or self.named_person or self.group


@dataclass(frozen=True)
class ContextResult:
    """The hits that count (lexicon + rule) and the flags."""

    hits: tuple[LexiconHit, ...]
    flags: Flags
    dropped: tuple[tuple[str, str], ...] = field(default=())  # (term, reason) for each dropped lexicon hit


class _View:
    """Per-text helpers in normalised coordinates."""

    def __init__(self, text: NormalizedText, rules: ContextRules) -> None:
        self.text = text
        self.rules = rules
        self.sentences = sentence_spans(text.text)
        self.quoted = [(m.start(), m.end()) for m in _QUOTED.finditer(text.text)]
        self.tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(text.text)]
        self.game = self._has("game_terms", text.text)


    def _has(self, name: str, value: str) -> bool:
        pattern = self.rules.class_patterns.get(name)
        return bool(pattern and pattern.search(value))

    def sentence(self, start: int) -> tuple[int, int]:
        return next(((a, b) for a, b in self.sentences if a <= start <= b), (0, len(self.text.text)))

    def holds(self, condition: str, start: int, end: int) -> bool:
        first, last = self.sentence(start)
        if condition == "quoted":
            return any(a <= start and end <= b for a, b in self.quoted)
        if condition == "mention":
            return self._has("mention_frames", self.text.text[first:last])
        if condition == "negated":
            # A negator just before the span, or inside a rule's match ("i would never hurt you").
            before = [self.text.text[a:b] for a, b in self.tokens if first <= a and b <= start][-_NEGATION_WINDOW:]
            before += [self.text.text[a:b] for a, b in self.tokens if start <= a and b <= end]
            return any(self._has("negators", word) for word in before) or "n't" in self.text.text[max(first, start - 12):end]
        if condition == "game":
            return self.game
        if condition == "addressed":
            # The hit's sentence speaks to someone (a second-person word or an @mention).
            sentence = self.text.text[first:last]
            return self._has("second_person", sentence) or "@" in sentence
        if condition == "self":
            sentence = self.text.text[first:last]
            return self._has("first_person", sentence) and not self._has("second_person", sentence)
        raise ValueError(f"unknown condition {condition!r}")

    def person_after(self, end: int, window: int) -> bool:
        after = [self.text.text[a:b] for a, b in self.tokens if a >= end][:window]
        phrase = " ".join(after)
        return any(self._has(name, phrase) for name in ("second_person", "third_person", "person_nouns",
                                                         "protected_groups", "first_person"))

    def to_normalised(self, original_start: int) -> int:
        return next((i for i, offset in enumerate(self.text.offsets) if offset >= original_start), len(self.text.text))


class ContextEngine:
    """Applies one compiled rule file; stateless between calls (safe to share across threads)."""

    def __init__(self, rules: ContextRules) -> None:
        self.rules = rules

    def analyse(self, text: NormalizedText, matches: Sequence[Match]) -> ContextResult:
        """The hits that count and the flags for `text` (see the module docstring)."""
        view = _View(text, self.rules)
        kept: list[LexiconHit] = []
        dropped: list[tuple[str, str]] = []
        for match in matches:
            reason = self._drop_reason(view, match)
            if reason:
                dropped.append((match.term, reason))
                continue
            kept.append(LexiconHit(match.category, match.term, match.severity, match.start, match.end,
                                   match.matched_text, match.source, self.rules.tier_of(match.term)))
        kept.extend(self._rule_hits(view))
        kept.sort(key=lambda h: (h.start, h.end, h.category, h.source))
        return ContextResult(tuple(kept), self._flags(view, len(dropped)), tuple(dropped))

    def _drop_reason(self, view: _View, match: Match) -> str:
        start = view.to_normalised(match.start)
        end = start + len(match.term)
        for allow in self.rules.allow_context:
            if any(m.start() <= start and end <= m.end() for m in allow.pattern.finditer(view.text.text)):
                return f"allow:{allow.id}"
        for condition in self.rules.lexicon_unless:
            if view.holds(condition, start, end):
                return condition
        for condition in self.rules.category_unless.get(match.category, ()):
            if view.holds(condition, start, end):
                return f"{match.category}:{condition}"
        entry = self.rules.target_rule_for(match.term)
        if entry is not None:
            if entry.window and not view.person_after(end, entry.window):
                return f"no_target:{entry.id}"
            for condition in entry.unless:
                if view.holds(condition, start, end):
                    return f"{condition}:{entry.id}"
        return ""

    def _rule_hits(self, view: _View) -> list[LexiconHit]:
        hits = []
        for rule in self.rules.rules:
            for match in rule.pattern.finditer(view.text.text):
                if match.end() == match.start() or any(view.holds(c, match.start(), match.end()) for c in rule.unless) \
                        or not all(view.holds(c, match.start(), match.end()) for c in rule.requires):
                    continue
                first, last = view.text.original_span(match.start(), match.end())
                hits.append(LexiconHit(rule.category, match.group(), rule.severity, first, last,
                                       view.text.original[first:last], f"rule:{rule.id}"))
        return hits

    def _flags(self, view: _View, dropped: int) -> Flags:
        value = view.text.text
        return Flags(second_person=view._has("second_person", value), named_person=_has_name(view.text.original),
                     group=view._has("protected_groups", value), first_person=view._has("first_person", value),
                     quoted=bool(view.quoted), mention=view._has("mention_frames", value),
                     negated=view._has("negators", value), game=view.game, dropped_hits=dropped)


def sentence_spans(value: str) -> list[tuple[int, int]]:
    """Half-open spans of the sentences of `value` (split at . ! ? ; newlines and spaced dashes).

    Example::

        >>> sentence_spans("hi. you there")
        [(0, 2), (4, 13)]
    """
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(value):
        spans.append((start, match.start()))
        start = match.end()
        while start < len(value) and value[start] == " ":
            start += 1
    spans.append((start, len(value)))
    return spans


def _has_name(original: str) -> bool:
    """A capitalised word that is not a common sentence opener: a named person, roughly."""
    return any(m.group().lower() not in _NOT_NAMES for m in _NAME.finditer(original))

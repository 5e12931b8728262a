"""A compiled, immutable blocklist: normalised terms in an Aho-Corasick automaton.

Terms are normalised with the same `normalize()` as the text they are matched against, so "傻逼" also
catches "傻　.　逼" and "fuck" catches "ｆ.ｕ.ｃ.ｋ". Matching rules:

* CJK has no spaces between words, so a CJK edge of a term matches anywhere ("傻逼" in "你个傻逼啊").
* A term edge that is a letter or digit of a space-separated script must not touch another such
  character in the normalised text: "ass" matches "ass" and "ass!" but not "class" or "assassin"
  (the Scunthorpe problem). Mixed terms ("狗sN") get the rule on their Latin edge only.
* Overlapping matches are all kept, one per distinct (category, original span); when several entries
  give the same category and span, the highest severity wins.

Building takes a few milliseconds for thousands of terms, but it is a plain function: callers build
off the request path and swap the finished object in (it never changes after `build`).

Example::

    >>> lexicon = Lexicon.build([LexiconEntry("ass", "profanity", 2, "test")])
    >>> [m.matched_text for m in lexicon.find(normalize("Class, you a$$!"))]
    ['a$$']
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import ahocorasick

from services.common.contracts.text import LexiconHit
from services.common.taxonomy import TEXT_CATEGORIES, is_custom_category
from services.common.text_match.normalize import NormalizedText, normalize, visible_chars
from services.common.text_match.scripts import is_word_char
from services.common.text_match.zh_contact import contact_spans
from services.common.text_match.zh_clauses import clause_normalize
from services.common.text_match.zh_context import (ContextRule, addressed, load_contexts, load_ordinary_phrases,
                                                   quoted_in_view, suppressing_context)
from services.common.text_match.zh_pinyin import LatinSpellings, StartIndex, find_pinyin, term_syllables
from services.common.text_match.zh_rules import Rule, find_rules, load_rules
from services.common.text_match.zh_segment import cuts_word, word_spans
from services.common.text_match.zh_syllables import SyllableReader
from services.common.text_match.zh_variants import variant_view

__all__ = ["DEFAULT_LEXICON_PATH", "PLURAL_SUFFIXES", "Lexicon", "LexiconEntry", "Match"]

#: Where an entry may match: its normalised characters, its toneless pinyin (homophones, syllables in
#: Latin letters) and its pinyin initials (nmsl). See zh_pinyin.py.
SPACES = ("chars", "pinyin", "initials")
#: Severity 1 = low, 2 = medium, 3 = high.
SEVERITIES = (1, 2, 3)
DEFAULT_LEXICON_PATH = Path(__file__).resolve().parent / "data" / "default_lexicon.json"
LEXICON_FORMAT = "auditmesh-lexicon/1"


@dataclass(frozen=True)
class LexiconEntry:
    """One blocklist term as written by its source (normalised when the lexicon is built).

    Example::

        >>> LexiconEntry("傻逼", "profanity", 2, "glin-profanity==4.1.0:glin_profanity/data/dictionaries/chinese.json").severity
        2
    """

    term: str
    category: str
    severity: int
    source: str
    #: matching spaces (SPACES); "initials" implies "pinyin"
    spaces: tuple[str, ...] = ("chars",)
    #: True: a CJK hit is kept even when it cuts through a segmented word (zh_segment.py)
    unambiguous: bool = False
    #: True: counted only when the text addresses someone (zh_context.py), for ambiguous insults
    needs_target: bool = False
    #: "review": an ambiguous-tier entry whose hit alone may at most send the text to review
    max_action: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.term, str) or not self.term.strip():
            raise ValueError(f"term: must be a non-empty string, got {self.term!r}")
        # The taxonomy (services/common/taxonomy.py) is the one list of categories a text entry may carry.
        if self.category not in TEXT_CATEGORIES and not is_custom_category(self.category):
            raise ValueError(f"category: {self.category!r} is not one of {TEXT_CATEGORIES} or custom.<name> "
                             f"(term {self.term!r})")
        if isinstance(self.severity, bool) or self.severity not in SEVERITIES:
            raise ValueError(f"severity: must be 1, 2 or 3, got {self.severity!r} (term {self.term!r})")
        if not isinstance(self.source, str):
            raise ValueError(f"source: must be a string, got {self.source!r} (term {self.term!r})")
        if not self.spaces or any(space not in SPACES for space in self.spaces):
            raise ValueError(f"spaces: must be a non-empty subset of {SPACES}, got {self.spaces!r} (term {self.term!r})")
        if self.max_action not in (None, "review"):
            raise ValueError(f"max_action: must be null or 'review', got {self.max_action!r} (term {self.term!r})")


@dataclass(frozen=True)
class Match:
    """A blocklist hit: `start`/`end` are code-point offsets into the ORIGINAL text, half-open.

    `term` is the normalised term that matched; `matched_text` is the original surface text.
    """

    category: str
    term: str
    severity: int
    start: int
    end: int
    matched_text: str
    source: str
    #: "review" when the hit alone may at most send the text to review (ambiguous tier), else None
    max_action: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The match as the MATCHES output tensor encodes it: the text contract's `LexiconHit`."""
        return LexiconHit(self.category, self.term, self.severity, self.start, self.end, self.matched_text,
                          self.source, self.max_action).to_json()


@dataclass(frozen=True)
class _Pattern:
    term: str
    entries: tuple[LexiconEntry, ...]
    bounded_left: bool
    bounded_right: bool


class Lexicon:
    """An immutable compiled blocklist. Create it with `Lexicon.build` or `Lexicon.load`."""

    __slots__ = ("_automaton", "_contact_rule", "_contexts", "_entries", "_ordinary", "_phonetic", "_phonetic_keys",
                 "_rules", "_spellings", "_syllables", "_version")

    _automaton: Any
    _contact_rule: bool
    _contexts: tuple[ContextRule, ...]
    _entries: tuple[LexiconEntry, ...]
    #: ordinary phrases a phonetic hit may not be (你妈 / 尼玛), from the context data
    _ordinary: frozenset[str]
    _phonetic: tuple[tuple[tuple[str, ...], LexiconEntry, str], ...]
    #: per phonetic entry (same order), the StartIndex.first_keys it can begin at; None: always tried
    _phonetic_keys: tuple[frozenset[str] | None, ...]
    _rules: tuple[Rule, ...]
    #: Latin syllables in Chinese text read back as the rules' characters (zh_syllables.py); None without rules
    _syllables: SyllableReader | None
    #: the phonetic entries' Latin spellings (same positions), for texts without Han characters
    _spellings: LatinSpellings
    _version: str

    def __init__(self, automaton: Any, entries: tuple[LexiconEntry, ...], version: str,
                 contact_rule: bool = False, rules: tuple[Rule, ...] = (),
                 contexts: tuple[ContextRule, ...] = (), ordinary_phrases: frozenset[str] = frozenset()) -> None:
        object.__setattr__(self, "_automaton", automaton)
        object.__setattr__(self, "_entries", entries)
        object.__setattr__(self, "_version", version)
        object.__setattr__(self, "_contact_rule", contact_rule)
        object.__setattr__(self, "_rules", rules)
        object.__setattr__(self, "_syllables", SyllableReader(rules) if rules else None)
        object.__setattr__(self, "_contexts", contexts)
        object.__setattr__(self, "_ordinary", ordinary_phrases)
        object.__setattr__(self, "_phonetic", tuple(  # (syllables, entry, normalised term)
            (term_syllables(term), e, term) for e, term in ((e, normalize(e.term).text) for e in entries)
            if "pinyin" in e.spaces or "initials" in e.spaces))
        object.__setattr__(self, "_phonetic_keys", tuple(_first_keys(syllables) for syllables, _, _ in self._phonetic))
        object.__setattr__(self, "_spellings", LatinSpellings(
            [(syllables, "initials" in entry.spaces) for syllables, entry, _ in self._phonetic]))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Lexicon is immutable; build a new one instead of setting {name!r}")

    @classmethod
    def build(cls, entries: Iterable[LexiconEntry], *, contact_rule: bool = False, rules: tuple[Rule, ...] = (),
              contexts: tuple[ContextRule, ...] = (), ordinary_phrases: frozenset[str] = frozenset()) -> Lexicon:
        """Normalise every term and compile the automaton.

        Raises ValueError for an entry whose term normalises to nothing (only separators or
        format characters). `contact_rule` adds spam hits for obfuscated contacts (zh_contact.py),
        `rules` Chinese phrase rules (zh_rules.py) and `contexts` the context rules that suppress hits
        in reporting, quoting, medical... text (zh_context.py), `ordinary_phrases` the Han phrases a
        pinyin hit may not be (你妈 sounds like 尼玛, zh_context.parse_ordinary_phrases): the default
        lexicon has all four, tenant blocklists none. Example::

            lexicon = Lexicon.build([LexiconEntry("傻逼", "profanity", 2, "mine")])
        """
        ordered = tuple(sorted(set(entries), key=lambda e: (e.term, e.category, e.severity, e.source)))
        grouped: dict[str, list[LexiconEntry]] = {}
        for entry in ordered:
            term = normalize(entry.term).text
            if not term:
                raise ValueError(f"term: {entry.term!r} ({entry.source}) normalises to an empty string")
            grouped.setdefault(term, []).append(entry)
        automaton = ahocorasick.Automaton(ahocorasick.STORE_ANY, ahocorasick.KEY_STRING)
        for term, group in grouped.items():
            automaton.add_word(term, _Pattern(term, tuple(group), is_word_char(term[0]), is_word_char(term[-1])))
        if grouped:
            automaton.make_automaton()
        version = _lexicon_version(ordered, rules, contexts, ordinary_phrases)
        return cls(automaton, ordered, version, contact_rule, rules, contexts, ordinary_phrases)

    def with_contexts(self, contexts: tuple[ContextRule, ...]) -> Lexicon:
        """This lexicon with `contexts` in place of its context rules, sharing everything compiled (the
        automaton, the phrase rules' syllable reader): milliseconds instead of a build of seconds.

        Example::

            without = Lexicon.load().with_contexts(())   # what the hits are before any context rule
        """
        copy = object.__new__(Lexicon)
        for name in Lexicon.__slots__:
            object.__setattr__(copy, name, getattr(self, name))
        object.__setattr__(copy, "_contexts", contexts)
        object.__setattr__(copy, "_version", _lexicon_version(self._entries, self._rules, contexts, self._ordinary))
        return copy

    @classmethod
    def load(cls, path: Path = DEFAULT_LEXICON_PATH) -> Lexicon:
        """Build from a lexicon JSON file (format `auditmesh-lexicon/1`, see build_lexicon.py).

        `includes` names sibling files of the same format whose entries are added (the project's
        Chinese lists, data/zh_terms.json); `contact_rule: true` in any of them enables zh_contact,
        `zh_rules: true` the phrase rules (data/zh_rules.json), context rules and ordinary phrases
        (data/zh_context_rules.json).
        """
        entries: list[LexiconEntry] = []
        contact_rule = zh_rules = False
        for document_path, document in _documents(Path(path)):
            contact_rule = contact_rule or bool(document.get("contact_rule", False))
            zh_rules = zh_rules or bool(document.get("zh_rules", False))
            for index, e in enumerate(document["entries"]):
                try:
                    entries.append(LexiconEntry(e["term"], e["category"], int(e["severity"]), e["source"],
                                                tuple(e.get("spaces", ("chars",))), bool(e.get("unambiguous", False)),
                                                bool(e.get("needs_target", False)), e.get("max_action")))
                except (KeyError, TypeError, ValueError) as error:
                    raise ValueError(f"{document_path}: entries[{index}]: {error}") from error
        if not zh_rules:
            return cls.build(entries, contact_rule=contact_rule)
        return cls.build(entries, contact_rule=contact_rule, rules=load_rules(), contexts=load_contexts(),
                         ordinary_phrases=load_ordinary_phrases())

    @property
    def entries(self) -> tuple[LexiconEntry, ...]:
        """The entries the lexicon was built from, sorted."""
        return self._entries

    @property
    def version(self) -> str:
        """A content hash of the entries (16 hex digits): equal entries give equal versions."""
        return self._version

    def __len__(self) -> int:
        return len(self._entries)

    def find(self, text: NormalizedText) -> list[Match]:
        """All matches in `text`, sorted by original start, end and category.

        Example::

            >>> lexicon = Lexicon.build([LexiconEntry("傻逼", "profanity", 2, "mine")])
            >>> [(m.start, m.end, m.matched_text) for m in lexicon.find(normalize("你个傻　.　逼"))]
            [(2, 7, '傻　.　逼')]

        Zero-width and other invisible characters hide nothing: the matcher reads the text as sent
        without them (`normalize.visible_chars`), and spans still point into the text as sent.
        """
        if not text.text:
            return []
        visible = _visible_view(text)
        if visible is None:
            return self._find(text)
        view, kept = visible
        return [_restore(match, kept, text.original) for match in self._find(view)]

    def _find(self, text: NormalizedText) -> list[Match]:
        """`find` for a text whose original holds no invisible characters."""
        best: dict[tuple[str, int, int], Match] = {}
        views = [text]
        if self._rules or self._contexts:  # the default lexicon: also the emoji/split-character view
            variant = variant_view(text)
            if variant is not None:
                views.append(variant)
        chinese = _CJK_CHAR.search(text.text) is not None  # the phrase rules are Chinese: skip them otherwise
        for view in views:
            self._find_in(view, best, words=True, rules=chinese)
        if self._rules and chinese:  # rules also see clause punctuation (zh_clauses.py), which normalize() folds away
            clauses = clause_normalize(text.original)
            clause_views = [clauses]
            clause_variant = variant_view(clauses, clause_normalize)
            if clause_variant is not None:
                clause_views.append(clause_variant)
            for view in clause_views:
                self._find_in(view, best, words=False, rules=True)
            if self._syllables is not None:  # pinyin typed for a rule's character (he南人都shi骗子)
                for view in (text, clauses):
                    restored = self._syllables.view(view)
                    if restored is not None:
                        self._find_in(restored, best, words=False, rules=True)
        if self._contact_rule:
            for first, last in contact_spans(text.original):
                best.setdefault(("spam", first, last), Match("spam", "rule:zh-contact", 2, first, last,
                                                             text.original[first:last], "rule:zh-contact"))
        return sorted(best.values(), key=lambda m: (m.start, m.end, m.category))

    def _find_in(self, text: NormalizedText, best: dict[tuple[str, int, int], Match], *,
                 words: bool, rules: bool) -> None:
        """Add the hits in one view of the text to `best` (keyed by category and original span):
        listed words (automaton and pinyin) when `words`, phrase rules when `rules`."""
        haystack = text.text
        context = _Context(haystack, self._contexts, text, self._ordinary)

        def keep(category: str, term: str, severity: int, source: str, max_action: str | None,
                 start: int, end: int) -> None:
            first, last = text.original_span(start, end)
            key = (category, first, last)
            current = best.get(key)
            if current is None or severity > current.severity or (
                    severity == current.severity and current.max_action is not None and max_action is None):
                # the context check (regex searches per context rule) only for a hit that would be kept:
                # a span already held at this severity by another entry, rule or view needs none
                if not context.suppressed(category, severity, start, end):
                    best[key] = Match(category, term, severity, first, last, text.original[first:last], source,
                                      max_action)

        def keep_entry(entry: LexiconEntry, term: str, start: int, end: int, *, phonetic: bool = False) -> None:
            if phonetic:  # a sound-alike (pinyin, homophone): is it an evasion, or ordinary words?
                if context.other_word(term, start, end):
                    return  # 柜子 sounds like 鬼子 but is a word of its own: a homophone, not an evasion
                if context.straddles(start, end):
                    return  # 建人 in 福建人, 人扎 in 残疾人扎堆: a sound-alike cut out of other words
                first, last = text.original_span(start, end)
                if _weak_sound_alike(term, haystack[start:end], text.original[first:last]):
                    return  # 在了 for 宰了, 骂的 for 妈的, 你吗 for 尼玛: one syllable and a particle is ordinary speech
                if _SENTENCE_BREAK.search(text.original, first, last):
                    return  # 日。转 (日赚), 荐，或 (贱货): across a sentence end it is two sentences, not a word
            if not context.rejects(entry, start, end):
                keep(entry.category, term, entry.severity, entry.source, entry.max_action, start, end)

        if words and len(self._automaton):
            for last, pattern in self._automaton.iter(haystack):
                start = last - len(pattern.term) + 1
                if pattern.bounded_left and start > 0 and is_word_char(haystack[start - 1]):
                    continue
                end = last + 1
                if pattern.bounded_right and end < len(haystack) and is_word_char(haystack[end]):
                    end = _plural_end(haystack, end) if pattern.term[-1].isascii() else None
                    if end is None:
                        continue
                for entry in pattern.entries:
                    keep_entry(entry, pattern.term, start, end)
        starts = StartIndex(haystack) if self._phonetic and words else None
        # without a Han character a phonetic match is a whole Latin token: look the tokens up instead
        # of trying every term (same answers, LatinSpellings)
        spelled = self._spellings.find(haystack) if starts is not None and not starts.han else None
        present = starts.first_keys() if starts is not None else set()
        # with `spelled`, only the terms it matched and those it does not cover need a look
        positions: Iterable[int] = range(len(self._phonetic)) if words else ()
        if spelled is not None:
            positions = sorted(set(spelled) | self._spellings.uncovered)
        for position in positions:
            (syllables, entry, term), keys = self._phonetic[position], self._phonetic_keys[position]
            if spelled is not None and position in spelled:
                spans = spelled[position]
            elif keys is not None and keys.isdisjoint(present):
                continue  # no Han reading or Latin token in the text can begin this term: find_pinyin finds nothing
            else:
                spans = find_pinyin(haystack, syllables, initials="initials" in entry.spaces, index=starts)
            for start, end in spans:
                keep_entry(entry, term, start, end, phonetic=True)
        for hit in find_rules(haystack, self._rules) if rules else ():
            if hit.rule.needs_target and not context.is_addressed():
                continue
            if hit.end - hit.start <= _SHORT_RULE_HIT and context.straddles(hit.start, hit.end):
                continue  # a short literal hit (鸡巴 in 烤鸡|巴西) gets the same boundary check as a word
            for category in hit.rule.categories:
                keep(category, f"rule:{hit.rule.id}", hit.rule.severity, f"rule:{hit.rule.id}", hit.rule.max_action,
                     hit.start, hit.end)


#: Sentence ends, clause commas and line breaks: a sound-alike (pinyin, homophone) of a listed word is never
#: matched across one. The word itself may be (卧。槽: evaders put any mark inside the very characters).
_SENTENCE_BREAK = re.compile(r"[，。！？；：\n]")
#: Grammatical particles: a sound-alike resting on one other syllable and a particle is ordinary speech.
_PARTICLES = frozenset("了的得地着过吗呢吧啊呀嘛哦")
#: Sentence-final particles: a sound-alike ending in one where the listed word does not is a question or a remark.
_FINAL_PARTICLES = frozenset("吗呢吧啊呀嘛哦")


def _weak_sound_alike(term: str, span: str, original: str) -> bool:
    """True when a Han sound-alike `span` of `term` rests on too little to be an evasion: the listed word has
    one syllable besides particles (宰了, 妈的: 在了 and 骂的 are everyday speech), or the span ends in a
    sentence-final particle the word does not end in (你吗, 腻吗 for 尼玛). Never when the text as written
    (`original`) holds anything but Han characters there: 🐴的 for 妈的 is written to evade."""
    if span == term or not all(_is_cjk(c) for c in span) or not all(_is_cjk(c) for c in original):
        return False
    if sum(c not in _PARTICLES for c in term) < 2:
        return True
    return span[-1] in _FINAL_PARTICLES and term[-1] != span[-1]


#: rule hits this short (code points) must not cut a segmented word, like lexicon terms
_SHORT_RULE_HIT = 3
#: characters of the original text around a hit that context rules' `text` conditions see
_CONTEXT_SCOPE = 60


class _Context:
    """Per-text context checks, computed lazily (most texts need neither segmentation nor target)."""

    def __init__(self, haystack: str, contexts: tuple[ContextRule, ...] = (),
                 view: NormalizedText | None = None, ordinary_phrases: frozenset[str] = frozenset()) -> None:
        self._haystack = haystack
        self._contexts = contexts
        self._ordinary = ordinary_phrases
        self._view = view
        self._quoted: list[tuple[int, int]] | None = None
        self._spans: list[tuple[int, int]] | None = None
        self._addressed: bool | None = None

    def is_addressed(self) -> bool:
        """Whether the text addresses someone (computed once)."""
        if self._addressed is None:
            self._addressed = addressed(self._haystack)
        return self._addressed

    def suppressed(self, category: str, severity: int, start: int, end: int) -> bool:
        """True when a context rule (reporting, quoting, medicine...) says the hit is no attack."""
        if not self._contexts:
            return False
        if self._quoted is None:  # quotation marks between Han characters are folded away: use the original
            self._quoted = quoted_in_view(self._view.original, self._view.offsets) if self._view else []
        original = ""
        if self._view is not None and self._view.text:
            first, last = self._view.original_span(start, end)
            original = self._view.original[max(0, first - _CONTEXT_SCOPE):last + _CONTEXT_SCOPE].lower()
        return suppressing_context(self._haystack, category, severity, start, end, self._contexts, self._quoted,
                                   original) is not None

    def straddles(self, start: int, end: int) -> bool:
        """True when a CJK hit on [start, end) begins or ends inside a segmented word."""
        if not any(_is_cjk(c) for c in self._haystack[start:end]):
            return False
        if self._spans is None:
            self._spans = word_spans(self._haystack)
        return cuts_word(self._spans, start, end)

    def other_word(self, term: str, start: int, end: int) -> bool:
        """True when [start, end) is all Han, differs from `term` and is exactly one segmented
        dictionary word or one of the ordinary phrases (你妈 / 尼玛: `ordinary_phrases` in
        data/zh_context_rules.json): an ordinary word that merely sounds like a listed term (柜子 /
        鬼子, 事实 / 逝世). Evaders write non-words (沙币, 费物); a homophone word that IS an evasion
        (紫砂 for 自杀) is listed in the variant words (zh_variants.json) and matched in the variant view."""
        span = self._haystack[start:end]
        if span == term or end - start < 2 or not all(_is_cjk(c) for c in span):
            return False
        if span in self._ordinary:
            return True
        if self._spans is None:
            self._spans = word_spans(self._haystack)
        index = bisect.bisect_left(self._spans, (start, end))
        return index < len(self._spans) and self._spans[index] == (start, end)

    def rejects(self, entry: LexiconEntry, start: int, end: int) -> bool:
        """True when a hit of `entry` on [start, end) is a straddle or lacks a needed target."""
        if entry.needs_target and not self.is_addressed() and not _term_addresses(entry.term):
            return True  # a term that itself addresses someone (你妈死了, matched as nmsl) is its own target
        if entry.unambiguous or not any(_is_cjk(c) for c in self._haystack[start:end]):
            return False
        if self._spans is None:
            self._spans = word_spans(self._haystack)
        return cuts_word(self._spans, start, end)


#: English plural endings a listed Latin word also matches with (and the segmenter keeps whole)
PLURAL_SUFFIXES = ("s", "es")


def _visible_view(text: NormalizedText) -> tuple[NormalizedText, tuple[int, ...]] | None:
    """`text` with its original freed of invisible characters (offsets moved along), and per visible
    character its index in the original; None when the original has none.

    Everything that reads the original (contact details, context words, the clause and emoji views)
    then reads it as the normalised text does: "Q<ZWSP>Q：haoyun888" is a QQ contact, "哈<ZWSP>哈" is
    laughter. Only needed there: `normalize()` already drops these characters from `text.text`."""
    stripped = visible_chars(text.original)
    if stripped is None:
        return None
    chars, kept = stripped
    moved = {original: visible for visible, original in enumerate(kept)}
    try:
        offsets = tuple(moved[o] for o in text.offsets)
        ends = None if text.ends is None else tuple(moved[e - 1] + 1 for e in text.ends)
    except KeyError:  # a view whose characters stand for an invisible one: read it as it is
        return None
    return NormalizedText(text.text, offsets, chars, ends), kept


def _restore(match: Match, kept: tuple[int, ...], original: str) -> Match:
    """`match` found in the visible view, with its span moved back into the original text as sent."""
    start = kept[match.start] if match.start < len(kept) else len(original)
    end = kept[match.end - 1] + 1 if match.end > match.start else start
    return replace(match, start=start, end=end, matched_text=original[start:end])


def _plural_end(haystack: str, position: int) -> int | None:
    """Where an English plural ending ("s", "es") that starts at `position` and ends the word ends, or
    None: a listed Latin word also matches its plural ("spics" for "spic"), no other longer word.

    Example::

        >>> _plural_end("two spics here", 8), _plural_end("spicy", 4)
        (9, None)
    """
    for suffix in PLURAL_SUFFIXES:
        end = position + len(suffix)
        if haystack.startswith(suffix, position) and (end == len(haystack) or not is_word_char(haystack[end])):
            return end
    return None


def _first_keys(syllables: tuple[str, ...]) -> frozenset[str] | None:
    """The StartIndex.first_keys a match of `syllables` must begin at: its first syllable (a Han
    character read so) or that syllable's first letter at the start of a Latin run; None (always try)
    for a first syllable that is not plain letters."""
    if not syllables or not (syllables[0].isascii() and syllables[0].isalpha()):
        return None
    return frozenset((syllables[0], "latin:" + syllables[0][0]))


@lru_cache(maxsize=4096)
def _term_addresses(term: str) -> bool:
    """Whether a listed term itself addresses someone (it holds 你, 您... from zh_addressees.json)."""
    return addressed(normalize(term).text)


def _is_cjk(char: str) -> bool:
    return "\u3400" <= char <= "\u9fff" or "\uf900" <= char <= "\ufaff"


#: the characters `_is_cjk` accepts, for a scan in C over a whole text
_CJK_CHAR = re.compile("[\u3400-\u9fff\uf900-\ufaff]")


def _documents(path: Path) -> list[tuple[Path, dict[str, Any]]]:
    document = json.loads(path.read_text(encoding="utf-8"))
    if document.get("format") != LEXICON_FORMAT:
        raise ValueError(f"format: {path} has {document.get('format')!r}, expected {LEXICON_FORMAT!r}")
    documents = [(path, document)]
    for name in document.get("includes", []):
        documents.extend(_documents(path.parent / name))
    return documents


def _lexicon_version(entries: tuple[LexiconEntry, ...], rules: tuple[Rule, ...], contexts: tuple[ContextRule, ...],
                     ordinary_phrases: frozenset[str]) -> str:
    version = _content_version(entries)
    if rules or contexts or ordinary_phrases:  # the rule and context data are part of what the lexicon matches
        extra = json.dumps([[r.id, r.pattern.pattern] for r in rules] + [[c.id] for c in contexts]
                           + ([sorted(ordinary_phrases)] if ordinary_phrases else []), ensure_ascii=False)
        version = hashlib.sha256((version + extra).encode("utf-8")).hexdigest()[:16]
    return version


def _content_version(entries: tuple[LexiconEntry, ...]) -> str:
    # entries with only default matching fields hash as before, so existing versions stay stable
    canonical = json.dumps([[e.term, e.category, e.severity, e.source] + (
        [list(e.spaces), e.unambiguous, e.needs_target]
        if (e.spaces, e.unambiguous, e.needs_target) != (("chars",), False, False) else [])
        + ([e.max_action] if e.max_action is not None else [])
        for e in entries], ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]

"""Context for ambiguous Chinese insults: is someone addressed?

废物, 垃圾 and 猪头 are ordinary words about things (这部电影真垃圾); entries flagged `needs_target`
count only when the text addresses a person: the second person (你, 您, 你丫), the ways chat and
comment threads point at someone (楼上, 楼主, 主播, up主, 三楼...), or an imperative or opening vocative
that addresses the reader without naming them (别在这丢人现眼, 赶紧滚, 妹妹多大了). The addressee list and
the implied forms are data (data/zh_addressees.json).

Example::

    >>> addressed("你就是个废物"), addressed("这部电影真垃圾")
    (True, False)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["ADDRESSEES_PATH", "CONTEXTS_PATH", "ContextRule", "addressed", "load_contexts", "load_ordinary_phrases",
           "parse_addressees", "parse_contexts", "parse_ordinary_phrases", "quoted_in_view", "quoted_spans", "suppressing_context"]

ADDRESSEES_PATH = Path(__file__).resolve().parent / "data" / "zh_addressees.json"


@lru_cache(maxsize=1)
def _pattern() -> re.Pattern[str]:
    return parse_addressees(json.loads(ADDRESSEES_PATH.read_text(encoding="utf-8")), ADDRESSEES_PATH)


def parse_addressees(document: dict[str, Any], path: Path | str = "<addressees>") -> re.Pattern[str]:
    """One pattern for an addressee document: any of its `addressees` (literal words: 你, 楼主, 主播...)
    or of its `implied` regular expressions (the reader addressed without a word for them: 别在这丢人,
    赶紧滚, a message opening with 妹妹). Errors name the file and key.

    Example::

        >>> bool(parse_addressees({"addressees": ["你"], "implied": ["^兄弟"]}).search("兄弟别这样"))
        True
    """
    words = document.get("addressees")
    if not isinstance(words, list) or not words or not all(isinstance(w, str) and w for w in words):
        raise ValueError(f"addressees: {path} must hold a non-empty list of strings")
    implied = document.get("implied", [])
    if not isinstance(implied, list):
        raise ValueError(f"{path}: implied: must be a list of regular expressions, got {type(implied).__name__}")
    alternatives = [re.escape(w) for w in sorted(words, key=len, reverse=True)]
    for index, raw in enumerate(implied):
        compiled = _compile(raw, f"{path}: implied[{index}]")
        if compiled is None:
            raise ValueError(f"{path}: implied[{index}]: must be a non-empty regular expression string")
        alternatives.append(f"(?:{compiled.pattern})")
    return re.compile("|".join(alternatives))


def addressed(normalised: str) -> bool:
    """True when the (normalised) text addresses a person."""
    return _pattern().search(normalised) is not None


# --- Context rules: when a hit is not an attack (data/zh_context_rules.json) ------------------------

CONTEXTS_PATH = Path(__file__).resolve().parent / "data" / "zh_context_rules.json"
_HAN_ONLY = re.compile("[\u3400-\u9fff\uf900-\ufaff]+")
_QUOTES = {"“": "”", "「": "」", "『": "』", "\"": "\"", "《": "》", "‘": "’"}


@dataclass(frozen=True)
class ContextRule:
    """A context in which hits of some categories are not attacks (reporting, quoting, medicine...).

    A hit is suppressed when its category is in `suppresses`, its severity is at most `max_severity`
    and every condition given holds: `text` occurs within `scope` characters of the hit, `before` matches the
    `window` characters before the hit (anchor it with `$`), `after` matches the `window` characters
    after it (anchor it with `^`), `inside_quotes`: the hit lies inside quotation marks; `hit`, when
    given, must match within the hit's own text.
    """

    id: str
    kind: str
    suppresses: frozenset[str]
    max_severity: int
    text: re.Pattern[str] | None
    before: re.Pattern[str] | None
    after: re.Pattern[str] | None
    inside_quotes: bool
    window: int
    examples: tuple[tuple[str, str], ...]
    #: how far (characters) around the hit a `text` condition looks
    scope: int = 60
    #: when set, the hit's own (normalised) text must contain a match: a family-word context applies
    #: to 他妈 / 你妈 hits, not to every profanity hit before the same words (卧槽，车被刮了)
    hit: re.Pattern[str] | None = None

    def applies(self, haystack: str, category: str, severity: int, start: int, end: int,
                quoted: list[tuple[int, int]], original: str = "") -> bool:
        """True when this context suppresses a hit of `category`/`severity` on [start, end).

        `quoted` are the quoted spans in `haystack` coordinates. `text` is looked for within `scope`
        characters around the hit (the sentence it is in, not a distant part of a long text), and in
        `original`, the same neighbourhood of the text as sent (normalisation drops punctuation such
        as 《》 between Han characters)."""
        if category not in self.suppresses or severity > self.max_severity:
            return False
        if self.hit is not None and not self.hit.search(haystack[start:end]):
            return False
        if self.inside_quotes and not any(s <= start and end <= e for s, e in quoted):
            return False
        if self.before is not None and not self.before.search(haystack[max(0, start - self.window):start]):
            return False
        if self.after is not None and not self.after.search(haystack[end:end + self.window]):
            return False
        if self.text is None:
            return True
        near = haystack[max(0, start - self.scope):end + self.scope]
        return self.text.search(near) is not None or (bool(original) and self.text.search(original) is not None)


_KINDS = ("affection", "comparison", "medical", "legal_report", "quotation", "education", "counter_speech",
          "exaggeration", "negation", "anti_fraud", "support", "gaming", "family", "cooking", "news", "literature",
          "commerce")


def _compile(raw: Any, where: str) -> re.Pattern[str] | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw:
        raise ValueError(f"{where}: must be a non-empty regular expression string")
    try:
        return re.compile(raw)
    except re.error as error:
        raise ValueError(f"{where}: invalid pattern {raw!r}: {error}") from error


def parse_ordinary_phrases(document: dict[str, Any], path: Path | str = "<contexts>") -> frozenset[str]:
    """The `ordinary_phrases` of a context-rules document, validated; errors name the file and key.

    Each is a phrase of two or more Han characters that is ordinary talk although it sounds like a
    listed term (你妈 reads as 尼玛): a pinyin hit on exactly such a phrase is no evasion (see
    `Lexicon`'s homophone check). A document without the key has none.

    Example::

        >>> sorted(parse_ordinary_phrases({"ordinary_phrases": ["你妈"]}))
        ['你妈']
    """
    raw = document.get("ordinary_phrases", [])
    if not isinstance(raw, list):
        raise ValueError(f"{path}: ordinary_phrases: must be a list of Han phrases, got {type(raw).__name__}")
    for index, phrase in enumerate(raw):
        # the homophone check only ever looks at all-Han spans of two or more characters
        if not isinstance(phrase, str) or len(phrase) < 2 or not _HAN_ONLY.fullmatch(phrase):
            raise ValueError(f"{path}: ordinary_phrases[{index}]: must be a phrase of two or more Han characters, "
                             f"got {phrase!r}")
    return frozenset(raw)


def parse_contexts(document: dict[str, Any], path: Path | str = "<contexts>") -> tuple[ContextRule, ...]:
    """Validate and compile a context-rules document; errors name the file and key. The document's
    `ordinary_phrases` are validated too (`parse_ordinary_phrases`), so a broken file fails on load."""
    parse_ordinary_phrases(document, path)
    rules: list[ContextRule] = []
    for index, raw in enumerate(document.get("contexts", [])):
        where = f"{path}: contexts[{index}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
            raise ValueError(f"{where}: needs a string id")
        where = f"{path}: contexts[{index}] ({raw['id']})"
        if raw.get("kind") not in _KINDS:
            raise ValueError(f"{where}: kind: must be one of {_KINDS}, got {raw.get('kind')!r}")
        suppresses = raw.get("suppresses")
        if not isinstance(suppresses, list) or not suppresses:
            raise ValueError(f"{where}: suppresses: must be a non-empty list of categories")
        if not any(k in raw for k in ("text", "before", "after", "inside_quotes")):
            raise ValueError(f"{where}: needs at least one condition (text, before, after, inside_quotes)")
        examples = raw.get("examples", [])
        if not isinstance(examples, list) or not all(isinstance(e, list) and len(e) == 2 for e in examples):
            raise ValueError(f"{where}: examples: must be a list of [suppressed text, kept text] pairs")
        rules.append(ContextRule(
            raw["id"], raw["kind"], frozenset(suppresses), int(raw.get("max_severity", 3)),
            _compile(raw.get("text"), f"{where}: text"), _compile(raw.get("before"), f"{where}: before"),
            _compile(raw.get("after"), f"{where}: after"), bool(raw.get("inside_quotes", False)),
            int(raw.get("window", 8)), tuple((str(a), str(b)) for a, b in examples), int(raw.get("scope", 60)),
            _compile(raw.get("hit"), f"{where}: hit")))
    return tuple(rules)


@lru_cache(maxsize=4)
def load_contexts(path: Path = CONTEXTS_PATH) -> tuple[ContextRule, ...]:
    """The compiled context rules of a file (cached per path)."""
    return parse_contexts(json.loads(Path(path).read_text(encoding="utf-8")), path)


@lru_cache(maxsize=4)
def load_ordinary_phrases(path: Path = CONTEXTS_PATH) -> frozenset[str]:
    """The ordinary phrases of a context-rules file (cached per path), see `parse_ordinary_phrases`."""
    return parse_ordinary_phrases(json.loads(Path(path).read_text(encoding="utf-8")), path)


def quoted_spans(text: str) -> list[tuple[int, int]]:
    """Half-open spans of the text inside quotation marks (“…”, 「…」, "…", 《…》)."""
    spans: list[tuple[int, int]] = []
    position = 0
    while position < len(text):
        close = _QUOTES.get(text[position])
        if close is not None:
            end = text.find(close, position + 1)
            if end > position:
                spans.append((position + 1, end))
                position = end + 1
                continue
        position += 1
    return spans


def suppressing_context(haystack: str, category: str, severity: int, start: int, end: int,
                        contexts: tuple[ContextRule, ...], quoted: list[tuple[int, int]] | None = None,
                        original: str = "") -> ContextRule | None:
    """The first context rule that suppresses a hit on [start, end) of `haystack`, or None.

    `quoted`: the quoted spans in `haystack` coordinates (by default found in `haystack` itself;
    pass them when the haystack is normalised text whose quotation marks were folded away, see
    `quoted_in_view`); `original`: the neighbourhood of the hit in the text as sent (lower-cased),
    also searched by `text` conditions.

    Example::

        >>> rule = suppressing_context("他骂我“废物”，我已经举报了", "harassment", 2, 4, 6, load_contexts())
        >>> rule is not None
        True
    """
    for rule in contexts:
        if rule.inside_quotes and quoted is None:
            quoted = quoted_spans(haystack)
        if rule.applies(haystack, category, severity, start, end, quoted or [], original):
            return rule
    return None


def quoted_in_view(original: str, offsets: tuple[int, ...]) -> list[tuple[int, int]]:
    """The quoted spans of `original`, as spans of a normalised view with per-character `offsets`."""
    inside = quoted_spans(original)
    if not inside:
        return []
    marked = bytearray(len(original) + 1)
    for start, end in inside:
        marked[start:end] = b"\x01" * (end - start)
    spans: list[tuple[int, int]] = []
    run_start = -1
    for index, offset in enumerate([*offsets, len(original)]):
        quoted = index < len(offsets) and marked[offset] == 1
        if quoted and run_start < 0:
            run_start = index
        elif not quoted and run_start >= 0:
            spans.append((run_start, index))
            run_start = -1
    return spans

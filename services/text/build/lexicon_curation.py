"""Turning raw word lists into categorised lexicon entries, following `data/curation.json`.

The shipped lists carry no categories, and some entries are junk or harmful to match (political
names, everyday words). The rules, applied to each term after `normalize()`:

1. Junk is dropped: an empty term, a single Latin letter or digit, a term without any letter or
   symbol ("13."), and a single CJK character unless allowed (单字 such as 性 or 奶 are everywhere).
2. Terms listed under `exclude` are dropped, with the reason recorded.
3. A term listed under `category.<name>` gets that category; otherwise a CJK term containing one of
   `sexual_markers_cjk` is `sexual`; otherwise the list's default (`list_default_category`).
4. Severity is 1 or 3 when listed under `severity`, else 2.

Example::

    curation = Curation.from_json(json.loads(Path("services/text/data/curation.json").read_text()))
    result = curate([RawTerm("傻逼", "glin_profanity/data/dictionaries/chinese.json", "glin-profanity==4.1.0:...")], curation)
    result.entries[0].category  # "profanity"
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from services.common.taxonomy import TEXT_CATEGORIES as CATEGORIES
from services.common.text_match.lexicon import LexiconEntry
from services.common.text_match.normalize import normalize
from services.common.text_match.scripts import is_cjk, is_word_char

__all__ = ["Curation", "CurationResult", "RawTerm", "curate", "project_entries"]


@dataclass(frozen=True)
class RawTerm:
    """A term as a source list spells it; `list_key` is the package-relative path of the list."""

    term: str
    list_key: str
    source: str


@dataclass(frozen=True)
class Curation:
    """The rules from curation.json, with every term already normalised."""

    list_default_category: Mapping[str, str]
    single_cjk_allowed: frozenset[str]
    exclude: Mapping[str, str]  # normalised term -> reason
    category: Mapping[str, str]  # normalised term -> category
    sexual_markers_cjk: tuple[str, ...]
    severity: Mapping[str, int]  # normalised term -> 1 or 3

    def __post_init__(self) -> None:
        for name in list(self.list_default_category.values()) + list(self.category.values()):
            if name not in CATEGORIES:
                raise ValueError(f"category: {name!r} is not one of {CATEGORIES}")
        for term, level in self.severity.items():
            if level not in (1, 3):
                raise ValueError(f"severity: {term!r} has {level!r}; list terms under '1' or '3' only")

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Curation:
        """Read the curation.json document (see the module docstring)."""
        exclude = {_norm(t): reason for reason, terms in document["exclude"].items() for t in terms}
        category = {_norm(t): name for name, terms in document["category"].items() for t in terms}
        severity = {_norm(t): int(level) for level, terms in document["severity"].items() for t in terms}
        return cls(dict(document["list_default_category"]), frozenset(_norm(t) for t in document["single_cjk_allowed"]),
                   exclude, category, tuple(_norm(t) for t in document["sexual_markers_cjk"]), severity)


@dataclass(frozen=True)
class CurationResult:
    """Entries kept, and (term, source, reason) for every term dropped."""

    entries: tuple[LexiconEntry, ...]
    dropped: tuple[tuple[str, str, str], ...] = field(default=())


def curate(terms: Iterable[RawTerm], curation: Curation) -> CurationResult:
    """Apply the rules to every raw term (see the module docstring). Output is sorted."""
    entries: set[LexiconEntry] = set()
    dropped: set[tuple[str, str, str]] = set()
    for raw in terms:
        normalised = _norm(raw.term)
        reason = _junk_reason(normalised, curation) or curation.exclude.get(normalised)
        if reason:
            dropped.add((raw.term, raw.source, reason))
            continue
        if raw.list_key not in curation.list_default_category:
            raise ValueError(f"list_default_category: no default category for list {raw.list_key!r}")
        entries.add(LexiconEntry(raw.term, _category(normalised, raw.list_key, curation),
                                 curation.severity.get(normalised, 2), raw.source))
    return CurationResult(tuple(sorted(entries, key=_entry_key)), tuple(sorted(dropped)))


def project_entries(document: Mapping[str, Any], source: str) -> tuple[LexiconEntry, ...]:
    """The project's own terms from curation.json's `project_terms` (category -> severity -> terms)."""
    entries = [LexiconEntry(term, category, int(level), source)
               for category, levels in document.items() if not category.startswith("_")
               for level, terms in levels.items() for term in terms]
    return tuple(sorted(entries, key=_entry_key))


def _norm(term: str) -> str:
    return normalize(term).text


def _junk_reason(normalised: str, curation: Curation) -> str | None:
    if not normalised:
        return "junk: empty after normalisation"
    if len(normalised) == 1 and is_word_char(normalised):
        return "junk: a single letter or digit after normalisation"
    if not any(c.isalpha() or unicodedata.category(c) == "So" for c in normalised):
        return "junk: no letter or symbol"
    if len(normalised) == 1 and is_cjk(normalised) and normalised not in curation.single_cjk_allowed:
        return "junk: a single CJK character (too common inside ordinary words)"
    return None


def _category(normalised: str, list_key: str, curation: Curation) -> str:
    if normalised in curation.category:
        return curation.category[normalised]
    if any(is_cjk(c) for c in normalised) and any(m in normalised for m in curation.sexual_markers_cjk):
        return "sexual"
    return curation.list_default_category[list_key]


def _entry_key(entry: LexiconEntry) -> tuple[str, str, int, str]:
    return (entry.category, entry.term, entry.severity, entry.source)

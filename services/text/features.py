"""The cheap per-text analysis both text models share: normalise, segment, match, apply context, featurise.

`CheapAnalyzer.analyse(texts)` returns, per text, the hits that count (lexicon + context rules), the
structural flags and a fixed-order float feature vector (`FEATURE_NAMES`) that the heads read, plus
the segmented normalised text the TF-IDF and the embedding see. The two legacy classifiers
(`toxicity_en`, `spam_en`) each run once per batch and become two of the features.

Example::

    analyzer = CheapAnalyzer(lexicon, ContextEngine(load_context_rules()), SpamSignals.load(), legacy)
    [item] = analyzer.analyse(["you are an idiot"])
    item.features[FEATURE_NAMES.index("rule_harassment")]   # 0.667 (rule insult_you, severity 2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from services.common.contracts.text import CATEGORIES, LexiconHit
from services.common.text_match.lexicon import Lexicon
from services.common.text_match.normalize import NormalizedText, normalize
from services.text.context import ContextEngine, Flags
from services.text.segment import segment
from services.text.urls import SpamSignals

__all__ = ["Analysis", "CheapAnalyzer", "FLAG_NAMES", "LegacyScorer", "feature_names"]

FLAG_NAMES = ("second_person", "named_person", "group", "first_person", "quoted", "mention", "negated", "game")
#: Scores a batch of normalised texts with the two legacy classifiers: (P(toxic), P(spam)) per text.
LegacyScorer = Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]


def feature_names(signals: SpamSignals) -> tuple[str, ...]:
    """The structured feature columns, in order (recorded in each head's config)."""
    per_category = tuple(f"{kind}_{c}" for c in CATEGORIES for kind in ("lex", "rule", "review"))
    return ("legacy_toxicity", "legacy_spam", *per_category, *FLAG_NAMES, "dropped_hits", *signals.feature_names(),
            "log_tokens", "exclamations", "upper_ratio")


@dataclass(frozen=True)
class Analysis:
    """One text's cheap analysis: hits that count, flags, feature vector, and the text the models see."""

    normalized: NormalizedText
    segmented: NormalizedText
    hits: tuple[LexiconHit, ...]
    flags: Flags
    features: np.ndarray


class CheapAnalyzer:
    """Everything before the heads (see the module docstring); immutable, shareable across threads."""

    def __init__(self, lexicon: Lexicon, engine: ContextEngine, signals: SpamSignals, legacy: LegacyScorer) -> None:
        self.lexicon = lexicon
        self.engine = engine
        self.signals = signals
        self.legacy = legacy
        self.names = feature_names(signals)
        #: one-word Latin terms of the lexicon: the segmenter never splits them (segment.py)
        self.whole_words = frozenset(t for t in (normalize(e.term).text for e in lexicon.entries)
                                     if t.isascii() and t.isalpha())

    def analyse(self, texts: Sequence[str]) -> list[Analysis]:
        """Analyse a batch (the legacy classifiers run once for the whole batch)."""
        normalized = [normalize(text) for text in texts]
        segmented = [segment(n, self.whole_words) for n in normalized]
        toxicity, spam = self.legacy([s.text for s in segmented]) if texts else (np.zeros(0), np.zeros(0))
        out = []
        for index, (norm, seg) in enumerate(zip(normalized, segmented)):
            result = self.engine.analyse(seg, self.lexicon.find(seg))
            vector = self._vector(seg, result.hits, result.flags, float(toxicity[index]), float(spam[index]))
            out.append(Analysis(norm, seg, result.hits, result.flags, vector))
        return out

    def _vector(self, text: NormalizedText, hits: Sequence[LexiconHit], flags: Flags, toxicity: float,
                spam: float) -> np.ndarray:
        values: dict[str, float] = {"legacy_toxicity": toxicity, "legacy_spam": spam}
        for hit in hits:
            kind = "rule" if hit.source.startswith("rule:") else ("review" if hit.max_action else "lex")
            key = f"{kind}_{hit.category}"
            if key in self.names:  # a tenant `custom.*` category is not a head feature
                values[key] = max(values.get(key, 0.0), 1.0 if kind == "review" else hit.severity / 3.0)
        for name in FLAG_NAMES:
            values[name] = float(getattr(flags, name))
        values["dropped_hits"] = min(flags.dropped_hits, 3) / 3.0
        values.update(self.signals.features(text.text))
        original = text.original
        values["log_tokens"] = math.log1p(len(text.text.split())) / 5.0
        values["exclamations"] = min(original.count("!"), 5) / 5.0
        letters = sum(map(str.isalpha, original))  # C-level loops: long texts stay cheap
        values["upper_ratio"] = sum(map(str.isupper, original)) / letters if letters else 0.0
        return np.array([values.get(name, 0.0) for name in self.names], dtype=np.float32)

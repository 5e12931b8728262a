"""What a tenant classifier reads of a text: the frozen multilingual sentence encoder's vector beside a
TF-IDF of the text's character 1-3 grams fitted on the tenant's own training texts.

The encoder (USE multilingual v3, `services.text.multilingual`, 16 languages incl. Chinese and English)
carries meaning: a classifier trained on 200 labelled comments reaches paraphrases it never saw. The
n-grams carry the platform's own words, slang, names and evasions, which no frozen encoder knows (on the
project's Chinese heads the encoder alone gave dev average precision 0.84, with n-grams 0.94). The
n-grams read the normalised text (`services.common.text_match.normalize`: full-width, leetspeak,
separators and repeats folded, so evasions count as the words they hide); the encoder reads the text as
sent, in its windows (at most 10 of 96 characters, cut at sentence ends), and a text's vector is the
mean of its windows'.

Example::

    grams = CharNgrams.fit(["buy cheap followers", "see you at lunch"], max_terms=50)
    grams.transform(["cheap followers here"]).shape   # (1, number of terms kept)
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
from scipy import sparse

from services.common.text_match.normalize import normalize
from services.text.multilingual import DIMENSION, windows

__all__ = ["CharNgrams", "Encoder", "Featurizer", "ngrams", "prepared"]

NGRAM_SIZES = (1, 2, 3)


class Encoder(Protocol):
    """A sentence encoder: texts -> [N, dimension] vectors (`MultilingualEncoder`; a fake in unit tests)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def prepared(text: str) -> str:
    """The text as the classifier reads it: normalised and lower-cased.

    Example::

        >>> prepared("Ｂｕｙ  F.o.l.l.o.w.e.r.s")
        'buy followers'
    """
    return normalize(text).text.lower()


def ngrams(text: str, sizes: Sequence[int] = NGRAM_SIZES) -> Counter[str]:
    """The character n-grams of `text` (spaces kept inside, so word edges count), with their counts.

    Example::

        >>> sorted(ngrams("ab", (1, 2)).items())
        [('a', 1), ('ab', 1), ('b', 1)]
    """
    counts: Counter[str] = Counter()
    for n in sizes:
        counts.update(text[i:i + n] for i in range(len(text) - n + 1))
    return counts


@dataclass(frozen=True)
class CharNgrams:
    """A fitted character n-gram TF-IDF: its terms (column order) and their inverse document frequencies.
    Rows are sublinear (1 + ln count) times idf, L2-normalised."""

    terms: tuple[str, ...]
    idf: np.ndarray

    @classmethod
    def fit(cls, texts: Sequence[str], *, max_terms: int = 20_000, min_df: int = 2) -> CharNgrams:
        """The `max_terms` n-grams in the most of `texts` (at least `min_df` of them; ties by the term),
        with smooth idf ln((1 + N) / (1 + df)) + 1."""
        document_frequency: Counter[str] = Counter()
        for text in texts:
            document_frequency.update(ngrams(text).keys())
        kept = sorted((t for t, df in document_frequency.items() if df >= min_df),
                      key=lambda t: (-document_frequency[t], t))[:max_terms]
        count = len(texts)
        idf = np.array([math.log((1 + count) / (1 + document_frequency[t])) + 1.0 for t in kept], dtype=np.float32)
        return cls(tuple(kept), idf)

    def transform(self, texts: Sequence[str]) -> sparse.csr_matrix:
        """[len(texts), len(terms)] float32 TF-IDF rows, sparse."""
        column = {term: index for index, term in enumerate(self.terms)}
        data: list[float] = []
        indices: list[int] = []
        pointers = [0]
        for text in texts:
            row = {column[t]: (1.0 + math.log(c)) * float(self.idf[column[t]])
                   for t, c in ngrams(text).items() if t in column}
            norm = math.sqrt(sum(v * v for v in row.values())) or 1.0
            for index in sorted(row):
                indices.append(index)
                data.append(row[index] / norm)
            pointers.append(len(indices))
        return sparse.csr_matrix((np.array(data, np.float32), np.array(indices, np.int32), np.array(pointers, np.int64)),
                                 shape=(len(texts), len(self.terms)))


class Featurizer:
    """Texts -> [encoder vector (`DIMENSION`), n-gram TF-IDF] rows (see the module docstring)."""

    def __init__(self, encoder: Encoder, grams: CharNgrams) -> None:
        self.encoder = encoder
        self.grams = grams

    @property
    def width(self) -> int:
        """The number of columns a row has."""
        return DIMENSION + len(self.grams.terms)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """[len(texts), DIMENSION]: each text's windows embedded in one call, averaged per text."""
        pieces: list[str] = []
        owners: list[int] = []
        for index, text in enumerate(texts):
            for window in windows(text):  # at least one window, even for an empty text
                pieces.append(window)
                owners.append(index)
        vectors = self.encoder.embed(pieces) if pieces else np.zeros((0, DIMENSION), np.float32)
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        np.add.at(out, np.array(owners, dtype=np.int64), vectors)
        counts = np.bincount(np.array(owners, dtype=np.int64), minlength=len(texts)).astype(np.float32)
        return out / np.maximum(counts, 1.0)[:, None]

    def rows(self, texts: Sequence[str]) -> sparse.csr_matrix:
        """The classifier's input for raw `texts`, sparse [len(texts), width]: the encoder reads each text as
        sent (its punctuation cuts the windows at sentence ends), the n-grams read it `prepared`."""
        return sparse.hstack([sparse.csr_matrix(self.encode(texts)), self.grams.transform([prepared(t) for t in texts])],
                             format="csr", dtype=np.float32)

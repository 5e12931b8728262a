"""What the `auditmesh classifier` commands do, as functions (the CLI only parses and prints).

    auditmesh classifier train --examples labels.jsonl --tenant acme      # -> var/classifiers/acme/<version>/
    auditmesh classifier score --classifier var/classifiers/acme/<version> --text "free airdrop, connect your wallet"
    auditmesh classifier evaluate --classifier var/classifiers/acme/<version> --examples test.jsonl
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from services.trainer.artifact import digest, load, save, save_into
from services.trainer.examples import Example, read_examples
from services.trainer.train import TrainConfig, scores_at, train

__all__ = ["evaluate_file", "score_texts", "train_examples", "train_from_file"]


def _encoder(threads: int) -> Any:
    from services.text.multilingual import MultilingualEncoder

    return MultilingualEncoder(threads=threads)


def train_from_file(examples_path: Path, *, tenant: str, out: Path | None = None, into: Path | None = None,
                    config: TrainConfig = TrainConfig(), threads: int = 1, nice: int = 10,
                    progress: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Read `examples_path`, train, save into `out`; a summary (version, per-category held-out scores and
    learning curve, seconds). The process lowers its own priority by `nice` first, so a training run on a
    serving machine yields the CPU to moderation. Raises ExamplesError or TrainingError with a message a
    person can act on."""
    if nice > 0:
        os.nice(nice)
    started = time.perf_counter()
    examples = read_examples(examples_path)
    progress(f"read {len(examples)} examples from {examples_path}")
    return train_examples(examples, tenant=tenant, out=out, into=into, config=config, threads=threads,
                          progress=progress, started=started)


def train_examples(examples: Sequence[Example], *, tenant: str, out: Path | None = None, into: Path | None = None,
                   config: TrainConfig = TrainConfig(), threads: int = 1,
                   progress: Callable[[str], None] = lambda message: None, started: float | None = None) -> dict[str, Any]:
    """Train on `examples` (already read: a file, or the router's label store) and save the classifier into
    the directory `out`, or into `into/<tenant>/<version>/` (the text service's `tenant_classifiers`
    layout); the summary `train_from_file` returns. ValueError unless exactly one of them is given."""
    if (out is None) == (into is None):
        raise ValueError("give the classifier directory (out) or the classifiers folder (into), not both")
    started = time.perf_counter() if started is None else started
    trained = train(examples, encoder=_encoder(threads), config=config, progress=progress)
    if out is not None:
        path = save(trained, out, tenant=tenant, examples_digest=digest(examples))
    else:
        assert into is not None
        path = save_into(trained, into, tenant=tenant, examples_digest=digest(examples))
    classifier = load(path)
    return {"tenant": tenant, "version": classifier.version, "path": str(path), "examples": len(examples),
            "seconds": round(time.perf_counter() - started, 1), "categories": classifier.manifest["metrics"]}


def score_texts(classifier_path: Path, texts: Sequence[str], *, threads: int = 1) -> dict[str, Any]:
    """Each text's probability and flag per category from the classifier in `classifier_path`."""
    classifier = load(classifier_path)
    encoder = _encoder(threads)
    probabilities = classifier.probabilities(texts, encoder)
    flagged = classifier.flags(probabilities)
    return {"tenant": classifier.tenant, "version": classifier.version,
            "texts": [{"text": text, "categories": {c: {"probability": round(float(probabilities[c][i]), 4),
                                                        "flagged": bool(flagged[c][i])} for c in classifier.categories}}
                      for i, text in enumerate(texts)]}


def evaluate_file(classifier_path: Path, examples_path: Path, *, threads: int = 1) -> dict[str, Any]:
    """Per category the classifier knows, its precision, recall, F1 and accuracy at its threshold on the
    examples of `examples_path` labelled for that category (a test set the classifier never saw)."""
    import numpy as np

    classifier = load(classifier_path)
    examples = read_examples(examples_path)
    encoder = _encoder(threads)
    flagged = classifier.flagged([e.text for e in examples], encoder)
    out: dict[str, Any] = {}
    for category in classifier.categories:
        rows = [i for i, e in enumerate(examples) if category in e.labels]
        if not rows:
            continue
        positive = np.array([examples[i].labels[category] == 1 for i in rows])
        hits = flagged[category][rows]
        scores = scores_at(hits.astype(np.float64), positive, 0.5)
        out[category] = {"precision": scores.precision, "recall": scores.recall, "f1": scores.f1,
                         "accuracy": round(float(np.mean(hits == positive)), 4), "rows": scores.rows,
                         "positives": scores.positives}
    return {"tenant": classifier.tenant, "version": classifier.version, "examples": len(examples),
            "categories": out}

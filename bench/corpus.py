"""The project's functional corpus (services/text/data/corpus/<lang>.jsonl), read for benchmarks.

Row schema: the brief's (id, lang, text, labels, functionality, template, split, hard_negative,
evasion, source, licence). The split is assigned per template, so the test split holds templates no
model or threshold was tuned on.

Example::

    rows = load_corpus(["en"], split="test")
    rows[0].labels      # ("violence",)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

CORPUS_DIR = Path(__file__).resolve().parents[1] / "services" / "text" / "data" / "corpus"
LANGS = ("en", "zh")
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class CorpusRow:
    id: str
    lang: str
    text: str
    labels: tuple[str, ...]
    functionality: str
    template: str
    split: str
    hard_negative: bool
    evasion: str | None


def corpus_path(lang: str, directory: Path = CORPUS_DIR) -> Path:
    return directory / f"{lang}.jsonl"


def available_langs(directory: Path = CORPUS_DIR) -> list[str]:
    """The languages whose corpus file exists."""
    return [lang for lang in LANGS if corpus_path(lang, directory).exists()]


def load_corpus(langs: Sequence[str], split: str, directory: Path = CORPUS_DIR) -> list[CorpusRow]:
    """Rows of `split` in each of `langs`; FileNotFoundError naming the missing file."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    rows = []
    for lang in langs:
        path = corpus_path(lang, directory)
        if not path.exists():
            raise FileNotFoundError(f"no {lang} corpus at {path} (languages present: {available_langs(directory)})")
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            data = json.loads(line)
            if data["split"] == split:
                rows.append(CorpusRow(data["id"], data["lang"], data["text"], tuple(data["labels"]), data["functionality"],
                                      data["template"], data["split"], bool(data["hard_negative"]), data.get("evasion")))
    return rows

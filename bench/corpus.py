"""The project's functional corpus (services/text/data/corpus/<lang>.jsonl), read for benchmarks.

Row schema: the brief's (id, lang, text, labels, functionality, template, split, hard_negative,
evasion, source, licence). The split is assigned per template, so the test split holds templates no
model or threshold was tuned on.

Example::

    rows = load_corpus(["en"], split="test")
    rows[0].labels      # ("violence",)
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from services.text.build.corpus_rows import CORPUS_DIR, Row, read_rows
from services.text.build.corpus_split import SPLITS

__all__ = ["CORPUS_DIR", "LANGS", "SPLITS", "CorpusRow", "available_langs", "corpus_path", "load_corpus"]

LANGS = ("en", "zh")
#: A row as the generators write it (the one row type, services/text/build/corpus_rows.py).
CorpusRow = Row


def corpus_path(lang: str, directory: Path = CORPUS_DIR) -> Path:
    return directory / f"{lang}.jsonl"


def available_langs(directory: Path = CORPUS_DIR) -> list[str]:
    """The languages whose corpus file exists."""
    return [lang for lang in LANGS if corpus_path(lang, directory).exists()]


def load_corpus(langs: Sequence[str], split: str, directory: Path = CORPUS_DIR) -> list[CorpusRow]:
    """Rows of `split` in each of `langs`; FileNotFoundError naming the missing file."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    rows: list[CorpusRow] = []
    for lang in langs:
        path = corpus_path(lang, directory)
        if not path.exists():
            raise FileNotFoundError(f"no {lang} corpus at {path} (languages present: {available_langs(directory)})")
        rows.extend(row for row in read_rows(path) if row.split == split)
    return rows

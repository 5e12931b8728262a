"""One functional-corpus row (`services/text/data/corpus/<lang>.jsonl`): what both generators write
(`corpus_gen` for English, `corpus_gen_zh` for Chinese) and what the benchmarks read back.

Row schema (JSON Lines, one object per line, UTF-8 unescaped, sorted keys): id, lang, text, labels
(the categories that SHOULD fire; [] = benign), functionality, template, split (per template),
hard_negative, evasion (the obfuscation family applied, or null), source, licence.

Example::

    >>> row = Row("en-x-t1-0", "en", "hi", (), "x", "t1", "test", False, None, source_of("en", "1.0"), "Apache-2.0")
    >>> dumps([row.as_json()])[:55]
    '{"evasion": null, "functionality": "x", "hard_negative"'
    >>> Row.from_json(row.as_json()) == row
    True
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

__all__ = ["CORPUS_DIR", "Row", "dumps", "read_rows", "source_of"]

CORPUS_DIR = Path(__file__).resolve().parents[1] / "data" / "corpus"


def source_of(lang: str, version: object) -> str:
    """The provenance string every row of the `lang` corpus at `version` carries."""
    return f"auditmesh-functional-{lang}/{version} (project-written)"


@dataclass(frozen=True)
class Row:
    """One corpus row; `as_json` gives the schema's field names."""

    id: str
    lang: str
    text: str
    labels: tuple[str, ...]
    functionality: str
    template: str
    split: str
    hard_negative: bool
    evasion: str | None
    source: str
    licence: str

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "lang": self.lang, "text": self.text, "labels": list(self.labels),
                "functionality": self.functionality, "template": self.template, "split": self.split,
                "hard_negative": self.hard_negative, "evasion": self.evasion, "source": self.source,
                "licence": self.licence}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Row:
        """The row a parsed JSON line holds (KeyError naming a missing field)."""
        return cls(data["id"], data["lang"], data["text"], tuple(data["labels"]), data["functionality"],
                   data["template"], data["split"], bool(data["hard_negative"]), data["evasion"],
                   data["source"], data["licence"])


def dumps(rows: Iterable[Mapping[str, Any]]) -> str:
    """The JSON Lines text: one object per row, sorted keys, UTF-8 characters written as themselves."""
    return "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows)


def read_rows(path: Path) -> list[Row]:
    """Every row of the JSON Lines file at `path` (blank lines skipped)."""
    return [Row.from_json(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

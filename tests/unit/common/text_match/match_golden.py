"""Golden digests of what the default lexicon finds in the functional corpus: a regression net for
speed work on the matcher (issue: long-text matching cost), so "faster" provably means "same results".

Every corpus row (zh.jsonl and en.jsonl) is matched on its own, and so is every block of
`BLOCK_ROWS` consecutive rows joined into one long text (the long-text paths: prefilters, anchors,
per-text indexes, hits near other hits). Two records per language:

* `categories`: row id -> the categories that fire on that row (rows where none fires are left out),
  readable: a reviewer of a rule change sees which rows changed verdict, e.g. `zh-hate_...-3:
  [] -> ["hate"]`;
* `rows` / `blocks`: each result as the list of `Match.to_json()` dicts, hashed (sha256, first
  `DIGEST_CHARS` hex digits), in corpus order: the finer net (spans, terms, severities) that speed
  work on the matcher must keep.

Regenerate ONLY when a result change is intended (and say so in the commit)::

    .venv/bin/python -m tests.unit.common.text_match.match_golden --write
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from services.common.text_match.lexicon import DEFAULT_LEXICON_PATH, Lexicon
from services.common.text_match.normalize import normalize

ROOT = Path(__file__).resolve().parents[4]
CORPUS_DIR = ROOT / "services" / "text" / "data" / "corpus"
GOLDEN_PATH = Path(__file__).resolve().parent / "data" / "match_golden.json"
LANGS = ("zh", "en")
#: rows joined into one long text; the joiners are what the languages use between sentences
BLOCK_ROWS = 40
JOINERS = {"zh": "", "en": " "}
DIGEST_CHARS = 10


def corpus_rows(lang: str) -> list[dict[str, Any]]:
    """The rows of one corpus file, in file order."""
    path = CORPUS_DIR / f"{lang}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def corpus_texts(lang: str) -> list[str]:
    """The row texts of one corpus file, in file order."""
    return [str(row["text"]) for row in corpus_rows(lang)]


def fired(lexicon: Lexicon, text: str) -> list[str]:
    """The sorted categories `lexicon.find` reports for `text`."""
    return sorted({m.category for m in lexicon.find(normalize(text))})


def category_map(lexicon: Lexicon, lang: str) -> dict[str, list[str]]:
    """Row id -> the categories that fire, for every row of `lang` where at least one does."""
    out: dict[str, list[str]] = {}
    for row in corpus_rows(lang):
        categories = fired(lexicon, str(row["text"]))
        if categories:
            out[str(row["id"])] = categories
    return out


def category_changes(expected: dict[str, list[str]], actual: dict[str, list[str]]) -> list[str]:
    """`row id: before -> after` for every row whose categories differ (readable, no texts)."""
    return [f"{row_id}: {expected.get(row_id, [])} -> {actual.get(row_id, [])}"
            for row_id in sorted(set(expected) | set(actual)) if expected.get(row_id, []) != actual.get(row_id, [])]


def blocks(texts: list[str], lang: str) -> list[str]:
    """Consecutive rows joined into long texts of `BLOCK_ROWS` rows each."""
    return [JOINERS[lang].join(texts[i:i + BLOCK_ROWS]) for i in range(0, len(texts), BLOCK_ROWS)]


def digest(lexicon: Lexicon, text: str) -> str:
    """The short hash of everything `lexicon.find` reports for `text`."""
    result = [m.to_json() for m in lexicon.find(normalize(text))]
    encoded = json.dumps(result, ensure_ascii=False, sort_keys=True).encode("utf-8")
    return hashlib.sha256(encoded).hexdigest()[:DIGEST_CHARS]


def compute(lexicon: Lexicon) -> dict[str, Any]:
    """The golden document for the current matcher: per language, row and block digests."""
    document: dict[str, Any] = {"format": "auditmesh-match-golden/2", "block_rows": BLOCK_ROWS,
                                "digest_chars": DIGEST_CHARS}
    for lang in LANGS:
        texts = corpus_texts(lang)
        document[lang] = {"categories": category_map(lexicon, lang),
                          "rows": [digest(lexicon, t) for t in texts],
                          "blocks": [digest(lexicon, t) for t in blocks(texts, lang)]}
    return document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"overwrite {GOLDEN_PATH.name}")
    args = parser.parse_args(argv)
    document = compute(Lexicon.load(DEFAULT_LEXICON_PATH))
    if args.write:
        GOLDEN_PATH.parent.mkdir(exist_ok=True)
        GOLDEN_PATH.write_text(_golden_json(document), encoding="utf-8")
    print(json.dumps({lang: {"rows": len(document[lang]["rows"]), "blocks": len(document[lang]["blocks"])}
                      for lang in LANGS}))
    return 0


def _golden_json(document: dict[str, Any]) -> str:
    """Digests compact; the category map one row id per line, so a diff of the file reads as verdicts."""
    lines = ["{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in document.items() if k not in LANGS) + ","]
    for index, lang in enumerate(LANGS):
        part = document[lang]
        lines.append(f'{json.dumps(lang)}:{{"categories":{{')
        items = sorted(part["categories"].items())
        lines += [f"{json.dumps(k, ensure_ascii=False)}:{json.dumps(v)}" + ("," if i < len(items) - 1 else "")
                  for i, (k, v) in enumerate(items)]
        tail = "}" + ("," if index < len(LANGS) - 1 else "")
        lines.append(f'}},"rows":{json.dumps(part["rows"], separators=(",", ":"))},'
                     f'"blocks":{json.dumps(part["blocks"], separators=(",", ":"))}{tail}')
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

"""Golden digests of what the default lexicon finds in the functional corpus: a regression net for
speed work on the matcher (issue: long-text matching cost), so "faster" provably means "same results".

Every corpus row (zh.jsonl and en.jsonl) is matched on its own, and so is every block of
`BLOCK_ROWS` consecutive rows joined into one long text (the long-text paths: prefilters, anchors,
per-text indexes, hits near other hits). Each result is the list of `Match.to_json()` dicts, hashed
(sha256, first `DIGEST_CHARS` hex digits). The golden file stores the digests in corpus order, so a
mismatch names the row or block that changed.

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


def corpus_texts(lang: str) -> list[str]:
    """The row texts of one corpus file, in file order."""
    path = CORPUS_DIR / f"{lang}.jsonl"
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


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
    document: dict[str, Any] = {"format": "auditmesh-match-golden/1", "block_rows": BLOCK_ROWS,
                                "digest_chars": DIGEST_CHARS}
    for lang in LANGS:
        texts = corpus_texts(lang)
        document[lang] = {"rows": [digest(lexicon, t) for t in texts],
                          "blocks": [digest(lexicon, t) for t in blocks(texts, lang)]}
    return document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"overwrite {GOLDEN_PATH.name}")
    args = parser.parse_args(argv)
    document = compute(Lexicon.load(DEFAULT_LEXICON_PATH))
    if args.write:
        GOLDEN_PATH.parent.mkdir(exist_ok=True)
        GOLDEN_PATH.write_text(json.dumps(document, separators=(",", ":")) + "\n", encoding="utf-8")
    print(json.dumps({lang: {"rows": len(document[lang]["rows"]), "blocks": len(document[lang]["blocks"])}
                      for lang in LANGS}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

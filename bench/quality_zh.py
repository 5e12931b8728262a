"""Lexicon-only quality of the Chinese matcher on the functional corpus (issue 14), printed as JSON.

Run from the repository root::

    .venv/bin/python bench/quality_zh.py [--split test]

A row counts as flagged for a category when `Lexicon.find` gives a hit of that category (in-process,
no model, no policy). Reported: recall per labelled category, recall per evasion family (a positive
row counts as caught when every labelled category fires), false-positive rate on hard negatives and
on all benign rows (any hit), and the functionalities missed most. Tune on train/dev only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.common.text_match.lexicon import DEFAULT_LEXICON_PATH, Lexicon  # noqa: E402
from services.common.text_match.normalize import normalize  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "services" / "text" / "data" / "corpus" / "zh.jsonl"


def measure(rows: list[dict[str, Any]], lexicon: Lexicon) -> dict[str, Any]:
    """The quality figures for `rows` (corpus rows of one split)."""
    hit_by_cat: Counter[str] = Counter()
    pos_by_cat: Counter[str] = Counter()
    evasion_total: Counter[str] = Counter()
    evasion_caught: Counter[str] = Counter()
    func_total: Counter[str] = Counter()
    func_ok: Counter[str] = Counter()
    hard_total = hard_fp = benign_total = benign_fp = 0
    fp_cats: Counter[str] = Counter()
    misses: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        fired = {m.category for m in lexicon.find(normalize(row["text"]))}
        labels = set(row["labels"])
        func_total[row["functionality"]] += 1
        if not labels:
            benign_total += 1
            benign_fp += bool(fired)
            if row["hard_negative"]:
                hard_total += 1
                hard_fp += bool(fired)
            fp_cats.update(fired)
            func_ok[row["functionality"]] += not fired
            if fired:
                misses[row["functionality"]].append(row["text"])
            continue
        for category in labels:
            pos_by_cat[category] += 1
            hit_by_cat[category] += category in fired
        caught = labels <= fired
        func_ok[row["functionality"]] += caught
        if not caught:
            misses[row["functionality"]].append(row["text"])
        if row["evasion"]:
            evasion_total[row["evasion"]] += 1
            evasion_caught[row["evasion"]] += caught
    evasion_n = sum(evasion_total.values())
    return {
        "rows": len(rows),
        "recall_by_category": {c: round(hit_by_cat[c] / n, 3) for c, n in sorted(pos_by_cat.items())},
        "evasion_recall": round(sum(evasion_caught.values()) / evasion_n, 3) if evasion_n else None,
        "evasion_recall_by_family": {e: round(evasion_caught[e] / n, 3) for e, n in sorted(evasion_total.items())},
        "hard_negative_fpr": round(hard_fp / hard_total, 3) if hard_total else None,
        "benign_fpr": round(benign_fp / benign_total, 3) if benign_total else None,
        "false_positive_categories": dict(sorted(fp_cats.items())),
        "accuracy_by_functionality": {f: round(func_ok[f] / n, 3) for f, n in sorted(func_total.items())},
        "examples_missed": {f: texts[:3] for f, texts in sorted(misses.items())},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="test", choices=("train", "dev", "test"))
    parser.add_argument("--no-examples", action="store_true", help="leave out the missed examples")
    args = parser.parse_args()
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    result = measure([r for r in rows if r["split"] == args.split], Lexicon.load(DEFAULT_LEXICON_PATH))
    if args.no_examples:
        result.pop("examples_missed")
    print(json.dumps({"split": args.split, "lexicon": "default", **result}, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

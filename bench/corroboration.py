"""Choose `text_semantic`'s corroboration floor on the DEV split (services/text/semantic.py).

In a text MiniLM read (no CJK), `text_semantic` reports a default-lexicon or rule hit only when the
semantic score of the hit's category is at least `CORROBORATION_FLOOR`. This script scores every
dev text once with the floor off (every hit reported), then for each candidate floor applies the
model's own `corroborated` function to the rows MiniLM read and judges them with the policy's
`evaluate` (`bench.quality.fired_categories`), as the router would. Prints JSON per floor: dev macro
F1, hard-negative FPR, evasion recall and how many hits were held back, and the chosen floor: the
lowest floor within `TIE` of the best dev macro F1 (a lower floor leaves the lexicon more say, for
rare slurs the heads have not seen). Copy it into `CORROBORATION_FLOOR`; the test split is never
read here::

    python -m bench.corroboration --lang en
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from bench.balanced_band import macro_f1
from bench.corpus import load_corpus
from bench.quality import DEFAULT_POLICY, fired_categories
from bench.text_models import score
from bench.quality_metrics import hard_negative_fpr
from services.common.contracts import text as contract
from services.common.serving.model_repository import DEFAULT_ROOT
from services.common.serving.onnx_session import SessionOptions
from services.common.text_match.scripts import is_cjk
from services.router.control.versions import compile_stored_policy
from services.text.semantic import TextSemanticModel, corroborated

FLOORS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)
#: dev macro-F1 differences below this are noise (a few rows): the lower floor wins
TIE = 0.002


def with_floor(texts: Sequence[str], rows: Sequence[contract.TextRow], floor: float) -> list[contract.TextRow]:
    """`rows` as `text_semantic` would report them at `floor` (texts with CJK keep every hit)."""
    scores = [np.array([row.scores[c] for c in contract.CATEGORIES], dtype=np.float32) for row in rows]
    return [row if floor <= 0 or any(is_cjk(c) for c in text)
            else replace(row, matches=corroborated(row.matches, s, floor))
            for text, row, s in zip(texts, rows, scores)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.corroboration", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", choices=("en",), default="en")
    parser.add_argument("--policy", type=Path, default=DEFAULT_POLICY)
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT)
    args = parser.parse_args(argv)
    policy = compile_stored_policy(args.policy.read_text(encoding="utf-8"), str(args.policy))
    corpus = load_corpus([args.lang], "dev")
    texts = [r.text for r in corpus]
    templates, labels = [r.template for r in corpus], [r.labels for r in corpus]
    print(f"[corroboration] scoring {len(texts)} dev texts with every hit reported", file=sys.stderr, flush=True)
    model = TextSemanticModel(args.repository, SessionOptions(intra_op_threads=1), corroboration_floor=0.0)
    scored = score(model, texts).rows
    results: list[dict[str, Any]] = []
    for floor in FLOORS:
        rows = with_floor(texts, scored, floor)
        fired = [fired_categories(policy, t, r) for t, r in zip(texts, rows)]
        evaded = [set(r.labels) <= set(f) for r, f in zip(corpus, fired) if r.evasion and r.labels]
        hard = hard_negative_fpr(templates, labels, fired, [r.hard_negative for r in corpus], resamples=0)
        results.append({"floor": floor, "macro_f1": round(macro_f1(templates, labels, fired), 4),
                        "hard_negative_fpr": hard["fpr"],
                        "evasion_recall": round(float(np.mean(evaded)), 4) if evaded else None,
                        "hits_held_back": sum(len(a.matches) - len(b.matches) for a, b in zip(scored, rows))})
    best = max(r["macro_f1"] for r in results)
    chosen = min((r for r in results if best - r["macro_f1"] <= TIE), key=lambda r: r["floor"])
    print(json.dumps({"command": " ".join(["python -m bench.corroboration", *(argv or sys.argv[1:])]),
                      "split": "dev", "lang": args.lang, "texts": len(texts), "chosen": chosen["floor"],
                      "floors": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

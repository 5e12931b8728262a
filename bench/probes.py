"""Decisions on the probe sets (bench/probe_sets/*.tsv: short messages written outside the corpus), as JSON.

Run from the repository root after `make models`::

    python -m bench.probes                          # every bench/probe_sets/*.tsv, all three profiles
    python -m bench.probes bench/probe_sets/zh_c.tsv --profile fast

Each line of a probe file is `label<TAB>text`, label `benign` or the categories that should fire
(comma-separated). The text models run in this process as in `bench.quality` (balanced escalates what
the router would, decisions come from the router's `evaluate` under the policy). Per file and profile:
harmful lines with any flag, recall per category, benign lines flagged, and the lines themselves that
were missed or wrongly flagged. bench/probe_sets/README.md says which files rules were tuned against.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

if __package__ in (None, ""):  # `python bench/probes.py`: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.quality import DEFAULT_POLICY, fired_categories, profile_rows
from bench.text_models import TextModel, load_model, score
from services.common.serving.model_repository import DEFAULT_ROOT
from services.common.taxonomy import TEXT_CATEGORIES
from services.router.control.versions import compile_stored_policy
from services.router.policy import PROFILES, CompiledPolicy, Profile
from services.router.profiles import FAST_MODEL, SEMANTIC_MODEL
from services.text.build.probe_lines import PROBES_DIR, ProbeLine, parse_probe

__all__ = ["PROBES_DIR", "ProbeLine", "main", "parse_probe", "run_probe", "summarise"]


def summarise(lines: Sequence[ProbeLine], fired: Sequence[Sequence[str]]) -> dict[str, Any]:
    """What one profile did on one probe file (see the module docstring)."""
    caught: Counter[str] = Counter()
    support: Counter[str] = Counter()
    misses, false_positives = [], []
    for line, categories in zip(lines, fired):
        flagged = set(categories)
        for category in line.labels:
            support[category] += 1
            caught[category] += category in flagged
        if line.labels and not line.labels & flagged:
            misses.append({"text": line.text, "labels": sorted(line.labels), "fired": sorted(flagged)})
        if not line.labels and flagged:
            false_positives.append({"text": line.text, "fired": sorted(flagged)})
    harmful = sum(1 for line in lines if line.labels)
    benign = len(lines) - harmful
    return {"harmful": harmful, "harmful_flagged": sum(1 for line, f in zip(lines, fired) if line.labels and f),
            "harmful_caught": harmful - len(misses),
            "recall": {c: round(caught[c] / support[c], 3) for c in TEXT_CATEGORIES if support[c]},
            "benign": benign, "benign_flagged": len(false_positives),
            "misses": misses, "false_positives": false_positives}


def run_probe(lines: Sequence[ProbeLine], profiles: Sequence[Profile], models: Mapping[str, TextModel],
              policy: CompiledPolicy) -> dict[str, Any]:
    """Per profile, `summarise` of the decisions on `lines`."""
    texts = [line.text for line in lines]
    fast = score(models[FAST_MODEL], texts)
    out: dict[str, Any] = {}
    for profile in profiles:
        rows, _, _ = profile_rows(profile, texts, models, policy, fast)
        out[profile] = summarise(lines, [fired_categories(policy, t, r) for t, r in zip(texts, rows)])
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.probes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, help="probe files (default: bench/probe_sets/*.tsv)")
    parser.add_argument("--profile", action="append", choices=PROFILES, help="profiles to run (default: all three)")
    parser.add_argument("--policy", type=Path, default=DEFAULT_POLICY)
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT)
    args = parser.parse_args(argv)
    files = args.files or sorted(PROBES_DIR.glob("*.tsv"))
    policy = compile_stored_policy(args.policy.read_text(encoding="utf-8"), str(args.policy))
    profiles: list[Profile] = list(dict.fromkeys(args.profile or PROFILES))
    models = {name: load_model(name, args.repository) for name in (FAST_MODEL, SEMANTIC_MODEL)}
    report = {"command": " ".join(["python -m bench.probes", *(argv if argv is not None else sys.argv[1:])]),
              "policy": f"{policy.name}@{policy.version}",
              "probes": {str(path): run_probe(parse_probe(path.read_text(encoding="utf-8"), str(path)), profiles,
                                              models, policy) for path in files}}
    print(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

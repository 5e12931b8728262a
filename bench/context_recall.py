"""Harm in context: are harmful messages still found inside a longer benign text? Prints JSON.

Real forum posts and long comments carry one harmful sentence among benign ones. This takes the harmful
messages of a naturalistic split that the model flags on their own (at most 80 characters), puts each among
six benign messages of the same split that it does not flag (seeded, random position; texts of about 200-400
characters), and reports the share still flagged (`context_recall`, 1.0 = nothing lost to the context), and
the share of texts made of seven benign messages alone that are flagged (`benign_context_flagged`: what
length alone costs). Default policy; a text counts as flagged when any category takes REVIEW or BLOCK.

Run: `python -m bench.context_recall --lang zh --split dev [--profile balanced] [--repository DIR]`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from bench.natural_quality import load_split
from bench.quality import DEFAULT_POLICY, fired_categories, profile_rows
from bench.text_models import load_model, score
from services.common.serving.model_repository import DEFAULT_ROOT
from services.router.control.versions import compile_stored_policy
from services.router.policy import PROFILES, CompiledPolicy, Profile
from services.router.profiles import FAST_MODEL, SEMANTIC_MODEL

#: Messages per text: one harmful among PADDING benign ones (or PADDING + 1 benign alone).
PADDING = 6
#: The longest message used (characters): a message, not a post.
MAX_MESSAGE_CHARS = 80
TEXTS = 300


def flagged(texts: Sequence[str], profile: Profile, models: Mapping[str, Any], policy: CompiledPolicy) -> list[bool]:
    """Whether each text takes REVIEW or BLOCK in any category under `policy` and `profile`."""
    fast = score(models[FAST_MODEL], texts)
    rows, _, _ = profile_rows(profile, texts, models, policy, fast)
    return [bool(fired_categories(policy, text, row)) for text, row in zip(texts, rows)]


def measure(rows: Sequence[Mapping[str, Any]], judge: Callable[[Sequence[str]], list[bool]], *, seed: int = 7,
            texts: int = TEXTS, joiner: str = "") -> dict[str, Any]:
    """The report (module docstring) for one split's rows; `judge` says which texts are flagged; messages are
    joined by `joiner` (" " for English)."""
    rng = random.Random(seed)
    benign = [str(r["text"]) for r in rows if not r["labels"] and 20 <= len(str(r["text"])) <= MAX_MESSAGE_CHARS]
    benign = [t for t, hit in zip(benign, judge(benign)) if not hit]
    harmful = [str(r["text"]) for r in rows if r["labels"] and len(str(r["text"])) <= MAX_MESSAGE_CHARS]
    alone = judge(harmful)
    found = [t for t, hit in zip(harmful, alone) if hit]
    rng.shuffle(found)
    found = found[:texts]
    placed = []
    for message in found:
        pads = rng.sample(benign, PADDING)
        at = rng.randrange(PADDING + 1)
        placed.append(joiner.join(pads[:at] + [message] + pads[at:]))
    padding_only = [joiner.join(rng.sample(benign, PADDING + 1)) for _ in range(len(placed))]
    kept = judge(placed)
    lengths = sorted(len(t) for t in placed)
    return {"harmful_flagged_alone": round(sum(alone) / len(alone), 4) if alone else None,
            "texts": len(placed), "median_chars": lengths[len(lengths) // 2] if lengths else 0,
            "context_recall": round(sum(kept) / len(kept), 4) if kept else None,
            "benign_context_flagged": round(sum(judge(padding_only)) / len(padding_only), 4) if padding_only else None}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.context_recall", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", choices=("zh", "en"), default="zh")
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--profile", choices=PROFILES, default="balanced")
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    rows = load_split(args.lang, args.split)
    if not rows:
        print(f"no {args.split} rows for {args.lang}", file=sys.stderr)
        return 1
    policy = compile_stored_policy(DEFAULT_POLICY.read_text(encoding="utf-8"), str(DEFAULT_POLICY))
    models = {name: load_model(name, args.repository) for name in (FAST_MODEL, SEMANTIC_MODEL)}
    report = {"command": " ".join(["python -m bench.context_recall", *(argv if argv is not None else sys.argv[1:])]),
              "lang": args.lang, "split": args.split, "profile": args.profile, "policy": f"{policy.name}@{policy.version}",
              **measure(rows, lambda texts: flagged(texts, args.profile, models, policy), seed=args.seed,
                        joiner=" " if args.lang == "en" else "")}
    print(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Decision quality on the naturalistic corpus (`services/text/data/corpus_natural/`): messages written
one by one as real users write them, the test split by writers who never read the training files.

    python -m bench.natural_quality --lang zh                  # test split, fast and balanced profiles
    python -m bench.natural_quality --lang zh --split dev      # the dev fold of the training files

The text models run in process exactly as `bench.quality` runs them (default policy; a message is
flagged when any category takes REVIEW or BLOCK). Reported as JSON per profile: harmful messages flagged
(recall), benign messages flagged (false-positive rate) and hard negatives flagged, per category
(recall and precision of that category firing), per functionality and per target (the share of its
messages decided correctly: a harmful one flagged, a benign one not), per length group, and per
subcategory (of the rows written as that kind whose parent category fired, the share for which the kind
counted, and of the rows for which it counted, the share written as that kind: the kind deciding the
category's action, docs/taxonomy.md). Test rows that nearly duplicate a
training row (`near_duplicates`: Jaccard >= `NEAR_DUPLICATE` over character 4-grams) are left out and
counted. The split's size, length distribution and distinct-bigram ratio (characters for Chinese, words
for English) are reported with it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

from bench.quality import DEFAULT_POLICY, fired_categories, profile_rows
from bench.text_models import load_model, score
from services.common.serving.model_repository import DEFAULT_ROOT
from services.common.taxonomy import MODELLED_SUBCATEGORIES, SUBCATEGORIES, TEXT_CATEGORIES
from services.router.control.versions import compile_stored_policy
from services.router.policy import Profile
from services.router.profiles import FAST_MODEL, SEMANTIC_MODEL

__all__ = ["NATURAL_DIR", "NEAR_DUPLICATE", "corpus_stats", "counted_kinds", "decide", "length_bucket", "load_split",
           "near_duplicates", "report", "subcategory_report"]

NATURAL_DIR = Path(__file__).resolve().parents[1] / "services" / "text" / "data" / "corpus_natural"
NEAR_DUPLICATE = 0.8
_SHINGLE = 4


def load_split(lang: str, split: str, directory: Path = NATURAL_DIR) -> list[dict[str, Any]]:
    """The rows of `lang`'s `test_*.jsonl` files (split "test"), or the dev fold of its training files
    (split "dev", as `natural_corpus.natural_rows` cuts it), or all training rows (split "train")."""
    if split == "test":
        return [json.loads(line) for path in sorted((directory / lang).glob("test_*.jsonl"))
                for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    from services.text.build.natural_corpus import natural_rows

    return [r for r in natural_rows(lang, directory) if r["split"] == split]


def _shingles(text: str) -> set[str]:
    compact = "".join(text.split()).lower()
    return {compact[i:i + _SHINGLE] for i in range(max(1, len(compact) - _SHINGLE + 1))}


def near_duplicates(rows: Sequence[Mapping[str, Any]], others: Sequence[Mapping[str, Any]],
                    threshold: float = NEAR_DUPLICATE) -> set[int]:
    """Indexes of `rows` whose character 4-gram Jaccard with some row of `others` is >= `threshold`.

    Example::

        >>> sorted(near_duplicates([{"text": "你这个傻子真的烦"}, {"text": "今天天气很好"}], [{"text": "你这个傻子真的烦!"}]))
        [0]
    """
    index: dict[str, list[int]] = defaultdict(list)
    other_shingles = [_shingles(str(o["text"])) for o in others]
    for k, shingles in enumerate(other_shingles):
        for s in shingles:
            index[s].append(k)
    found: set[int] = set()
    for i, row in enumerate(rows):
        mine = _shingles(str(row["text"]))
        overlap: dict[int, int] = defaultdict(int)
        for s in mine:
            for k in index.get(s, ()):
                overlap[k] += 1
        if any(n / len(mine | other_shingles[k]) >= threshold for k, n in overlap.items()):
            found.add(i)
    return found


def corpus_stats(rows: Sequence[Mapping[str, Any]], *, words: bool = False) -> dict[str, Any]:
    """Size, harmful/benign/hard-negative counts, length quartiles (characters) and the distinct bigram
    ratio: of characters (Chinese), or of lower-cased words with `words` (English)."""
    lengths = sorted(len(str(r["text"])) for r in rows)
    units = [str(r["text"]).lower().split() if words else list(str(r["text"])) for r in rows]
    bigrams = [" ".join(u[i:i + 2]) for u in units for i in range(len(u) - 1)]
    quartiles = statistics.quantiles(lengths, n=4) if len(lengths) > 1 else lengths * 3
    return {"rows": len(rows), "harmful": sum(1 for r in rows if r["labels"]),
            "benign": sum(1 for r in rows if not r["labels"]),
            "hard_negatives": sum(1 for r in rows if r.get("hard_negative")),
            "length": {"min": lengths[0] if lengths else 0, "q1": quartiles[0], "median": quartiles[1],
                       "q3": quartiles[2], "max": lengths[-1] if lengths else 0},
            "distinct_bigram_ratio": round(len(set(bigrams)) / len(bigrams), 4) if bigrams else 0.0}


def report(rows: Sequence[Mapping[str, Any]], fired: Sequence[set[str]]) -> dict[str, Any]:
    """Recall, false-positive rates, per category, per functionality and per target (module docstring)."""
    harmful = [i for i, r in enumerate(rows) if r["labels"]]
    benign = [i for i, r in enumerate(rows) if not r["labels"]]
    hard = [i for i in benign if rows[i].get("hard_negative")]

    def share(indexes: Sequence[int], flagged: bool) -> float | None:
        return round(sum(1 for i in indexes if bool(fired[i]) == flagged) / len(indexes), 4) if indexes else None

    categories = {}
    for category in TEXT_CATEGORIES:
        positives = [i for i, r in enumerate(rows) if category in r["labels"]]
        firing = [i for i in range(len(rows)) if category in fired[i]]
        if positives or firing:
            categories[category] = {
                "support": len(positives),
                "recall": round(sum(1 for i in positives if category in fired[i]) / len(positives), 4) if positives else None,
                "precision": round(sum(1 for i in firing if category in rows[i]["labels"]) / len(firing), 4) if firing else None}
    groups: dict[str, dict[str, list[int]]] = {"functionality": defaultdict(list), "target": defaultdict(list),
                                               "length": defaultdict(list)}
    for i, row in enumerate(rows):
        for key in ("functionality", "target"):
            groups[key][str(row.get(key, "?"))].append(i)
        groups["length"][length_bucket(len(str(row["text"])))].append(i)
    correct = {key: {name: {"rows": len(ix), "correct": round(sum(1 for i in ix if bool(fired[i]) == bool(rows[i]["labels"]))
                                                             / len(ix), 4)}
                     for name, ix in sorted(by.items())} for key, by in groups.items()}
    return {"harmful_flagged": share(harmful, True), "benign_flagged": share(benign, True),
            "hard_negatives_flagged": share(hard, True),
            "accuracy": round(sum(1 for i in range(len(rows)) if bool(fired[i]) == bool(rows[i]["labels"])) / len(rows), 4)
            if rows else None,
            "categories": categories, "by_functionality": correct["functionality"], "by_target": correct["target"],
            "by_length": {name: {**correct["length"][name], "harmful_flagged": share([i for i in ix if rows[i]["labels"]], True),
                                 "benign_flagged": share([i for i in ix if not rows[i]["labels"]], True)}
                          for name, ix in sorted(groups["length"].items())}}


def counted_kinds(policy: Any, row: Any, fired: set[str]) -> set[str]:
    """The modelled kinds that count for a text model's `row` under `policy`: the parent category fired and
    the kind's share reaches the policy's `share` (services/router/fusion.py, `refine_by_subcategory`)."""
    document = policy.document
    return {kind for kind in MODELLED_SUBCATEGORIES if SUBCATEGORIES[kind].parent in fired
            and row.subcategories.get(kind, 0.0) >= document.subcategory_rule(kind)[0]}


def subcategory_report(rows: Sequence[Mapping[str, Any]], fired: Sequence[set[str]],
                       kinds: Sequence[set[str]]) -> dict[str, Any]:
    """Per modelled kind (module docstring): support, rows whose parent fired, recall and precision of the
    kind counting among the rows whose parent fired."""
    out: dict[str, Any] = {}
    for kind in MODELLED_SUBCATEGORIES:
        parent = SUBCATEGORIES[kind].parent
        written = [i for i, r in enumerate(rows) if kind in r.get("subcategories", [])]
        reached = [i for i in written if parent in fired[i]]
        counted = [i for i in range(len(rows)) if kind in kinds[i] and parent in rows[i]["labels"]]
        out[kind] = {"support": len(written), "parent_fired": len(reached),
                     "recall": round(sum(1 for i in reached if kind in kinds[i]) / len(reached), 4) if reached else None,
                     "precision": round(sum(1 for i in counted if kind in rows[i].get("subcategories", [])) / len(counted), 4)
                     if counted else None}
    return out


def length_bucket(characters: int) -> str:
    """The length group of a text: "a <200", "b 200-599", "c 600-1499" or "d >=1500" characters.

    Example::

        >>> length_bucket(150), length_bucket(1500)
        ('a <200', 'd >=1500')
    """
    for limit, name in ((200, "a <200"), (600, "b 200-599"), (1500, "c 600-1499")):
        if characters < limit:
            return name
    return "d >=1500"


def decide(rows: Sequence[Mapping[str, Any]], profiles: Sequence[Profile], models: Mapping[str, Any],
           policy: Any) -> dict[str, dict[str, Any]]:
    """`report` per profile for `rows` under `policy` (the fast model scores every row once)."""
    texts = [str(r["text"]) for r in rows]
    fast = score(models[FAST_MODEL], texts)
    results: dict[str, dict[str, Any]] = {}
    for profile in profiles:
        scored, _, _ = profile_rows(profile, texts, models, policy, fast)
        fired = [set(fired_categories(policy, t, r)) for t, r in zip(texts, scored)]
        results[profile] = {**report(rows, fired), "subcategories": subcategory_report(
            rows, fired, [counted_kinds(policy, r, f) for r, f in zip(scored, fired)])}
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.natural_quality", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", choices=("zh", "en"), default="zh")
    parser.add_argument("--split", choices=("test", "dev"), default="test")
    parser.add_argument("--profile", action="append", choices=("fast", "balanced", "accurate"))
    parser.add_argument("--repository", type=Path, default=DEFAULT_ROOT)
    args = parser.parse_args(argv)
    rows = load_split(args.lang, args.split)
    if not rows:
        print(f"no {args.split} rows for {args.lang} under {NATURAL_DIR / args.lang}", file=sys.stderr)
        return 1
    dropped = near_duplicates(rows, load_split(args.lang, "train")) if args.split == "test" else set()
    kept = [r for i, r in enumerate(rows) if i not in dropped]
    policy = compile_stored_policy(DEFAULT_POLICY.read_text(encoding="utf-8"), str(DEFAULT_POLICY))
    profiles: list[Profile] = list(dict.fromkeys(args.profile or ("fast", "balanced")))
    models = {name: load_model(name, args.repository) for name in (FAST_MODEL, SEMANTIC_MODEL)}
    results = decide(kept, profiles, models, policy)
    out = {"command": " ".join(["python -m bench.natural_quality", *(argv if argv is not None else sys.argv[1:])]),
           "lang": args.lang, "split": args.split, "policy": f"{policy.name}@{policy.version}",
           "near_duplicates_left_out": len(dropped), "corpus": corpus_stats(kept, words=args.lang == "en"),
           "profiles": results}
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

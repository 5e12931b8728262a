"""Each phrase rule's and lexicon source's marginal contribution over the rest of the fast model (issue 38,
item 3): what the decisions lose when that one source's hits are taken away, everything else kept.

    python -m bench.rule_contribution --lang zh            # the naturalistic dev fold and the template dev split

The fast model scores each dev row once (default policy; a category "fires" when it takes REVIEW or BLOCK,
as `bench.quality` decides). Then, for every match source (`rule:<id>`, or a lexicon's source), the rows it
hits are decided again without its hits. A category that stops firing is a true positive lost when the
row is labelled with it (an evasion true positive when the template row is an evasion form), and a false
positive removed when it is not. `net` is false positives removed minus true positives lost: a source
with a positive `net` and no evasion loss does more harm than good on dev. Printed as JSON, worst first.
Dev only: the test splits stay the measure of whatever is changed from this.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from services.common.contracts import text as contract

__all__ = ["DevRow", "contribution", "main"]


@dataclass(frozen=True)
class DevRow:
    """One dev row: which set it comes from ("natural" or "template"), its text, its labels and its evasion
    family (template rows only; None otherwise)."""

    kind: str
    text: str
    labels: frozenset[str]
    evasion: str | None = None


Decide = Callable[[str, contract.TextRow], set[str]]


def contribution(rows: Sequence[DevRow], scored: Sequence[contract.TextRow], decide: Decide) -> dict[str, dict[str, int]]:
    """Per match source: rows hit, true positives lost, false positives removed (per row kind), evasion
    true positives lost and `net` (see the module docstring), from the rows' scored answers and `decide`
    (text, row) -> the categories that fire.

    Example::

        >>> hit = contract.LexiconHit("hate", "x", 3, 0, 1, "x", "rule:a")
        >>> rows = [DevRow("natural", "x", frozenset()), DevRow("natural", "x", frozenset({"hate"}))]
        >>> answers = [contract.TextRow({"hate": 0.0}, (hit,))] * 2
        >>> fires = lambda text, row: {h.category for h in row.matches}
        >>> contribution(rows, answers, fires)["rule:a"]
        {'natural_fp_removed': 1, 'natural_rows': 2, 'natural_tp_lost': 1, 'net': 0}
    """
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row, answer in zip(rows, scored):
        before = decide(row.text, answer)
        for source in sorted({hit.source for hit in answer.matches}):
            counts = out[source]
            counts[f"{row.kind}_rows"] += 1
            after = decide(row.text, replace(answer, matches=tuple(h for h in answer.matches if h.source != source)))
            for category in sorted(before - after):
                if category in row.labels:
                    counts[f"{row.kind}_tp_lost"] += 1
                    counts["net"] -= 1
                    if row.evasion:
                        counts["evasion_tp_lost"] += 1
                else:
                    counts[f"{row.kind}_fp_removed"] += 1
                    counts["net"] += 1
    return {source: {**{k: v for k, v in sorted(counts.items()) if k != "net"}, "net": counts["net"]}
            for source, counts in out.items()}


def main(argv: Sequence[str] | None = None) -> int:
    from bench.corpus import load_corpus
    from bench.natural_quality import load_split
    from bench.quality import DEFAULT_POLICY, fired_categories
    from bench.text_models import load_model, score
    from services.common.serving.model_repository import DEFAULT_ROOT
    from services.router.control.versions import compile_stored_policy
    from services.router.profiles import FAST_MODEL

    parser = argparse.ArgumentParser(prog="python -m bench.rule_contribution", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", choices=("zh", "en"), default="zh")
    args = parser.parse_args(argv)
    policy = compile_stored_policy(DEFAULT_POLICY.read_text(encoding="utf-8"), str(DEFAULT_POLICY))
    rows = [DevRow("natural", str(r["text"]), frozenset(r["labels"])) for r in load_split(args.lang, "dev")]
    rows += [DevRow("template", r.text, frozenset(r.labels), r.evasion or None) for r in load_corpus([args.lang], "dev")]
    scored = score(load_model(FAST_MODEL, DEFAULT_ROOT), [r.text for r in rows]).rows
    result = contribution(rows, scored, lambda text, row: set(fired_categories(policy, text, row)))
    ranked = sorted(result.items(), key=lambda item: (-item[1]["net"], item[0]))
    harmful = [s for s, c in ranked if c["net"] > 0 and not c.get("evasion_tp_lost")]
    out: dict[str, Any] = {
        "command": " ".join(["python -m bench.rule_contribution", *(argv if argv is not None else sys.argv[1:])]),
        "rows": {"natural": sum(1 for r in rows if r.kind == "natural"),
                 "template": sum(1 for r in rows if r.kind == "template")},
        "sources_hitting": len(result), "net_harmful_without_evasion_loss": harmful,
        "sources": dict(ranked)}
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

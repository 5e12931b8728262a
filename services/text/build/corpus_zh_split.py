"""Train / dev / test assignment for the Chinese corpus: per template, stratified per functionality.

Rows never pick a split themselves: a template's rows (its fillers, its hand-written evasions and
its generated obfuscations) all land in the template's split, so the test split measures
generalisation to sentence frames never seen in training. Within each functionality the templates
are ordered by a stable hash of their id and the first ~20% go to test, the next ~20% to dev, the
rest to train; a functionality with at least three templates therefore has one in every split.

The hash, the cut and the hold-out constants are shared with the English generator
(`corpus_split`); what is Chinese-only is keying the hash by the file's seed, the bucket rule for
functionalities of one or two templates, and the hold-out keeping every evasion family in train.
Long shared filler lists hold back a quarter of their values (by stable hash, rounded up) for the
test split, so test rows also contain fillers that train and dev never use.

Example::

    splits = assign_splits(spec)       # {"har_worthless_01": "train", ...}
    held = held_out_fillers(spec)      # {"you": frozenset({"楼主", ...}), ...}
"""

from __future__ import annotations

import math

from services.text.build.corpus_split import HOLDOUT_MIN_VALUES, HOLDOUT_SHARE, SPLITS, cut_ranked, stable_hash
from services.text.build.corpus_zh_spec import CorpusSpec, SlotValue

__all__ = ["HOLDOUT_MIN_VALUES", "SPLITS", "assign_splits", "held_out_fillers", "stable_hash"]


def assign_splits(spec: CorpusSpec) -> dict[str, str]:
    """Template id -> split, for every template in `spec`."""
    splits: dict[str, str] = {}
    for functionality in spec.functionalities:
        ordered = sorted(functionality.templates, key=lambda t: (stable_hash(spec.seed, "split", t.id), t.id))
        count = len(ordered)
        if count < 3:
            for template in ordered:
                bucket = stable_hash(spec.seed, "bucket", template.id) % 10
                splits[template.id] = "train" if bucket < 6 else "dev" if bucket < 8 else "test"
            continue
        splits.update(cut_ranked([template.id for template in ordered]))
    return splits


def held_out_fillers(spec: CorpusSpec) -> dict[str, frozenset[str]]:
    """Shared filler name -> the values only test templates may use."""
    return {name: _held_out(spec.seed, name, values) for name, values in spec.fillers.items()
            if len(values) >= HOLDOUT_MIN_VALUES}


def _held_out(seed: int, name: str, values: tuple[SlotValue, ...]) -> frozenset[str]:
    ordered = sorted(values, key=lambda v: (stable_hash(seed, "holdout", name, v.text), v.text))
    wanted = math.ceil(len(values) * HOLDOUT_SHARE)
    left = _family_counts(values)
    held: set[str] = set()
    for value in ordered:
        if len(held) == wanted:
            break
        # Keep at least one value of each evasion family for train and dev.
        if left[value.evasion] > 1:
            held.add(value.text)
            left[value.evasion] -= 1
    return frozenset(held)


def _family_counts(values: tuple[SlotValue, ...]) -> dict[str | None, int]:
    counts: dict[str | None, int] = {}
    for value in values:
        counts[value.evasion] = counts.get(value.evasion, 0) + 1
    return counts

"""Train / dev / test assignment shared by the corpus generators: per template, by a stable hash.

Rows never pick a split themselves: all rows of a template land in the template's split, so the test
split measures generalisation to sentence frames never seen in training. Within each functionality
the templates are ranked by a stable hash of their id (each generator keys the hash its own way:
English by language, Chinese by the file's seed) and `cut_ranked` sends the first ~20% to test, the
next ~20% to dev and the rest to train. Long filler lists (`HOLDOUT_MIN_VALUES` or more values) hold
back about `HOLDOUT_SHARE` of their values for test templates.

Example::

    >>> cut_ranked(["a", "b", "c", "d", "e"])
    {'a': 'test', 'b': 'dev', 'c': 'train', 'd': 'train', 'e': 'train'}
    >>> stable_hash("en:split:t1") == stable_hash("en", "split", "t1")
    False
"""

from __future__ import annotations

import hashlib
from typing import Sequence

__all__ = ["DEV_SHARE", "HOLDOUT_MIN_VALUES", "HOLDOUT_SHARE", "SPLITS", "TEST_SHARE", "cut_ranked", "stable_hash"]

SPLITS = ("train", "dev", "test")
TEST_SHARE = 0.2
DEV_SHARE = 0.2
# A filler list shorter than this is kept whole: holding back one of five values would leave train
# with too little variety in that slot.
HOLDOUT_MIN_VALUES = 8
HOLDOUT_SHARE = 0.25


def stable_hash(*parts: object) -> int:
    """A hash of `parts` that is the same in every process and Python version (unlike `hash`)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def cut_ranked(ranked: Sequence[str]) -> dict[str, str]:
    """Template id -> split for one functionality's ids in rank order: the first ~20% test (at least
    one when there are 2 or more), the next ~20% dev (at least one when there are 3 or more)."""
    n = len(ranked)
    n_test = max(round(n * TEST_SHARE), 1 if n >= 2 else 0)
    n_dev = max(round(n * DEV_SHARE), 1 if n >= 3 else 0)
    return {template_id: "test" if i < n_test else "dev" if i < n_test + n_dev else "train"
            for i, template_id in enumerate(ranked)}

"""Reading taxonomy-1 policies (written before issue 13) under taxonomy 2. Pure.

Taxonomy 1 had one text score, `hate`, which was a generic toxicity probability: insults aimed at a
person and attacks on groups alike. Taxonomy 2 splits it into `harassment` (a person) and `hate` (a
protected group). A policy whose `categories` has `hate` but no `harassment` entry is a taxonomy-1
file: its `hate` thresholds are applied to `harassment` too, so the file keeps blocking what it
blocked. A taxonomy-2 policy that wants no harassment thresholds says so with `harassment: {}`.
Every other category keeps its meaning (a category with no entry never acts on its score).
Documented in docs/taxonomy.md ("Migration"); `compile_policy` applies this and logs each note.

Example::

    >>> categories, notes = migrate_categories({"hate": "T"})
    >>> categories
    {'hate': 'T', 'harassment': 'T'}
    >>> len(notes)
    1
"""

from __future__ import annotations

from typing import Mapping, TypeVar

__all__ = ["migrate_categories"]

T = TypeVar("T")

#: Taxonomy-1 category -> the taxonomy-2 categories its thresholds now cover (besides itself).
SPLIT_CATEGORIES: Mapping[str, tuple[str, ...]] = {"hate": ("harassment",)}


def migrate_categories(categories: Mapping[str, T]) -> tuple[dict[str, T], list[str]]:
    """(categories as taxonomy 2 reads them, one note per migrated key); no notes = nothing changed."""
    migrated = dict(categories)
    notes = []
    for old, new_names in SPLIT_CATEGORIES.items():
        if old not in categories:
            continue
        for new in new_names:
            if new not in categories:
                migrated[new] = categories[old]
                notes.append(f"taxonomy 1 migration: categories.{old} thresholds also applied to {new} (in taxonomy 1 "
                             f"`{old}` meant generic toxicity; add a categories.{new} entry to set it on its own, "
                             f"see docs/taxonomy.md)")
    return migrated, notes

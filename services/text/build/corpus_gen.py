"""Expand a functional-corpus template file into the versioned JSON Lines corpus (HateCheck style).

    python -m services.text.build.corpus_gen --lang en --out services/text/data/corpus/en.jsonl
    python -m services.text.build.corpus_gen --lang en --table     # per-functionality counts (Markdown)

The output is deterministic: every random choice is seeded from a SHA-256 of the language and a
template id or text, so re-running gives a byte-identical file. Nothing depends on the language
except the template file, which is ``services/text/data/corpus/<lang>_templates.yaml``.

Template file format (YAML; validated on load by `corpus_spec.load_spec`, errors name file and key)::

    lang: en
    version: "1.0.0"              # goes into every row's `source`
    licence: Apache-2.0
    max_rows: 12                  # default rows per template (at most 25)
    fillers:                      # slot name -> values; a template uses them as {slot}
      name: [Alex, Priya, ...]
    functionalities:
      - name: threat_direct       # [a-z0-9_]; goes into row ids
        description: explicit threat of violence   # optional; shown in --table
        labels: [violence]        # categories that SHOULD fire; [] = benign. A template may override.
        hard_negative: false      # benign rows designed to look harmful (labels [] or [profanity])
        evasion: null             # obfuscation family of hand-written evasions; a template may override
        max_rows: 12              # optional
        templates:
          - {id: vi-dir-01, text: "I'll be outside your {place} at {time}."}
      - name: evasion_leet
        templates: [...]          # hand-written evasions, each with its own labels
        derive:                   # plus seeded obfuscations of other functionalities' rows
          transform: leet         # a name in obfuscate.TRANSFORMS
          from: [threat_direct]   # source functionalities (their hand-written templates)
          rows: 1                 # rows per source template
          words: [kill, die]      # obfuscate these words where they occur ...
          word_slots: [insult]    # ... and the fillers of these slots;
          whole_text: false       # or the whole text (true), for texts of at most max_words words
          substring: false        # match words inside longer words (for scripts without spaces)

Splits are assigned per TEMPLATE, never per row: within each functionality the templates are
ordered by a hash of their id and the first ~20% go to test, the next ~20% to dev, the rest to train
(at least one of each when a functionality has 3 or more templates). A derived template takes the
split of the template it was made from. Filler lists of 8 or more values are split too: a quarter
of the values (the lowest hashes) are used only by test templates, so the test split measures
words the training data never showed. Rows whose text (case-folded, spaces collapsed) already
appeared are dropped, so no text is in two splits; the same text with different labels is an error.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from services.text.build.corpus_rows import CORPUS_DIR, Row, dumps, source_of
from services.text.build.corpus_spec import (TEXT_CATEGORIES, CorpusSpecError, Derive, Functionality, Spec,
                                             Template, load_spec, slots_of)
from services.text.build.corpus_split import HOLDOUT_MIN_VALUES, HOLDOUT_SHARE, SPLITS, cut_ranked, stable_hash
from services.text.build.obfuscate import TRANSFORMS

__all__ = ["DATA_DIR", "HOLDOUT_MIN_VALUES", "SPLITS", "Row", "assign_splits", "filler_pools", "generate", "render", "summary_table"]

DATA_DIR = CORPUS_DIR


@dataclass(frozen=True)
class _Draft:
    """A row before de-duplication and numbering; `values` are the slot fillers it used."""

    text: str
    values: Mapping[str, str]
    template: str
    functionality: str
    labels: tuple[str, ...]
    hard_negative: bool
    evasion: str | None
    split: str


def assign_splits(lang: str, templates: Sequence[Template]) -> dict[str, str]:
    """Template id -> split for one functionality's templates (see the module docstring).

    Example::

        assign_splits("en", templates)  # {"vi-dir-01": "train", "vi-dir-02": "test", ...}
    """
    ordered = sorted(templates, key=lambda t: (stable_hash(f"{lang}:split:{t.id}"), t.id))
    return cut_ranked([t.id for t in ordered])


def filler_pools(lang: str, fillers: Mapping[str, Sequence[str]]) -> dict[str, dict[str, tuple[str, ...]]]:
    """Split -> slot -> the values templates of that split may use (test values are disjoint when held out)."""
    pools: dict[str, dict[str, tuple[str, ...]]] = {split: {} for split in SPLITS}
    for slot, values in fillers.items():
        if len(values) < HOLDOUT_MIN_VALUES:
            for split in SPLITS:
                pools[split][slot] = tuple(values)
            continue
        ranked = sorted(values, key=lambda v: (stable_hash(f"{lang}:filler:{v.casefold()}"), v))
        held = set(ranked[:round(len(values) * HOLDOUT_SHARE)])
        pools["test"][slot] = tuple(v for v in values if v in held)
        pools["train"][slot] = pools["dev"][slot] = tuple(v for v in values if v not in held)
    return pools


def _expand(template: Template, pool: Mapping[str, tuple[str, ...]], max_rows: int,
            lang: str) -> list[tuple[str, dict[str, str]]]:
    slots = slots_of(template.text)
    sizes = [len(pool[s]) for s in slots]
    total = 1
    for size in sizes:
        total *= size
    rng = random.Random(stable_hash(f"{lang}:expand:{template.id}"))
    expanded = []
    for index in sorted(rng.sample(range(total), min(total, max_rows))):
        values: dict[str, str] = {}
        for slot, size in zip(reversed(slots), reversed(sizes)):
            index, digit = divmod(index, size)
            values[slot] = pool[slot][digit]
        text = re.sub(r"\{([a-z_][a-z0-9_]*)\}", lambda m: values[m.group(1)], template.text)
        expanded.append((text, values))
    return expanded


def _derived(functionality: Functionality, derive: Derive, sources: Sequence[_Draft], lang: str) -> list[_Draft]:
    by_template: dict[str, list[_Draft]] = {}
    for draft in sources:
        by_template.setdefault(draft.template, []).append(draft)
    transform = TRANSFORMS[derive.transform]
    out = []
    for template_id, drafts in by_template.items():
        candidates = [(d, p) for d in drafts if (p := _targets(derive, d)) is not None]
        rng = random.Random(stable_hash(f"{lang}:derive:{functionality.name}:{template_id}"))
        for draft, pattern in rng.sample(candidates, min(derive.rows, len(candidates))):
            text_rng = random.Random(stable_hash(f"{lang}:{derive.transform}:{draft.text}"))
            # One disguised word per row, as evaders write: "you absolute 1d10t", not every word mangled.
            match = text_rng.choice(list(pattern.finditer(draft.text)))
            text = draft.text[:match.start()] + transform(match.group(0), text_rng) + draft.text[match.end():]
            if text != draft.text:
                out.append(_Draft(text, draft.values, f"{template_id}~{functionality.name}", functionality.name,
                                  draft.labels, draft.hard_negative, derive.transform, draft.split))
    return out


def _targets(derive: Derive, draft: _Draft) -> re.Pattern[str] | None:
    """The words of `draft` that `derive` obfuscates, as one pattern; None when the draft has none."""
    if derive.whole_text:
        fits = derive.max_words is None or len(draft.text.split()) <= derive.max_words
        return re.compile(".+", re.S) if fits else None
    words = list(derive.words) + [draft.values[s] for s in derive.word_slots if s in draft.values]
    words = sorted({w for w in words if w}, key=lambda w: (-len(w), w))
    if not words:
        return None
    alternation = "|".join(re.escape(w) for w in words)
    pattern = re.compile(alternation if derive.substring else rf"(?<!\w)(?:{alternation})(?!\w)", re.IGNORECASE)
    return pattern if pattern.search(draft.text) else None


def _drafts(spec: Spec) -> list[_Draft]:
    pools = filler_pools(spec.lang, spec.fillers)
    authored: dict[str, list[_Draft]] = {}
    for functionality in spec.functionalities:
        splits = assign_splits(spec.lang, functionality.templates)
        authored[functionality.name] = [
            _Draft(text, values, t.id, functionality.name, t.labels, functionality.hard_negative, t.evasion,
                   splits[t.id])
            for t in functionality.templates
            for text, values in _expand(t, pools[splits[t.id]], functionality.max_rows, spec.lang)]
    drafts: list[_Draft] = []
    for functionality in spec.functionalities:
        drafts.extend(authored[functionality.name])
        if functionality.derive is not None:
            sources = [d for name in functionality.derive.sources for d in authored[name]]
            drafts.extend(_derived(functionality, functionality.derive, sources, spec.lang))
    return drafts


def generate(spec: Spec) -> list[Row]:
    """Every row of the corpus, in file order (functionalities and templates as the file lists them).

    Example::

        rows = generate(load_spec(DATA_DIR / "en_templates.yaml", transforms=frozenset(TRANSFORMS)))
    """
    source = source_of(spec.lang, spec.version)
    seen: dict[str, _Draft] = {}
    numbers: Counter[str] = Counter()
    rows = []
    for draft in _drafts(spec):
        key = " ".join(draft.text.casefold().split())
        if key in seen:
            first = seen[key]
            if first.labels != draft.labels:
                raise CorpusSpecError(f"{spec.lang}_templates.yaml: templates {first.template!r} and "
                                      f"{draft.template!r} both give {draft.text!r} with labels "
                                      f"{list(first.labels)} and {list(draft.labels)}")
            continue
        seen[key] = draft
        n = numbers[draft.template]
        numbers[draft.template] += 1
        rows.append(Row(f"{spec.lang}-{draft.functionality}-{draft.template}-{n}", spec.lang, draft.text,
                        draft.labels, draft.functionality, draft.template, draft.split, draft.hard_negative,
                        draft.evasion, source, spec.licence))
    return rows


def render(rows: Sequence[Row]) -> str:
    """The JSON Lines text: one object per row, sorted keys, UTF-8 characters unescaped."""
    return dumps(r.as_json() for r in rows)


def summary_table(rows: Sequence[Row], descriptions: Mapping[str, str] | None = None) -> str:
    """Markdown tables: rows per category and split, then templates / rows per functionality and split."""
    descriptions = descriptions or {}
    lines = ["| category | train | dev | test |", "|---|---|---|---|"]
    for label in (*TEXT_CATEGORIES, "(hard negatives)"):
        counts = Counter(r.split for r in rows
                         if (label in r.labels if label in TEXT_CATEGORIES else r.hard_negative))
        lines.append(f"| {label} | " + " | ".join(str(counts[s]) for s in SPLITS) + " |")
    lines += ["", "| functionality | what it tests | labels | hard neg. | templates train/dev/test | rows train/dev/test |",
              "|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r.functionality for r in rows):
        mine = [r for r in rows if r.functionality == name]
        labels = sorted({label for r in mine for label in r.labels})
        templates = {s: len({r.template for r in mine if r.split == s}) for s in SPLITS}
        counts = Counter(r.split for r in mine)
        what = descriptions.get(name, "").replace("|", "/")
        lines.append(f"| {name} | {what} | {', '.join(labels) or '-'} | {'yes' if mine[0].hard_negative else 'no'} | "
                     + "/".join(str(templates[s]) for s in SPLITS) + " | "
                     + "/".join(str(counts[s]) for s in SPLITS) + " |")
    lines.append(f"\nTotal: {len(rows)} rows, {len({r.template for r in rows})} templates.")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--lang", required=True, help="language code; reads <lang>_templates.yaml")
    parser.add_argument("--templates", type=Path, help="template file (default: data/corpus/<lang>_templates.yaml)")
    parser.add_argument("--out", type=Path, help="JSON Lines file to write")
    parser.add_argument("--table", action="store_true", help="print per-functionality counts as Markdown")
    args = parser.parse_args(argv)
    path = args.templates or DATA_DIR / f"{args.lang}_templates.yaml"
    try:
        spec = load_spec(path, transforms=frozenset(TRANSFORMS))
        if spec.lang != args.lang:
            raise CorpusSpecError(f"{path.name}: lang: {spec.lang!r}, but --lang {args.lang!r}")
        rows = generate(spec)
    except CorpusSpecError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.out:
        args.out.write_text(render(rows), encoding="utf-8")
        print(f"wrote {len(rows)} rows to {args.out}", file=sys.stderr)
    if args.table:
        sys.stdout.write(summary_table(rows, {f.name: f.description for f in spec.functionalities}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Generate the Chinese functional corpus (`data/corpus/zh.jsonl`) from its hand-written templates.

    python -m services.text.build.corpus_gen_zh --out services/text/data/corpus/zh.jsonl

Deterministic: every random choice comes from a `random.Random` seeded by the file's `seed` and the
template id, rows are written in a fixed order with sorted keys, so a rerun is byte-identical.
For each template it draws up to `n` slot fillings (round-robin over the evasion families its slots
carry, so hand-written evasions are not crowded out by plain rows), then adds the functionality's
generated obfuscations (`corpus_zh_obfuscate`), rotating through the families template by template.
A text that an earlier template already produced is dropped (a text must not sit in two splits);
the same text with different labels is an error in the templates.

Example::

    rows = generate(load_spec(DEFAULT_TEMPLATES))
    rows[0]["split"]  # "train" | "dev" | "test"
"""

from __future__ import annotations

import argparse
import itertools
import random
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from services.text.build.corpus_rows import Row, dumps, source_of
from services.text.build.corpus_zh_obfuscate import obfuscate, strip_marks
from services.text.build.corpus_zh_spec import CorpusSpec, Functionality, SlotValue, SpecError, Template, load_spec
from services.text.build.corpus_zh_split import SPLITS, assign_splits, held_out_fillers, stable_hash

__all__ = ["DEFAULT_OUT", "DEFAULT_TEMPLATES", "LICENCE", "dumps", "generate", "main", "source", "summary_markdown"]

DEFAULT_TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "corpus" / "zh_templates.yaml"
DEFAULT_OUT = DEFAULT_TEMPLATES.with_name("zh.jsonl")
LICENCE = "Apache-2.0"
_SLOT = re.compile(r"\{([a-z][a-z0-9_]*)\}")
# (marked text, evasion family) before the marks are stripped.
_Draft = tuple[str, str | None]


def source(spec: CorpusSpec) -> str:
    """The provenance string every row carries."""
    return source_of(spec.lang, spec.version)


def generate(spec: CorpusSpec) -> list[dict[str, Any]]:
    """Every corpus row, in output order (functionality, template, row number)."""
    splits = assign_splits(spec)
    held = held_out_fillers(spec)
    seen: dict[str, tuple[str, tuple[str, ...]]] = {}  # text -> (template id, labels)
    rows: list[dict[str, Any]] = []
    for functionality in sorted(spec.functionalities, key=lambda f: f.name):
        for index, template in enumerate(sorted(functionality.templates, key=lambda t: t.id)):
            split = splits[template.id]
            rng = random.Random(stable_hash(spec.seed, "rows", template.id))
            drafts = _draw(spec, template, held if split != "test" else {}, rng)
            drafts += _obfuscations(functionality, index, drafts, rng)
            number = 0
            for marked, evasion in drafts:
                text = strip_marks(marked)
                if text in seen:
                    _check_same_labels(text, seen[text], template.id, functionality.labels)
                    continue
                seen[text] = (template.id, functionality.labels)
                number += 1
                rows.append(_row(spec, functionality, template, split, number, text, evasion))
    return rows


def _draw(spec: CorpusSpec, template: Template, held: dict[str, frozenset[str]],
          rng: random.Random) -> list[_Draft]:
    groups: dict[str | None, list[_Draft]] = {}
    for text in template.texts:
        names = list(dict.fromkeys(_SLOT.findall(text)))
        choices = [_allowed(spec, template, name, held) for name in names]
        for combo in itertools.product(*choices):
            rendered = _render(text, names, combo)
            evasion = template.evasion or next((v.evasion for v in combo if v.evasion), None)
            groups.setdefault(evasion, []).append((rendered, evasion))
    order = sorted(groups, key=lambda family: (family is not None, family or ""))
    for family in order:
        rng.shuffle(groups[family])
    drafts: list[_Draft] = []
    taken: set[str] = set()
    # Round-robin over the families, so every family the template carries gets rows.
    for batch in itertools.zip_longest(*(groups[f] for f in order)):
        for draft in batch:
            if draft is None or draft[0] in taken:
                continue
            if len(drafts) == template.n:
                return drafts
            drafts.append(draft)
            taken.add(draft[0])
    return drafts


def _allowed(spec: CorpusSpec, template: Template, name: str,
             held: dict[str, frozenset[str]]) -> tuple[SlotValue, ...]:
    values = spec.slot_values(template, name)
    if name in template.slots or name not in held:
        return values
    return tuple(v for v in values if v.text not in held[name])


def _render(text: str, names: list[str], combo: tuple[SlotValue, ...]) -> str:
    filling = dict(zip(names, (v.text for v in combo)))
    return _SLOT.sub(lambda m: filling[m.group(1)], text)


def _obfuscations(functionality: Functionality, index: int, drafts: list[_Draft],
                  rng: random.Random) -> list[_Draft]:
    families = functionality.transforms
    if not families:
        return []
    picks = [families[(index + k) % len(families)] for k in range(min(functionality.transform_rows, len(families)))]
    existing = {strip_marks(marked) for marked, _ in drafts}
    extra: list[_Draft] = []
    for family in picks:
        # Obfuscate a plain row; full-width only changes ASCII, so any row with ASCII will do.
        candidates = [m for m, evasion in drafts if evasion is None or family == "full_width"]
        rng.shuffle(candidates)
        for marked in candidates:
            result = obfuscate(family, marked, rng)
            if result is not None and result not in existing:
                extra.append((result, family))
                existing.add(result)
                break
    return extra


def _check_same_labels(text: str, first: tuple[str, tuple[str, ...]], template_id: str,
                       labels: tuple[str, ...]) -> None:
    if first[1] != labels:
        raise SpecError(f"text {text!r} is produced by template {first[0]} with labels {list(first[1])} "
                        f"and by template {template_id} with labels {list(labels)}: fix one of them")


def _row(spec: CorpusSpec, functionality: Functionality, template: Template, split: str, number: int,
         text: str, evasion: str | None) -> dict[str, Any]:
    return Row(f"{spec.lang}-{functionality.name}-{template.id}-{number}", spec.lang, text, functionality.labels,
               functionality.name, template.id, split, functionality.hard_negative, evasion, source(spec),
               LICENCE).as_json()


def summary_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown tables of row and template counts per category and per functionality and split."""
    lines = ["| category | " + " | ".join(SPLITS) + " | rows | templates |", "|---" * (len(SPLITS) + 3) + "|"]
    categories = sorted({label for row in rows for label in row["labels"]}) + ["(benign)"]
    for category in categories:
        chosen = [r for r in rows if (category in r["labels"]) or (category == "(benign)" and not r["labels"])]
        lines.append(_count_line(category, chosen))
    lines += ["", "| functionality | labels | " + " | ".join(SPLITS) + " | rows | templates |",
              "|---" * (len(SPLITS) + 4) + "|"]
    for name in sorted({r["functionality"] for r in rows}):
        chosen = [r for r in rows if r["functionality"] == name]
        labels = ", ".join(chosen[0]["labels"]) or ("[] hard negative" if chosen[0]["hard_negative"] else "[]")
        lines.append(_count_line(f"{name} | {labels}", chosen))
    evasions = Counter((r["evasion"], r["split"]) for r in rows if r["evasion"] is not None)
    lines += ["", "| evasion | " + " | ".join(SPLITS) + " |", "|---" * (len(SPLITS) + 1) + "|"]
    for family in sorted({family for family, _ in evasions}):
        lines.append(f"| {family} | " + " | ".join(str(evasions[(family, s)]) for s in SPLITS) + " |")
    return "\n".join(lines) + "\n"


def _count_line(name: str, rows: Sequence[dict[str, Any]]) -> str:
    per_split = Counter(r["split"] for r in rows)
    templates = len({r["template"] for r in rows})
    return f"| {name} | " + " | ".join(str(per_split[s]) for s in SPLITS) + f" | {len(rows)} | {templates} |"


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: write the corpus, print the summary tables to stdout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--templates", type=Path, default=DEFAULT_TEMPLATES, help="the hand-written templates (YAML)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the corpus (JSON Lines)")
    args = parser.parse_args(argv)
    try:
        rows = generate(load_spec(args.templates))
    except SpecError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    args.out.write_text(dumps(rows), encoding="utf-8")
    print(summary_markdown(rows), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

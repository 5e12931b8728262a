"""The probe-set file format (`bench/probe_sets/*.tsv`): one labelled message per line, declared once.

Each line is `label<TAB>text`; `label` is `benign` or the categories that should fire, comma-separated
(`hate,violence`). `bench.probes` scores the files; `training_data` trains the English heads on the
files listed in `training_data.TRAINING_PROBES` (the others stay held out).

Example::

    >>> parse_probe("benign\\thello\\nhate,violence\\tthey should all die\\n")[1].labels == {"hate", "violence"}
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from services.common.taxonomy import TEXT_CATEGORIES

__all__ = ["PROBES_DIR", "ProbeLine", "parse_probe"]

#: The project's probe sets (short messages written outside the functional corpus).
PROBES_DIR = Path(__file__).resolve().parents[3] / "bench" / "probe_sets"


@dataclass(frozen=True)
class ProbeLine:
    """One labelled message: the categories that should fire (empty: benign)."""

    labels: frozenset[str]
    text: str


def parse_probe(text: str, where: str = "<probe>") -> list[ProbeLine]:
    """The lines of a probe file; ValueError naming the file and line for a malformed one."""
    out: list[ProbeLine] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        label, tab, message = line.partition("\t")
        if not tab or not message.strip():
            raise ValueError(f"{where}:{number}: expected 'label<TAB>text', got {line!r}")
        labels = frozenset() if label == "benign" else frozenset(label.split(","))
        unknown = labels - set(TEXT_CATEGORIES)
        if unknown:
            raise ValueError(f"{where}:{number}: unknown categories {sorted(unknown)} "
                             f"(use 'benign' or some of {', '.join(TEXT_CATEGORIES)})")
        out.append(ProbeLine(labels, message))
    return out

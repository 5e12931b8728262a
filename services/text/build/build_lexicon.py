"""Build the default text lexicon from word lists shipped in wheels (reproducible, no downloads).

Run from the repository root::

    python -m services.text.build.build_lexicon --out services/common/text_match/data/default_lexicon.json

The output is deterministic (sorted entries, no timestamps): running the script again on the same
installed packages gives a byte-identical file. The built file is committed, so the text service runs
without the data packages; this script only needs them to regenerate it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from services.common.text_match.lexicon import DEFAULT_LEXICON_PATH, LEXICON_FORMAT, Lexicon, LexiconEntry
from services.text.build.lexicon_curation import Curation, RawTerm, curate, project_entries
from services.text.build.package_data import package_file, source_label

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
CURATION_PATH = DATA_DIR / "curation.json"
PROJECT_SOURCE = "auditmesh:services/text/data/curation.json#project_terms"


@dataclass(frozen=True)
class WordList:
    """One shipped word list: where it lives, the JSON key holding the terms, and its licence."""

    distribution: str
    package: str
    relative: str
    key: str
    license: str

    @property
    def list_key(self) -> str:
        return f"{self.package}/{self.relative}"


WORD_LISTS = (
    WordList("nonebot-plugin-paminet-nodirtymsg", "nonebot_plugin_paminet_nodirtymsg", "data/badwords.json",
             "badwords", "MIT"),
    WordList("glin-profanity", "glin_profanity", "data/dictionaries/chinese.json", "words", "MIT"),
    WordList("glin-profanity", "glin_profanity", "data/dictionaries/english.json", "words", "MIT"),
)


def read_word_list(word_list: WordList) -> list[RawTerm]:
    """The raw terms of one list, each tagged with its provenance string."""
    path = package_file(word_list.package, word_list.relative)
    source = source_label(word_list.distribution, word_list.package, word_list.relative)
    terms = json.loads(path.read_text(encoding="utf-8"))[word_list.key]
    return [RawTerm(term, word_list.list_key, source) for term in terms if isinstance(term, str)]


def build_document(curation_document: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """The lexicon JSON document and the list of dropped (term, source, reason)."""
    curation = Curation.from_json(curation_document)
    raw = [term for word_list in WORD_LISTS for term in read_word_list(word_list)]
    result = curate(raw, curation)
    entries = sorted(set(result.entries) | set(project_entries(curation_document["project_terms"], PROJECT_SOURCE)),
                     key=lambda e: (e.category, e.term, e.severity, e.source))
    lexicon = Lexicon.build(entries)  # validates every entry and gives the content version
    licenses = {source_label(w.distribution, w.package, w.relative): w.license for w in WORD_LISTS}
    licenses[PROJECT_SOURCE] = "same licence as auditmesh"
    document = {
        "format": LEXICON_FORMAT,
        "version": lexicon.version,
        "generated_by": "python -m services.text.build.build_lexicon",
        "includes": ["zh_terms.json"],  # the project-written Chinese lists (services/common/text_match)
        "licenses": licenses,
        "rules": [
            "terms are matched after services.common.text_match.normalize.normalize(); Latin edges need word boundaries",
            "curation rules: services/text/data/curation.json (see services/text/build/lexicon_curation.py)",
            "severity: 1 low, 2 medium (default), 3 high",
        ],
        "counts": {"entries": len(entries), "dropped": len(result.dropped),
                   "by_category": dict(sorted(Counter(e.category for e in entries).items()))},
        "entries": [_entry_json(e) for e in entries],
    }
    return document, list(result.dropped)


def render(document: dict[str, Any]) -> str:
    """The document as text: the header indented, then one entry per line (readable diffs)."""
    header = json.dumps({k: v for k, v in document.items() if k != "entries"}, ensure_ascii=False, indent=1)
    lines = ",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in document["entries"])
    return header[:-2] + ',\n "entries": [\n' + lines + "\n ]\n}\n"


def _entry_json(entry: LexiconEntry) -> dict[str, Any]:
    return {"term": entry.term, "category": entry.category, "severity": entry.severity, "source": entry.source}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_LEXICON_PATH)
    parser.add_argument("--show-dropped", action="store_true", help="print every dropped term and why")
    args = parser.parse_args(argv)
    document, dropped = build_document(json.loads(CURATION_PATH.read_text(encoding="utf-8")))
    args.out.write_text(render(document), encoding="utf-8")
    print(f"wrote {args.out}: {document['counts']['entries']} entries, version {document['version']}, "
          f"{len(dropped)} dropped; by category {document['counts']['by_category']}", file=sys.stderr)
    if args.show_dropped:
        for term, source, reason in dropped:
            print(f"dropped {term!r} ({source}): {reason}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Loading and validating a functional-corpus template file (`<lang>_templates.yaml`).

The file format is documented in `services/text/build/corpus_gen.py` and in
`services/text/data/corpus/README.md`. Every error names the file and the key path, e.g.
``en_templates.yaml: functionalities[3].templates[2].labels: 'hateful' is not a category``.

Example::

    spec = load_spec(Path("services/text/data/corpus/en_templates.yaml"))
    spec.functionalities[0].templates[0].id
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from services.common.taxonomy import TEXT_CATEGORIES
from services.text.build.corpus_yaml import CorpusSpecError, expect_mapping, expect_string, read_yaml

__all__ = ["TEXT_CATEGORIES", "CorpusSpecError", "Derive", "Functionality", "Spec", "Template", "load_spec",
           "slots_of"]

# A row's labels are a subset of TEXT_CATEGORIES, the text taxonomy (services/common/taxonomy.py).
#: The only labels a hard negative may carry: swearing aimed at nobody is profanity and nothing else.
HARD_NEGATIVE_LABELS = frozenset({"profanity"})
MAX_ROWS_CAP = 25

_SLOT = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_TEMPLATE_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


@dataclass(frozen=True)
class Template:
    """One hand-written template; `labels` and `evasion` are already resolved against its functionality."""

    id: str
    text: str
    labels: tuple[str, ...]
    evasion: str | None


@dataclass(frozen=True)
class Derive:
    """Obfuscated copies of other functionalities' rows, made by a seeded transform."""

    transform: str
    sources: tuple[str, ...]
    rows: int
    words: tuple[str, ...]
    word_slots: tuple[str, ...]
    whole_text: bool
    max_words: int | None
    substring: bool


@dataclass(frozen=True)
class Functionality:
    name: str
    description: str
    hard_negative: bool
    max_rows: int
    templates: tuple[Template, ...]
    derive: Derive | None


@dataclass(frozen=True)
class Spec:
    lang: str
    version: str
    licence: str
    fillers: Mapping[str, tuple[str, ...]]
    functionalities: tuple[Functionality, ...]


def slots_of(text: str) -> list[str]:
    """The distinct slot names of a template text, in order of first appearance."""
    return list(dict.fromkeys(_SLOT.findall(text)))


def load_spec(path: Path, *, transforms: frozenset[str] = frozenset()) -> Spec:
    """Read and validate a template file; `transforms` are the names a `derive` block may use."""
    return _Reader(path.name, transforms).spec(read_yaml(path, path.name))


class _Reader:
    def __init__(self, file: str, transforms: frozenset[str]) -> None:
        self._file = file
        self._transforms = transforms

    def fail(self, key: str, message: str) -> CorpusSpecError:
        return CorpusSpecError(f"{self._file}: {key}: {message}")

    def mapping(self, value: Any, key: str) -> Mapping[str, Any]:
        return expect_mapping(value, f"{self._file}: {key}")

    def string(self, value: Any, key: str) -> str:
        return expect_string(value, f"{self._file}: {key}")

    def strings(self, value: Any, key: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list of strings, got {type(value).__name__}")
        return tuple(self.string(item, f"{key}[{i}]") for i, item in enumerate(value))

    def labels(self, value: Any, key: str) -> tuple[str, ...]:
        labels = self.strings(value, key)
        for label in labels:
            if label not in TEXT_CATEGORIES:
                raise self.fail(key, f"{label!r} is not a category (one of {', '.join(TEXT_CATEGORIES)})")
        if len(set(labels)) != len(labels):
            raise self.fail(key, f"repeated label in {list(labels)}")
        return tuple(sorted(labels))

    def evasion(self, value: Any, key: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not _NAME.match(value):
            raise self.fail(key, f"expected null or a lower-case name such as 'leet', got {value!r}")
        return value

    def spec(self, document: Any) -> Spec:
        top = self.mapping(document, "<top>")
        unknown = set(top) - {"lang", "version", "licence", "max_rows", "fillers", "functionalities"}
        if unknown:
            raise self.fail("<top>", f"unknown keys {sorted(unknown)}")
        lang = self.string(top.get("lang"), "lang")
        fillers = {self.string(k, "fillers"): self.strings(v, f"fillers.{k}")
                   for k, v in self.mapping(top.get("fillers", {}), "fillers").items()}
        for slot, values in fillers.items():
            if len(set(values)) != len(values):
                raise self.fail(f"fillers.{slot}", "repeated value")
        default_rows = self.max_rows(top.get("max_rows", 10), "max_rows")
        items = top.get("functionalities")
        if not isinstance(items, list) or not items:
            raise self.fail("functionalities", "expected a non-empty list")
        functionalities = tuple(self.functionality(item, f"functionalities[{i}]", fillers, default_rows)
                                for i, item in enumerate(items))
        self.check_unique(functionalities, fillers)
        return Spec(lang, self.string(str(top.get("version", "")), "version"),
                    self.string(top.get("licence"), "licence"), fillers, functionalities)

    def max_rows(self, value: Any, key: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_ROWS_CAP:
            raise self.fail(key, f"expected an integer from 1 to {MAX_ROWS_CAP}, got {value!r}")
        return value

    def functionality(self, value: Any, key: str, fillers: Mapping[str, tuple[str, ...]],
                      default_rows: int) -> Functionality:
        item = self.mapping(value, key)
        unknown = set(item) - {"name", "description", "labels", "hard_negative", "evasion", "max_rows", "templates", "derive"}
        if unknown:
            raise self.fail(key, f"unknown keys {sorted(unknown)}")
        name = self.string(item.get("name"), f"{key}.name")
        if not _NAME.match(name):
            raise self.fail(f"{key}.name", f"{name!r} must be lower-case letters, digits and '_'")
        hard_negative = item.get("hard_negative", False)
        if not isinstance(hard_negative, bool):
            raise self.fail(f"{key}.hard_negative", f"expected true or false, got {hard_negative!r}")
        labels = self.labels(item["labels"], f"{key}.labels") if "labels" in item else None
        evasion = self.evasion(item.get("evasion"), f"{key}.evasion")
        raw = item.get("templates", [])
        if not isinstance(raw, list):
            raise self.fail(f"{key}.templates", "expected a list")
        templates = tuple(self.template(t, f"{key}.templates[{i}]", labels, evasion, fillers, hard_negative)
                          for i, t in enumerate(raw))
        derive = self.derive(item["derive"], f"{key}.derive") if "derive" in item else None
        if not templates and derive is None:
            raise self.fail(key, "needs templates or a derive block")
        description = item.get("description", "")
        if not isinstance(description, str):
            raise self.fail(f"{key}.description", f"expected a string, got {description!r}")
        return Functionality(name, description.strip(), hard_negative, self.max_rows(item.get("max_rows", default_rows), f"{key}.max_rows"),
                             templates, derive)

    def template(self, value: Any, key: str, labels: tuple[str, ...] | None, evasion: str | None,
                 fillers: Mapping[str, tuple[str, ...]], hard_negative: bool) -> Template:
        item = self.mapping(value, key)
        unknown = set(item) - {"id", "text", "labels", "evasion"}
        if unknown:
            raise self.fail(key, f"unknown keys {sorted(unknown)}")
        template_id = self.string(item.get("id"), f"{key}.id")
        if not _TEMPLATE_ID.match(template_id):
            raise self.fail(f"{key}.id", f"{template_id!r} must be lower-case letters, digits, '_', '-', '.'")
        text = self.string(item.get("text"), f"{key}.text")
        for slot in slots_of(text):
            if slot not in fillers or not fillers[slot]:
                raise self.fail(f"{key}.text", f"slot {{{slot}}} has no filler list under 'fillers'")
        if "labels" in item:
            labels = self.labels(item["labels"], f"{key}.labels")
        if labels is None:
            raise self.fail(key, "no labels: give them on the template or its functionality ([] for benign)")
        if hard_negative and not set(labels) <= HARD_NEGATIVE_LABELS:
            raise self.fail(f"{key}.labels", f"a hard negative may only carry {sorted(HARD_NEGATIVE_LABELS)}")
        return Template(template_id, text, labels, self.evasion(item.get("evasion", evasion), f"{key}.evasion"))

    def derive(self, value: Any, key: str) -> Derive:
        item = self.mapping(value, key)
        unknown = set(item) - {"transform", "from", "rows", "words", "word_slots", "whole_text", "max_words",
                               "substring"}
        if unknown:
            raise self.fail(key, f"unknown keys {sorted(unknown)}")
        transform = self.string(item.get("transform"), f"{key}.transform")
        if transform not in self._transforms:
            raise self.fail(f"{key}.transform", f"{transform!r} is not one of {sorted(self._transforms)}")
        whole_text = item.get("whole_text", False)
        words = self.strings(item.get("words", []), f"{key}.words")
        word_slots = self.strings(item.get("word_slots", []), f"{key}.word_slots")
        if not isinstance(whole_text, bool) or (not whole_text and not words and not word_slots):
            raise self.fail(key, "give words / word_slots to obfuscate, or whole_text: true")
        max_words = item.get("max_words")
        if max_words is not None and (not isinstance(max_words, int) or max_words < 1):
            raise self.fail(f"{key}.max_words", f"expected a positive integer, got {max_words!r}")
        return Derive(transform, self.strings(item.get("from"), f"{key}.from"),
                      self.max_rows(item.get("rows", 1), f"{key}.rows"), words, word_slots, whole_text,
                      max_words, bool(item.get("substring", False)))

    def check_derive(self, derive: Derive, key: str, functionalities: tuple[Functionality, ...]) -> None:
        with_templates = {f.name for f in functionalities if f.templates}
        for source in derive.sources:
            if source not in with_templates:
                raise self.fail(f"{key}.from", f"{source!r} is not a functionality with templates")

    def check_unique(self, functionalities: tuple[Functionality, ...],
                     fillers: Mapping[str, tuple[str, ...]]) -> None:
        names = [f.name for f in functionalities]
        seen_ids: set[str] = set()
        for i, functionality in enumerate(functionalities):
            if names.count(functionality.name) > 1:
                raise self.fail(f"functionalities[{i}].name", f"{functionality.name!r} appears twice")
            for j, template in enumerate(functionality.templates):
                if template.id in seen_ids:
                    raise self.fail(f"functionalities[{i}].templates[{j}].id", f"{template.id!r} appears twice")
                seen_ids.add(template.id)
            if functionality.derive is not None:
                self.check_derive(functionality.derive, f"functionalities[{i}].derive", functionalities)
                for slot in functionality.derive.word_slots:
                    if slot not in fillers:
                        raise self.fail(f"functionalities[{i}].derive.word_slots", f"{slot!r} has no filler list")

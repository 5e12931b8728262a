"""The Chinese functional corpus templates (`data/corpus/zh_templates.yaml`), loaded and validated.

The YAML file holds shared filler lists and, per functionality, its labels and hand-written
templates. A template text names slots as `{slot}`; a slot is either local to the template or one
of the shared `fillers`. Square brackets mark the span a seeded obfuscation may rewrite
(`"{you}就是个[废物]"`); they never reach the corpus. A slot's values are a list, or a mapping from
evasion family to list when some values are hand-written evasions (`plain` = no evasion)::

    fillers:
      you: [你, 楼上, 主播]
    functionalities:
      harassment_worthless:
        labels: [harassment]
        transforms: [separators, traditional]
        templates:
          - id: har_worthless_01
            text: "{you}就是个[{trash}]"
            slots:
              trash: {plain: [废物, 垃圾], pinyin_initials: [fw, lj]}

Every error names the file and the key that is wrong.

Example::

    spec = load_spec(Path("services/text/data/corpus/zh_templates.yaml"))
    spec.functionalities[0].templates[0].id  # "har_worthless_01"
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from services.common.taxonomy import TEXT_CATEGORIES as CATEGORIES
from services.text.build.corpus_yaml import CorpusSpecError, expect_list, expect_mapping, expect_string, read_yaml

__all__ = [
    "CATEGORIES", "EVASIONS", "HAND_EVASIONS", "MAX_ROWS_PER_TEMPLATE", "TRANSFORMS",
    "CorpusSpec", "Functionality", "SlotValue", "SpecError", "Template", "load_spec",
]

# CATEGORIES is the text taxonomy decided in issue 13, section 1 (services/common/taxonomy.py).
#: The templates file is malformed; the message names the file and the key (one error type for
#: both languages' template files).
SpecError = CorpusSpecError
# Families a generator transform can produce (services/text/build/corpus_zh_obfuscate.py).
TRANSFORMS = ("separators", "zero_width", "full_width", "traditional", "repetition")
# Families only written by hand (the generated ones are also written by hand where users have a
# habit the transforms do not imitate): generating them (e.g. with pypinyin) would make the test split
# circular with a matcher built from the same tool. `numerals` covers contact numbers written in
# Chinese, financial or circled digits (一三八, 壹叁捌, ①③⑧).
HAND_EVASIONS = ("pinyin_initials", "pinyin_mixed", "homophone", "split_chars", "variant_emoji",
                 "latin_letter", "numerals")
EVASIONS = HAND_EVASIONS + TRANSFORMS
MAX_ROWS_PER_TEMPLATE = 25
_PLAIN = "plain"
_ID = re.compile(r"^[a-z][a-z0-9_]*$")
_SLOT = re.compile(r"\{([a-z][a-z0-9_]*)\}")


@dataclass(frozen=True)
class SlotValue:
    """One filler value and the hand-written evasion family it carries (None: plain text)."""

    text: str
    evasion: str | None


@dataclass(frozen=True)
class Template:
    """Alternative texts sharing one template id (and therefore one split)."""

    id: str
    functionality: str
    texts: tuple[str, ...]
    slots: Mapping[str, tuple[SlotValue, ...]]
    evasion: str | None
    n: int


@dataclass(frozen=True)
class Functionality:
    """A HateCheck-style functionality: what its rows test, and the labels they carry."""

    name: str
    labels: tuple[str, ...]
    hard_negative: bool
    description: str
    transforms: tuple[str, ...]
    transform_rows: int
    templates: tuple[Template, ...]


@dataclass(frozen=True)
class CorpusSpec:
    """The whole templates file."""

    lang: str
    version: int
    seed: int
    default_n: int
    fillers: Mapping[str, tuple[SlotValue, ...]]
    functionalities: tuple[Functionality, ...]

    def slot_values(self, template: Template, slot: str) -> tuple[SlotValue, ...]:
        """The values of `slot` as seen by `template` (its local slots shadow the shared fillers)."""
        if slot in template.slots:
            return template.slots[slot]
        return self.fillers[slot]


def load_spec(path: Path) -> CorpusSpec:
    """Read and validate the templates file at `path`; raises SpecError naming the bad key."""
    where = str(path)
    raw = read_yaml(path, where)
    top = expect_mapping(raw, where)
    lang = expect_string(top.get("lang"), f"{where}: lang")
    version = _integer(top.get("version"), f"{where}: version", minimum=1)
    seed = _integer(top.get("seed"), f"{where}: seed", minimum=0)
    default_n = _integer(top.get("default_n", 8), f"{where}: default_n", minimum=1)
    fillers = {name: _slot_values(values, f"{where}: fillers.{name}")
               for name, values in expect_mapping(top.get("fillers", {}), f"{where}: fillers").items()}
    for name in fillers:
        _identifier(name, f"{where}: fillers.{name}")
    functionalities = tuple(
        _functionality(name, body, f"{where}: functionalities.{name}", default_n, fillers)
        for name, body in expect_mapping(top.get("functionalities"), f"{where}: functionalities").items())
    _unique_template_ids(functionalities, where)
    return CorpusSpec(lang, version, seed, default_n, fillers, functionalities)


def _functionality(name: str, body: Any, where: str, default_n: int,
                   fillers: Mapping[str, tuple[SlotValue, ...]]) -> Functionality:
    _identifier(name, where)
    spec = expect_mapping(body, where)
    labels = tuple(sorted(expect_string(v, f"{where}.labels")
                          for v in expect_list(spec.get("labels"), f"{where}.labels")))
    for label in labels:
        if label not in CATEGORIES:
            raise SpecError(f"{where}.labels: {label!r} is not one of {CATEGORIES}")
    hard_negative = spec.get("hard_negative", False)
    if not isinstance(hard_negative, bool):
        raise SpecError(f"{where}.hard_negative: expected true or false, got {hard_negative!r}")
    if hard_negative and labels:
        raise SpecError(f"{where}: a hard negative is benign by definition; its labels must be []")
    transforms = tuple(expect_string(v, f"{where}.transforms")
                       for v in expect_list(spec.get("transforms", []), f"{where}.transforms"))
    for family in transforms:
        if family not in TRANSFORMS:
            raise SpecError(f"{where}.transforms: {family!r} is not one of {TRANSFORMS}")
    transform_rows = _integer(spec.get("transform_rows", min(2, len(transforms))), f"{where}.transform_rows", minimum=0)
    templates = tuple(_template(item, f"{where}.templates[{i}]", name, default_n, fillers)
                      for i, item in enumerate(expect_list(spec.get("templates"), f"{where}.templates")))
    if not templates:
        raise SpecError(f"{where}.templates: a functionality needs at least one template")
    for template in templates:
        if template.n + transform_rows > MAX_ROWS_PER_TEMPLATE:
            raise SpecError(f"{where}.templates ({template.id}): n={template.n} plus transform_rows="
                            f"{transform_rows} is over the cap of {MAX_ROWS_PER_TEMPLATE} rows per template")
    return Functionality(name, labels, hard_negative, str(spec.get("description", "")), transforms,
                         transform_rows, templates)


def _template(item: Any, where: str, functionality: str, default_n: int,
              fillers: Mapping[str, tuple[SlotValue, ...]]) -> Template:
    spec = expect_mapping(item, where)
    template_id = _identifier(spec.get("id"), f"{where}.id")
    where = f"{where} ({template_id})"
    if ("text" in spec) == ("texts" in spec):
        raise SpecError(f"{where}: give exactly one of text or texts")
    texts = ((expect_string(spec["text"], f"{where}.text"),) if "text" in spec else
             tuple(expect_string(t, f"{where}.texts") for t in expect_list(spec["texts"], f"{where}.texts")))
    if not texts:
        raise SpecError(f"{where}.texts: empty")
    slots = {name: _slot_values(values, f"{where}.slots.{name}")
             for name, values in expect_mapping(spec.get("slots", {}), f"{where}.slots").items()}
    for text in texts:
        _check_marks(text, f"{where}.text")
        for slot in _SLOT.findall(text):
            if slot not in slots and slot not in fillers:
                raise SpecError(f"{where}.text: slot {{{slot}}} is neither a local slot nor a shared filler")
    evasion = spec.get("evasion")
    if evasion is not None and evasion not in EVASIONS:
        raise SpecError(f"{where}.evasion: {evasion!r} is not one of {EVASIONS}")
    n = _integer(spec.get("n", default_n), f"{where}.n", minimum=1)
    if n > MAX_ROWS_PER_TEMPLATE:
        raise SpecError(f"{where}.n: {n} is over the cap of {MAX_ROWS_PER_TEMPLATE} rows per template")
    return Template(template_id, functionality, texts, slots, evasion, n)


def _slot_values(values: Any, where: str) -> tuple[SlotValue, ...]:
    if isinstance(values, list):
        groups: Mapping[str, Any] = {_PLAIN: values}
    else:
        groups = expect_mapping(values, where)
    result: list[SlotValue] = []
    for family, items in groups.items():
        if family != _PLAIN and family not in EVASIONS:
            raise SpecError(f"{where}.{family}: evasion family must be {_PLAIN!r} or one of {EVASIONS}")
        for item in expect_list(items, f"{where}.{family}"):
            text = expect_string(item if not isinstance(item, int) else str(item), f"{where}.{family}")
            _check_marks(text, f"{where}.{family}")
            if _SLOT.search(text):
                raise SpecError(f"{where}.{family}: {text!r}: slot values cannot contain slots")
            result.append(SlotValue(text, None if family == _PLAIN else family))
    if not result:
        raise SpecError(f"{where}: no values")
    if len({v.text for v in result}) != len(result):
        raise SpecError(f"{where}: duplicate values")
    return tuple(result)


def _check_marks(text: str, where: str) -> None:
    depth = 0
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth not in (0, 1):
            raise SpecError(f"{where}: {text!r}: obfuscation marks [ ] must be balanced and not nested")
    if depth:
        raise SpecError(f"{where}: {text!r}: unclosed [")


def _unique_template_ids(functionalities: tuple[Functionality, ...], where: str) -> None:
    seen: dict[str, str] = {}
    for functionality in functionalities:
        for template in functionality.templates:
            if template.id in seen:
                raise SpecError(f"{where}: template id {template.id!r} is used by both "
                                f"{seen[template.id]} and {functionality.name}")
            seen[template.id] = functionality.name


def _integer(value: Any, where: str, *, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise SpecError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    return value


def _identifier(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise SpecError(f"{where}: {value!r} must be lower-case letters, digits and _ (starting with a letter)")
    return value

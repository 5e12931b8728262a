"""Labelled examples as a tenant sends them: one JSON object per line,

    {"text": "...", "labels": {"harassment": 1, "custom.crypto_scam": 0}}

`labels` maps a built-in text category (`services.common.taxonomy.TEXT_CATEGORIES`) or a custom one
(`custom.<name>`: lower-case letters, digits and underscores) to 1 (the text is one) or 0 (it is not);
a category absent from a row is unknown for that row, not negative. An optional `"id"` names the item
(`auditmesh labels import` stores labels by it). Every problem names the file, the
line and the key, so a reviewer export can be fixed by hand.

Example::

    >>> rows = parse_lines(['{"text": "buy followers", "labels": {"spam": 1}}', '', '{"text": "hi", "labels": {"spam": 0}}'])
    >>> [(r.text, r.labels) for r in rows]
    [('buy followers', {'spam': 1}), ('hi', {'spam': 0})]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from services.common.taxonomy import TEXT_CATEGORIES, is_well_formed_custom_category

__all__ = ["MAX_EXAMPLES", "MAX_TEXT_CHARS", "Example", "ExamplesError", "check_category", "parse_lines", "read_examples"]

#: Bounds on one import: a file beyond them is refused with a message, not read into memory unbounded.
MAX_EXAMPLES = 200_000
MAX_TEXT_CHARS = 20_000


class ExamplesError(ValueError):
    """A labelled-examples file that cannot be used; the message names the file, line and key."""


@dataclass(frozen=True)
class Example:
    """One labelled text: its category labels (1 = is, 0 = is not), and the platform's id of the item
    when the file gives one (`"id"`; "" otherwise)."""

    text: str
    labels: Mapping[str, int]
    item_id: str = ""


def check_category(name: str) -> str:
    """`name` when it is a built-in text category or a well-formed `custom.<name>`; ExamplesError otherwise.

    Example::

        >>> check_category("custom.crypto_scam"), check_category("hate")
        ('custom.crypto_scam', 'hate')
    """
    if name in TEXT_CATEGORIES:
        return name
    if is_well_formed_custom_category(name):
        return name
    raise ExamplesError(f"unknown category {name!r}: use one of {', '.join(TEXT_CATEGORIES)} or custom.<name> "
                        f"(lower-case letters, digits, underscores)")


def parse_lines(lines: Iterable[str], source: str = "<examples>") -> list[Example]:
    """The examples in `lines` (blank lines skipped); ExamplesError naming `source`:line for the first bad one."""
    examples: list[Example] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ExamplesError(f"{where}: not JSON ({error.msg} at column {error.colno})") from None
        if not isinstance(row, dict):
            raise ExamplesError(f"{where}: each line must be a JSON object with 'text' and 'labels'")
        text, labels = row.get("text"), row.get("labels")
        if not isinstance(text, str) or not text.strip():
            raise ExamplesError(f"{where}: 'text' must be a non-empty string")
        if len(text) > MAX_TEXT_CHARS:
            raise ExamplesError(f"{where}: 'text' has {len(text)} characters, more than {MAX_TEXT_CHARS}")
        if not isinstance(labels, dict) or not labels:
            raise ExamplesError(f"{where}: 'labels' must be an object such as {{\"harassment\": 1}}")
        clean: dict[str, int] = {}
        for name, value in labels.items():
            try:
                check_category(str(name))
            except ExamplesError as error:
                raise ExamplesError(f"{where}: labels.{name}: {error}") from None
            if value not in (0, 1) or isinstance(value, float):
                raise ExamplesError(f"{where}: labels.{name}: must be 1 or 0, got {value!r}")
            clean[str(name)] = int(value)
        item_id = row.get("id", "")
        if not isinstance(item_id, str) or len(item_id) > 128 or not item_id.isprintable():
            raise ExamplesError(f"{where}: 'id' must be a string of at most 128 printable characters")
        examples.append(Example(text, clean, item_id))
        if len(examples) > MAX_EXAMPLES:
            raise ExamplesError(f"{source}: more than {MAX_EXAMPLES} examples; split the file")
    return examples


def read_examples(path: Path) -> list[Example]:
    """`parse_lines` over a UTF-8 file; ExamplesError when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            return parse_lines(handle, str(path))
    except (OSError, UnicodeDecodeError) as error:
        raise ExamplesError(f"{path}: cannot read ({error})") from None

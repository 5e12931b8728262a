"""Hash-list formats a bank imports and exports (issue 42). Pure: text in, entries out, and back.

Three formats, each read and written:

- ``csv``, auditmesh's own: ``signal_type,value[,content_id]`` per line (an optional header line
  ``signal_type,value,content_id``; ``#`` starts a comment line). Signal types are the match service's:
  ``pdq``, ``md5``, ``sha256``, ``text_simhash``, ``text_sha256`` (lower-case hex).
- ``threatexchange``: the signal files of Meta's python-threatexchange (its local-file exchange and the
  ``threatexchange`` CLI): ``<signal_type> <signal>`` per line, split at the first space. ``pdq`` is the same
  signal in both projects; ``photo_md5`` and ``photo_sha256`` are read as ``md5`` and ``sha256`` of the
  bytes; ``raw_text`` (the text itself) is hashed here as the match service hashes a text (its
  ``text_simhash`` and ``text_sha256``), so a shared list of known spam texts is matched with edits. Video
  signals (``video_md5``, ``video_tmk_pdqf``, ...) and URL signals are refused by name: this mesh matches
  images and texts. Written with auditmesh's signal names (``pdq`` lines are what ThreatExchange tools read).
- ``hma_json``: a JSON array of HMA's (Hasher-Matcher-Actioner's) banked-content objects,
  ``{"id": ..., "signals": {"pdq": "..."}}``, as its ``/c/bank/<name>/content`` answers; a bare
  ``{"pdq": "..."}`` object (the body of its ``/c/bank/<name>/signal``) is read too. ``id`` becomes the
  content id. Written one object per content id.

Every problem is a `BankError` that names the line (or the array index) and what is wrong.

Example::

    >>> entries = parse("threatexchange", "pdq " + "f" * 64 + "\\n")
    >>> entries[0].signal, len(entries[0].value)
    ('pdq', 64)
    >>> parse("csv", render("csv", entries)) == entries
    True
"""

from __future__ import annotations

import csv
import io
import json
from collections import OrderedDict
from typing import Any, Iterable, Literal, Sequence, get_args

from services.match.banks import BankError, Entry
from services.match.signals import MAX_TEXT_CHARS, MIN_MATCH_CHARS, matchable, text_signals

__all__ = ["FORMATS", "Format", "MAX_IMPORT_ROWS", "parse", "render", "text_entries"]

Format = Literal["csv", "threatexchange", "hma_json"]
FORMATS: tuple[str, ...] = get_args(Format)
#: Rows of one import at most (a bigger list is split by the caller: each import is one transaction).
MAX_IMPORT_ROWS = 10_000_000
#: raw_text lines (texts hashed on import) of one hash list at most.
MAX_RAW_TEXTS = 100_000
#: Characters of a banked text kept as its content id when none is given.
TEXT_LABEL_CHARS = 60
#: ThreatExchange signal type names read as this mesh's (the ones that mean the same hash of the same thing).
_TE_NAMES = {"pdq": "pdq", "photo_md5": "md5", "md5": "md5", "photo_sha256": "sha256", "sha256": "sha256",
             "text_simhash": "text_simhash", "text_sha256": "text_sha256"}
_TE_REFUSED = ("video_", "url", "trend_query", "tlsh", "clip", "text_md5")


def text_entries(text: str, content_id: str = "") -> list[Entry]:
    """The entries a banked text is matched by (its SimHash and its canonical SHA-256), as the match
    service hashes a query. BankError when its canonical form is too short to match anything specific."""
    signals = text_signals(text[:MAX_TEXT_CHARS])  # as a query is hashed: its first MAX_TEXT_CHARS characters
    if not matchable(signals.canonical):
        raise BankError(f"text {text[:TEXT_LABEL_CHARS]!r}: its canonical form {signals.canonical!r} says too little to "
                        f"match (under {MIN_MATCH_CHARS} letters or digits besides links); it would match every such "
                        "message")
    label = content_id or text[:TEXT_LABEL_CHARS]
    return [Entry("text_simhash", signals.simhash.hex(), label), Entry("text_sha256", signals.sha256, label)]


def parse(fmt: str, data: str) -> list[Entry]:
    """The entries of a hash list in format `fmt` (one of FORMATS); BankError naming the line of a bad row. A
    leading byte-order mark (a file saved by a spreadsheet) is ignored."""
    data = data.removeprefix("\ufeff")
    if fmt == "csv":
        entries = _parse_csv(data)
    elif fmt == "threatexchange":
        entries = _parse_threatexchange(data)
    elif fmt == "hma_json":
        entries = _parse_hma_json(data)
    else:
        raise BankError(f"format: one of {', '.join(FORMATS)}, got {fmt!r}")
    return entries


def render(fmt: str, entries: Iterable[Entry]) -> str:
    """`entries` written in format `fmt` (one of FORMATS); `parse(fmt, render(fmt, e))` gives `e` back (without
    the content ids in the threatexchange format, which has none)."""
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["signal_type", "value", "content_id"])
        for entry in entries:
            writer.writerow([entry.signal, entry.value, entry.content_id])
        return out.getvalue()
    if fmt == "threatexchange":
        return "".join(f"{entry.signal} {entry.value}\n" for entry in entries)
    if fmt == "hma_json":
        return json.dumps(_hma_objects(entries), ensure_ascii=False, indent=1) + "\n"
    raise BankError(f"format: one of {', '.join(FORMATS)}, got {fmt!r}")


def _entry(where: str, signal: str, value: str, content_id: str) -> Entry:
    try:
        return Entry(signal, value.strip().lower(), content_id)
    except BankError as error:
        raise BankError(f"{where}: {error}") from None


def _raw_text(where: str, text: str, content_id: str, count: int) -> list[Entry]:
    """The entries of the `count`-th raw text of a list (hashed here, as a query is); BankError naming `where`."""
    if count > MAX_RAW_TEXTS:
        raise BankError(f"{where}: more than {MAX_RAW_TEXTS} raw texts in one list (each is hashed here): split it")
    try:
        return text_entries(text, content_id)
    except BankError as error:
        raise BankError(f"{where}: {error}") from None


def _check_size(entries: Sequence[Entry]) -> None:
    if len(entries) > MAX_IMPORT_ROWS:
        raise BankError(f"more than {MAX_IMPORT_ROWS} rows: split the list")


def _parse_csv(data: str) -> list[Entry]:
    entries: list[Entry] = []
    for number, row in enumerate(csv.reader(io.StringIO(data)), 1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if not entries and row[0].strip() == "signal_type":  # the header, before the first row
            continue
        if len(row) < 2 or len(row) > 3:
            raise BankError(f"line {number}: expected signal_type,value[,content_id], got {len(row)} fields")
        entries.append(_entry(f"line {number}", row[0].strip(), row[1], row[2].strip() if len(row) > 2 else ""))
        _check_size(entries)
    return entries


def _parse_threatexchange(data: str) -> list[Entry]:
    entries: list[Entry] = []
    texts = 0
    for number, line in enumerate(data.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, signal = line.partition(" ")
        signal = signal.strip()
        if not signal:
            raise BankError(f"line {number}: expected '<signal_type> <signal>', got {line[:80]!r}")
        if name == "raw_text":
            texts += 1
            entries += _raw_text(f"line {number}", signal, "", texts)
        elif name in _TE_NAMES:
            entries.append(_entry(f"line {number}", _TE_NAMES[name], signal, ""))
        elif name.startswith(_TE_REFUSED):
            raise BankError(f"line {number}: signal type {name!r} is not matched here: this mesh matches images "
                            "(pdq, photo_md5, photo_sha256) and texts (raw_text)")
        else:
            raise BankError(f"line {number}: unknown signal type {name[:40]!r}; known: "
                            f"{', '.join(sorted(_TE_NAMES))}, raw_text")
        _check_size(entries)
    return entries


def _parse_hma_json(data: str) -> list[Entry]:
    try:
        document = json.loads(data)
    except json.JSONDecodeError as error:
        raise BankError(f"not JSON: {error}") from None
    items = document if isinstance(document, list) else [document]
    entries: list[Entry] = []
    texts = 0
    for index, item in enumerate(items):
        where = f"[{index}]"
        if not isinstance(item, dict):
            raise BankError(f"{where}: expected an object with 'signals' (or signal_type: value pairs)")
        signals = item.get("signals", item if "id" not in item else None)
        if not isinstance(signals, dict) or not signals:
            raise BankError(f"{where}: 'signals' must be a non-empty object of signal_type: value")
        content_id = str(item["id"]) if "signals" in item and item.get("id") is not None else ""
        if isinstance(item.get("metadata"), dict) and item["metadata"].get("content_id"):
            content_id = str(item["metadata"]["content_id"])
        for name, value in signals.items():
            if not isinstance(value, str):
                raise BankError(f"{where}.signals.{name}: a hash is a string")
            if name == "raw_text":
                texts += 1
                entries += _raw_text(f"{where}.signals.raw_text", value, content_id, texts)
                continue
            signal = _TE_NAMES.get(name)
            if signal is None:
                raise BankError(f"{where}.signals: signal type {name[:40]!r} is not matched here; known: "
                                f"{', '.join(sorted(_TE_NAMES))}, raw_text")
            entries.append(_entry(f"{where}.signals.{name}", signal, value, content_id))
        _check_size(entries)
    return entries


def _hma_objects(entries: Iterable[Entry]) -> list[dict[str, Any]]:
    """One object per content id (entries without one: one object each), signals by type."""
    grouped: OrderedDict[str, list[dict[str, str]]] = OrderedDict()
    loose: list[dict[str, Any]] = []
    for entry in entries:
        if not entry.content_id:
            loose.append({"signals": {entry.signal: entry.value}})
            continue
        objects = grouped.setdefault(entry.content_id, [])
        free = next((signals for signals in objects if entry.signal not in signals), None)
        if free is None:
            free = {}
            objects.append(free)
        free[entry.signal] = entry.value
    out: list[dict[str, Any]] = [{"id": content_id, "signals": signals}
                                 for content_id, objects in grouped.items() for signals in objects]
    return out + loose


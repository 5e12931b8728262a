"""What the `auditmesh banks` commands do, as functions (the CLI only parses and prints). They write the
bank store file the match service reads (`match.banks_path`, default var/banks.sqlite); a running
service picks the change up within its `reload_interval_s`.

    auditmesh banks create spam_waves --shared --category spam --action review
    auditmesh banks add spam_waves --text "FREE crypto airdrop, connect your wallet" --image known.jpg
    auditmesh banks import spam_waves hashes.csv        # lines: signal_type,value[,content_id]
    auditmesh banks list
    auditmesh banks delete spam_waves
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Sequence

from services.common.image_decode import decode_rgb
from services.match.banks import BankError, BankSpec, BankStore, Entry
from services.match.signals import MIN_MATCH_CHARS, image_signals, matchable, pdq_hex, text_signals

__all__ = ["add_content", "create_bank", "delete_bank", "import_csv", "list_banks"]

#: Rows of one import file at most.
MAX_IMPORT_ROWS = 10_000_000


def create_bank(store: BankStore, spec: BankSpec) -> dict[str, Any]:
    """Create a bank (BankError when one of that name exists); its name and version."""
    return {"bank": spec.name, "version": store.create_bank(spec)}


def delete_bank(store: BankStore, name: str) -> dict[str, Any]:
    """Delete a bank and its hashes (BankError when there is none)."""
    store.delete_bank(name)
    return {"bank": name, "deleted": True}


def add_content(store: BankStore, bank: str, *, texts: Sequence[str] = (), images: Sequence[Path] = ()) -> dict[str, Any]:
    """Hash `texts` and `images` as the service does and add their hashes to `bank` (content id: the text's
    first 60 characters, or the image's file name). BankError naming a file that is not an image."""
    entries: list[Entry] = []
    for text in texts:
        signals = text_signals(text)
        if not matchable(signals.canonical):
            raise BankError(f"text {text[:60]!r}: its canonical form {signals.canonical!r} says too little to match "
                            f"(under {MIN_MATCH_CHARS} letters or digits besides links); it would match every such message")
        label = text[:60]
        entries += [Entry("text_simhash", signals.simhash.hex(), label), Entry("text_sha256", signals.sha256, label)]
    for path in images:
        data = path.read_bytes()
        try:
            hashed = image_signals(data, decode_rgb(data))
        except ValueError as error:
            raise BankError(f"{path}: {error}") from None
        if hashed.quality >= 50:  # a flat image's perceptual hash would match every flat image: exact hashes only
            entries.append(Entry("pdq", pdq_hex(hashed.pdq[0]), path.name))
        entries += [Entry("md5", hashed.md5, path.name), Entry("sha256", hashed.sha256, path.name)]
    return {"bank": bank, "added": len(entries), "version": store.add(bank, entries)}


def import_csv(store: BankStore, bank: str, path: Path) -> dict[str, Any]:
    """Add the hashes of a CSV file (`signal_type,value[,content_id]` per line: pdq, md5, sha256,
    text_simhash or text_sha256, lower-case hex) to `bank`; BankError naming the line of a bad row."""
    entries: list[Entry] = []
    with open(path, newline="", encoding="utf-8") as handle:
        for number, row in enumerate(csv.reader(handle), 1):
            if not row or row[0].startswith("#") or (number == 1 and row[0] == "signal_type"):
                continue
            if len(row) < 2:
                raise BankError(f"{path}:{number}: expected signal_type,value[,content_id]")
            try:
                entries.append(Entry(row[0].strip(), row[1].strip().lower(), row[2].strip() if len(row) > 2 else ""))
            except BankError as error:
                raise BankError(f"{path}:{number}: {error}") from None
            if len(entries) > MAX_IMPORT_ROWS:
                raise BankError(f"{path}: more than {MAX_IMPORT_ROWS} rows; split the file")
    return {"bank": bank, "rows": len(entries), "version": store.add(bank, entries)}


def list_banks(store: BankStore) -> list[dict[str, Any]]:
    """Every bank: its spec, version and how many hashes of each signal type it holds."""
    out = []
    for spec, version in store.banks():
        counts: dict[str, int] = {}
        for entry in store.entries(spec.name):
            counts[entry.signal] = counts.get(entry.signal, 0) + 1
        out.append({"bank": spec.name, "version": version, "owner": spec.owner or None, "shared": spec.shared,
                    "category": spec.category, "action": spec.action, "negative": spec.negative,
                    "enabled_ratio": spec.enabled_ratio, "hashes": counts})
    return out

"""Bank management as functions: what `auditmesh banks` (which writes the store file directly) and the
admin API's BankAdmin (services/router/control/bank_admin.py, over gRPC) both do. They write the bank
store the match service reads (`match.banks_path`, default var/banks.sqlite); a running service picks
the change up within its `reload_interval_s`.

    auditmesh banks create spam_waves --shared --category spam --action review
    auditmesh banks add spam_waves --text "FREE crypto airdrop, connect your wallet" --image known.jpg
    auditmesh banks import spam_waves hashes.csv                 # signal_type,value[,content_id]
    auditmesh banks import spam_waves te.txt --format threatexchange
    auditmesh banks export spam_waves --format hma_json
    auditmesh banks remove spam_waves --content-id known.jpg
    auditmesh banks list
    auditmesh banks delete spam_waves
"""

from __future__ import annotations

from typing import Any, Sequence

from services.common.image_decode import decode_rgb
from services.match.banks import BankError, BankNotFoundError, BankRepository, BankSpec, Entry
from services.match.formats import parse, render, text_entries
from services.match.signals import image_signals, pdq_hex

__all__ = ["add_content", "bank_info", "content_entries", "create_bank", "delete_bank", "export_hashes",
           "image_entries", "import_hashes", "list_banks", "remove_content"]


def create_bank(store: BankRepository, spec: BankSpec) -> dict[str, Any]:
    """Create a bank (BankError when one of that name exists); its name and version."""
    return {"bank": spec.name, "version": store.create_bank(spec)}


def delete_bank(store: BankRepository, name: str, *, owner: str | None = None) -> dict[str, Any]:
    """Delete a bank and its hashes (BankNotFoundError when there is none, or with `owner` not that owner's)."""
    store.delete_bank(name, owner=owner)
    return {"bank": name, "deleted": True}


def image_entries(data: bytes, content_id: str) -> list[Entry]:
    """The entries an image is matched by, hashed as the service hashes a query: its PDQ (unless the image
    is too flat for a perceptual hash to mean anything: quality under 50), MD5 and SHA-256. ValueError
    when the bytes are not an image it decodes."""
    hashed = image_signals(data, decode_rgb(data))
    entries = [Entry("pdq", pdq_hex(hashed.pdq[0]), content_id)] if hashed.quality >= 50 else []
    return entries + [Entry("md5", hashed.md5, content_id), Entry("sha256", hashed.sha256, content_id)]


def content_entries(*, texts: Sequence[tuple[str, str]] = (), images: Sequence[tuple[bytes, str]] = ()) -> list[Entry]:
    """The entries of texts and images, each given with its content id ("" for a text: its first 60
    characters). BankError naming the content id of an image that does not decode or a text too short."""
    entries: list[Entry] = []
    for text, content_id in texts:
        entries += text_entries(text, content_id)
    for data, content_id in images:
        try:
            entries += image_entries(data, content_id)
        except ValueError as error:
            raise BankError(f"{content_id or 'image'}: {error}") from None
    return entries


def add_content(store: BankRepository, bank: str, entries: Sequence[Entry], *, owner: str | None = None) -> dict[str, Any]:
    """Add `entries` (from `content_entries` or a hash list) to `bank`: how many, and its new version."""
    return {"bank": bank, "added": len(entries), "version": store.add(bank, entries, owner=owner)}


def remove_content(store: BankRepository, bank: str, *, entries: Sequence[Entry] = (),
                   content_ids: Sequence[str] = (), owner: str | None = None) -> dict[str, Any]:
    """Remove hashes from `bank`: `entries` by signal and value, and every hash banked under `content_ids`."""
    removed, version = store.remove_content(bank, content_ids, owner=owner)
    if entries or not content_ids:
        by_value, version = store.remove(bank, entries, owner=owner)
        removed += by_value
    return {"bank": bank, "removed": removed, "version": version}


def import_hashes(store: BankRepository, bank: str, data: str, fmt: str = "csv", *,
                  owner: str | None = None) -> dict[str, Any]:
    """Add the hashes of a hash list in format `fmt` (services/match/formats.py) to `bank`, in one
    transaction; BankError naming the line of a bad row (nothing is added then)."""
    if store.bank(bank) is None:
        raise BankNotFoundError(f"bank {bank!r} does not exist; create it first")
    entries = parse(fmt, data)
    return {"bank": bank, "rows": len(entries), "version": store.add(bank, entries, owner=owner)}


def export_hashes(store: BankRepository, bank: str, fmt: str = "csv") -> str:
    """Every hash of `bank` as a hash list in format `fmt`; BankError when there is no such bank."""
    if store.bank(bank) is None:
        raise BankNotFoundError(f"bank {bank!r} does not exist")
    return render(fmt, store.entries(bank))


def bank_info(store: BankRepository, spec: BankSpec, version: int) -> dict[str, Any]:
    """One bank's settings, version and hash counts per signal type."""
    return {"bank": spec.name, "version": version, "owner": spec.owner or None, "shared": spec.shared,
            "category": spec.category, "action": spec.action, "negative": spec.negative,
            "enabled_ratio": spec.enabled_ratio, "hashes": store.counts(spec.name)}


def list_banks(store: BankRepository) -> list[dict[str, Any]]:
    """Every bank: its spec, version and how many hashes of each signal type it holds."""
    return [bank_info(store, spec, version) for spec, version in store.banks()]

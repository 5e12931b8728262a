"""Reviewers' image labels become known content (issues 40 and 42): a label that an image is of a category
puts the image's hashes (PDQ, MD5, SHA-256, as the match service hashes a query) into the tenant's reviewed
bank of that category, so that a re-post of it (resized, re-encoded, the same bytes) is matched; a label that
it is not takes them out (a reversed decision). Plain logic over a `BankRepository`; no gRPC.

A reviewed bank is named `reviewed-<digest of tenant and category>` (a name for every tenant id and category,
one per pair; BankAdmin keeps the `reviewed-` names for them), owned by the tenant, created on demand with
action `block` (reviewers confirmed the content) and a description naming both. It matches only under a
policy version with `matches:` (docs/matching.md), like any bank. A label false for a category takes out of
it every hash its item banked (by content id: the item id) and the hashes of the image sent.

Example::

    hashed = hash_image_labels([ImageLabel("items[0]", "m-1", data, {"violence": True})])
    banked, unbanked = bank_image_labels(store, "acme", hashed)
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Mapping, Sequence

from services.common.errors import InvalidRequestError, NotFoundError
from services.match.banks import BankError, BankExistsError, BankNotFoundError, BankRepository, BankSpec, Entry
from services.match.commands import image_entries

__all__ = ["HashedImage", "IMAGE_ONLY_TEXT", "ImageLabel", "REVIEWED_PREFIX", "bank_image_labels", "hash_image_labels", "reviewed_bank_name"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImageLabel:
    """One labelled image: where it was given (`items[i]`), its item id (the banked hashes' content id), the
    image's bytes, and its labels (category -> is one)."""

    field: str
    item_id: str
    image: bytes
    labels: Mapping[str, bool]


#: What an image-only label is checked with in place of a text (the label store's checks name every item; the
#: label itself is banked, never stored as a text).
IMAGE_ONLY_TEXT = "(image)"
#: The names BankAdmin keeps for reviewed banks (services/router/control/bank_admin.py refuses them).
REVIEWED_PREFIX = "reviewed-"


def reviewed_bank_name(tenant: str, category: str) -> str:
    """The tenant's reviewed bank of `category`: one name per (tenant, category), valid for any of them.

    Example::

        >>> reviewed_bank_name("acme", "violence")
        'reviewed-9286d28776dd14c11d50bb69'
    """
    digest = hashlib.sha256(f"{tenant}\0{category}".encode("utf-8")).hexdigest()[:24]
    return f"{REVIEWED_PREFIX}{digest}"


@dataclass(frozen=True)
class HashedImage:
    """A labelled image's hashes (its item id their content id), ready to bank."""

    field: str
    item_id: str
    labels: Mapping[str, bool]
    entries: tuple[Entry, ...]


def hash_image_labels(labels: Sequence[ImageLabel]) -> list[HashedImage]:
    """Every labelled image decoded and hashed, before anything is stored; InvalidRequestError naming
    `items[i].image` for one that does not decode."""
    hashed = []
    for label in labels:
        try:
            entries = tuple(image_entries(label.image, label.item_id))
        except ValueError as error:
            raise InvalidRequestError(f"{label.field}.image: {error}") from None
        hashed.append(HashedImage(label.field, label.item_id, label.labels, entries))
    return hashed


def bank_image_labels(store: BankRepository, tenant: str, images: Sequence[HashedImage]) -> tuple[int, int]:
    """Put each image's hashes into (true) or take them out of (false) the tenant's reviewed bank of each
    category; (hashes sent in, hashes taken out). NotFoundError when a reviewed bank's name is another tenant's
    bank (made by hand: BankAdmin refuses such names)."""
    banked = unbanked = 0
    for image in images:
        for category, is_one in sorted(image.labels.items()):
            name = reviewed_bank_name(tenant, category)
            try:
                if is_one:
                    _ensure_bank(store, name, tenant, category)
                    store.add(name, image.entries, owner=tenant)
                    banked += len(image.entries)
                elif store.bank(name) is not None:
                    unbanked += store.remove(name, image.entries, owner=tenant)[0]
                    # what this item banked earlier, from another copy of the image too
                    unbanked += store.remove_content(name, [image.item_id], owner=tenant)[0]
            except BankNotFoundError:
                raise NotFoundError(f"{image.field}.labels.{category}: bank {name!r} is not this tenant's") from None
            except BankError as error:
                raise InvalidRequestError(f"{image.field}.labels.{category}: {error}") from None
    return banked, unbanked


def _ensure_bank(store: BankRepository, name: str, tenant: str, category: str) -> None:
    """Create the reviewed bank unless it exists (another call may make it at the same moment: then the add
    that follows checks it is this tenant's)."""
    if store.bank(name) is not None:
        return
    try:
        store.create_bank(BankSpec(name, owner=tenant, category=category, action="block",
                                   description=f"images reviewers of {tenant} labelled {category}"))
    except BankExistsError:
        return
    log.info("reviewed bank %s made for tenant %s, category %s", name, tenant, category)

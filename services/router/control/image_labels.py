"""Reviewers' image labels become known content (issues 40 and 42): a label that an image is of a category
puts the image's hashes (PDQ, MD5, SHA-256, as the match service hashes a query) into the tenant's reviewed
bank of that category, so that a re-post of it (resized, re-encoded, the same bytes) is matched; a label that
it is not takes them out (a reversed decision). Plain logic over a `BankRepository`; no gRPC.

A reviewed bank is `<tenant>-reviewed-<category>` (lower case; `custom.x` as `custom-x`; a short digest of
the tenant id added when lower-casing changes it), owned by the tenant, created on demand with action
`block`: reviewers confirmed the content. It matches only under a policy version with `matches:`
(docs/matching.md), like any bank.

Example::

    hashed = hash_image_labels([ImageLabel("items[0]", "m-1", data, {"violence": True})])
    banked, unbanked = bank_image_labels(store, "acme", hashed)
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import Mapping, Sequence

from services.common.errors import InvalidRequestError, NotFoundError
from services.match.banks import BankError, BankExistsError, BankNotFoundError, BankRepository, BankSpec, Entry
from services.match.commands import image_entries

__all__ = ["HashedImage", "ImageLabel", "bank_image_labels", "hash_image_labels", "reviewed_bank_name"]

_UNSAFE = re.compile(r"[^a-z0-9_-]")


@dataclass(frozen=True)
class ImageLabel:
    """One labelled image: where it was given (`items[i]`), its item id (the banked hashes' content id), the
    image's bytes, and its labels (category -> is one)."""

    field: str
    item_id: str
    image: bytes
    labels: Mapping[str, bool]


def reviewed_bank_name(tenant: str, category: str) -> str:
    """The tenant's reviewed bank of `category`.

    Example::

        >>> reviewed_bank_name("acme", "violence"), reviewed_bank_name("acme", "custom.crypto_scam")
        ('acme-reviewed-violence', 'acme-reviewed-custom-crypto_scam')
        >>> reviewed_bank_name("Acme", "spam")
        'acme-a5f61500-reviewed-spam'
    """
    owner = _UNSAFE.sub("-", tenant.lower())
    if owner != tenant:  # "Acme" and "acme" are two tenants: their banks must be two banks
        owner = f"{owner}-{zlib.crc32(tenant.encode('utf-8')):08x}"
    return f"{owner}-reviewed-{_UNSAFE.sub('-', category.lower())}"[:64]


@dataclass(frozen=True)
class HashedImage:
    """A labelled image's hashes (its item id their content id), ready to bank."""

    field: str
    labels: Mapping[str, bool]
    entries: tuple[Entry, ...]


def hash_image_labels(labels: Sequence[ImageLabel]) -> list[HashedImage]:
    """Every labelled image decoded and hashed, before anything is stored; InvalidRequestError naming
    `items[i].image` for one that does not decode."""
    hashed = []
    for label in labels:
        try:
            hashed.append(HashedImage(label.field, label.labels, tuple(image_entries(label.image, label.item_id))))
        except ValueError as error:
            raise InvalidRequestError(f"{label.field}.image: {error}") from None
    return hashed


def bank_image_labels(store: BankRepository, tenant: str, images: Sequence[HashedImage]) -> tuple[int, int]:
    """Put each image's hashes into (true) or take them out of (false) the tenant's reviewed bank of each
    category; (hashes put in, hashes taken out). NotFoundError when a reviewed bank's name is another tenant's
    bank."""
    banked = unbanked = 0
    for image in images:
        for category, is_one in sorted(image.labels.items()):
            name = reviewed_bank_name(tenant, category)
            try:
                if is_one:
                    if store.bank(name) is None:
                        try:  # created here unless another call just did; another tenant's stays theirs (add refuses)
                            store.create_bank(BankSpec(name, owner=tenant, category=category, action="block",
                                                       description=f"images reviewers of {tenant} labelled {category}"))
                        except BankExistsError:
                            pass
                    before = sum(store.counts(name).values())
                    store.add(name, image.entries, owner=tenant)
                    banked += sum(store.counts(name).values()) - before
                elif store.bank(name) is not None:
                    unbanked += store.remove(name, image.entries, owner=tenant)[0]
            except BankNotFoundError:
                raise NotFoundError(f"{image.field}.labels.{category}: bank {name!r} is not this tenant's") from None
            except BankError as error:
                raise InvalidRequestError(f"{image.field}.labels.{category}: {error}") from None
    return banked, unbanked

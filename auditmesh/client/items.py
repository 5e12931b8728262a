"""What a caller sends and gets back, as plain typed values, and their `auditmesh.v1` messages.

`Item` is one piece of content (text and/or images, judged together); `Verdict` is the router's
answer to it. The full `ModerateResponse` (evidence, timings, model versions) stays available as
`Verdict.response`.

Example::

    >>> request = to_item(Item(text="gg wp", metadata={"channel": "lobby"}, id="m-1"))
    >>> request.id, request.parts[0].text, dict(request.metadata)
    ('m-1', 'gg wp', {'channel': 'lobby'})
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from auditmesh.v1 import moderation_pb2 as pb

#: Decision enum value -> the lower-case name the policy files use.
DECISION_NAMES = {pb.DECISION_UNSPECIFIED: "unspecified", pb.ALLOW: "allow", pb.REVIEW: "review", pb.BLOCK: "block"}
SEVERITY_NAMES = {pb.SEVERITY_UNSPECIFIED: "unspecified", pb.SEVERITY_NONE: "none", pb.SEVERITY_LOW: "low",
                  pb.SEVERITY_MEDIUM: "medium", pb.SEVERITY_HIGH: "high"}


@dataclass(frozen=True)
class Item:
    """One piece of content: optional text, any number of encoded images (JPEG, PNG, WebP or GIF bytes),
    free-form metadata echoed in the audit trail, and an optional id echoed back."""

    text: str | None = None
    images: Sequence[bytes] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)
    id: str = ""

    def __post_init__(self) -> None:
        if self.text is None and not self.images:
            raise ValueError("an Item needs text or at least one image")
        if isinstance(self.images, (bytes, bytearray)):
            raise TypeError("images must be a sequence of encoded images (e.g. [png_bytes]), not one bytes object")


@dataclass(frozen=True)
class CategoryScore:
    """One category the policy evaluated: its score (0..1), severity, action and the rule that decided, and
    the kind of content that decided it (`subcategory`, e.g. "self_harm/intent"; "" when none did) with the
    deciding text's share of each kind (docs/taxonomy.md, "Subcategories")."""

    category: str
    score: float
    severity: str
    action: str
    rule: str
    subcategory: str = ""
    shares: Mapping[str, float] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Verdict:
    """The router's decision on one item: `decision` is "allow", "review" or "block"."""

    request_id: str
    item_id: str
    decision: str
    categories: tuple[CategoryScore, ...]
    policy_name: str
    policy_version: str
    degraded: bool
    #: The full auditmesh.v1.ModerateResponse (evidence, timings, model versions, degradations).
    response: Any = field(repr=False, compare=False)

    @property
    def blocked(self) -> bool:
        return self.decision == "block"

    def category(self, name: str) -> CategoryScore | None:
        """The result for category `name`, or None when the policy did not evaluate it."""
        return next((c for c in self.categories if c.category == name), None)


def to_item(item: Item | str) -> Any:
    """The auditmesh.v1.Item for `item` (a bare string is a text-only item)."""
    if isinstance(item, str):
        item = Item(text=item)
    message = pb.Item(id=item.id, metadata=dict(item.metadata))
    if item.text is not None:
        message.parts.add(text=item.text)
    for image in item.images:
        message.parts.add(image=pb.Image(data=bytes(image)))
    return message


def verdict_from(response: Any) -> Verdict:
    """The Verdict for a (successful) auditmesh.v1.ModerateResponse."""
    return Verdict(request_id=response.request_id, item_id=response.item_id,
                   decision=DECISION_NAMES.get(response.decision, "unspecified"),
                   categories=tuple(CategoryScore(c.category, c.score, SEVERITY_NAMES.get(c.severity, "unspecified"),
                                                  DECISION_NAMES.get(c.action, "unspecified"), c.rule, c.subcategory,
                                                  {share.name: share.share for share in c.subcategories})
                                    for c in response.categories),
                   policy_name=response.policy_name, policy_version=response.policy_version,
                   degraded=response.degraded, response=response)


__all__ = ["CategoryScore", "Item", "Verdict", "to_item", "verdict_from"]

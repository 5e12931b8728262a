"""The moderation taxonomy: every category name auditmesh uses, in one place.

Each category says which signals feed it and how it maps to the categories of Azure AI Content Safety
and the OpenAI moderation endpoint, so a platform migrating from either can translate its thresholds.
Tenant blocklist categories are named `custom.<name>` and are not listed here.
"""

from __future__ import annotations

from dataclasses import dataclass

CUSTOM_PREFIX = "custom."


@dataclass(frozen=True)
class Category:
    name: str
    description: str
    signals: tuple[str, ...]
    azure: str
    openai: str


CATEGORIES: dict[str, Category] = {c.name: c for c in (
    Category("sexual", "Sexual or nude content in images or text.",
             ("vision: opennsfw NSFW probability", "lexicon: sexual terms"),
             "Sexual", "sexual, sexual/minors"),
    Category("violence", "Graphic violence and gore.",
             ("vision: image-safety classifier NSFL (gore) probability, calibrated", "lexicon: violence terms"),
             "Violence", "violence, violence/graphic"),
    Category("hate", "Hate, harassment and toxic insults (English classifier; Chinese via lexicon).",
             ("text: toxicity_en probability", "lexicon: hate terms"),
             "Hate", "hate, hate/threatening, harassment, harassment/threatening"),
    Category("spam", "Unsolicited commercial messages, scams, prize/phishing bait.",
             ("text: spam_en probability", "lexicon: spam terms"),
             "(none; Azure has no spam category)", "(none)"),
    Category("profanity", "Swearing and vulgar language without a protected-group target.",
             ("lexicon: profanity terms",),
             "(part of Hate at low severity)", "(part of harassment)"),
    Category("self_harm", "Promotion or description of self-harm.",
             ("lexicon: self-harm terms",),
             "SelfHarm", "self-harm, self-harm/intent, self-harm/instructions"),
)}



def is_custom_category(category: str) -> bool:
    """True for a tenant blocklist category, `custom.<name>`."""
    return category.startswith(CUSTOM_PREFIX) and len(category) > len(CUSTOM_PREFIX)

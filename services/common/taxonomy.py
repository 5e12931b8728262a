"""The moderation taxonomy: every category name auditmesh uses, in one place (the source of truth).

Each category says which modalities score it, which signals feed it, and how it maps to the
categories of Azure AI Content Safety, the OpenAI moderation endpoint and Llama Guard 3 (S1..S14),
so a platform migrating from any of them can translate its thresholds. `docs/taxonomy.md` mirrors
this table (tests/unit/common/test_taxonomy.py checks that they agree). Tenant blocklist categories
are named `custom.<name>` and are not listed here.

Example::

    >>> CATEGORIES["harassment"].llama_guard
    ()
    >>> TEXT_CATEGORIES
    ('harassment', 'hate', 'violence', 'self_harm', 'sexual', 'profanity', 'spam')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CATEGORIES", "CUSTOM_PREFIX", "Category", "IMAGE_CATEGORIES", "LLAMA_GUARD_3", "TEXT_CATEGORIES",
           "is_custom_category", "is_well_formed_custom_category"]

CUSTOM_PREFIX = "custom."
#: The name after `custom.` of a category a tenant defines (trained classifiers, policy thresholds).
_CUSTOM_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")

#: Llama Guard 3's hazard categories (MLCommons AI Safety taxonomy), for the `llama_guard` column.
LLAMA_GUARD_3: dict[str, str] = {
    "S1": "Violent Crimes", "S2": "Non-Violent Crimes", "S3": "Sex-Related Crimes",
    "S4": "Child Sexual Exploitation", "S5": "Defamation", "S6": "Specialized Advice", "S7": "Privacy",
    "S8": "Intellectual Property", "S9": "Indiscriminate Weapons", "S10": "Hate",
    "S11": "Suicide & Self-Harm", "S12": "Sexual Content", "S13": "Elections", "S14": "Code Interpreter Abuse",
}


@dataclass(frozen=True)
class Category:
    """One category: who scores it (`modalities`: "text", "image") and its nearest external categories."""

    name: str
    modalities: tuple[str, ...]
    description: str
    signals: tuple[str, ...]
    azure: str
    openai: str
    #: Llama Guard 3 codes (keys of LLAMA_GUARD_3); () = no counterpart.
    llama_guard: tuple[str, ...]

    def __post_init__(self) -> None:
        unknown = [code for code in self.llama_guard if code not in LLAMA_GUARD_3]
        if unknown:
            raise ValueError(f"category {self.name!r}: llama_guard {unknown[0]!r} is not one of S1..S14")
        bad = [m for m in self.modalities if m not in ("text", "image")]
        if bad or not self.modalities:
            raise ValueError(f"category {self.name!r}: modalities must be 'text' and/or 'image', got {self.modalities}")


_TEXT_MODELS = "text: text_moderation (fast) / text_semantic (accurate) calibrated score"

CATEGORIES: dict[str, Category] = {c.name: c for c in (
    Category("harassment", ("text",),
             "Insults, bullying and degradation aimed at a person (second person or a named person).",
             (f"{_TEXT_MODELS} `HARASSMENT`", "lexicon: insult terms (person-targeted entries)", "TARGET: person"),
             "Hate (harassment and bullying, low-medium severity)", "harassment", ()),
    Category("hate", ("text",),
             "Attacks on, dehumanisation of, or slurs against a protected group (race, religion, gender, ...).",
             (f"{_TEXT_MODELS} `HATE`", "lexicon: slurs and group-hate terms", "TARGET: protected group"),
             "Hate", "hate, hate/threatening", ("S10",)),
    Category("violence", ("text", "image"),
             "Text: threats (direct or indirect) and incitement to violence. Image: graphic violence and gore.",
             (f"{_TEXT_MODELS} `VIOLENCE`", "lexicon + context rules: threat terms",
              "vision: image-safety classifier NSFL (gore) probability, calibrated"),
             "Violence", "violence, violence/graphic, harassment/threatening", ("S1",)),
    Category("self_harm", ("text",),
             "Encouragement of or incitement to self-harm or suicide (not people asking for help).",
             (f"{_TEXT_MODELS} `SELF_HARM`", "lexicon + context rules: self-harm incitement"),
             "SelfHarm", "self-harm, self-harm/intent, self-harm/instructions", ("S11",)),
    Category("sexual", ("text", "image"),
             "Sexual content: explicit text, sexual solicitation; nude or sexual images.",
             (f"{_TEXT_MODELS} `SEXUAL`", "lexicon: sexual terms", "vision: opennsfw NSFW probability"),
             "Sexual", "sexual, sexual/minors", ("S12", "S3", "S4")),
    Category("profanity", ("text",),
             "Swearing and vulgar language aimed at nobody (usually allow or review, not block).",
             (f"{_TEXT_MODELS} `PROFANITY`", "lexicon: profanity terms"),
             "(none: Hate at severity 0-1, or a custom blocklist)", "(none)", ()),
    Category("spam", ("text",),
             "Unsolicited commercial messages, scams, phishing and prize or advance-fee bait.",
             (f"{_TEXT_MODELS} `SPAM`", "lexicon + rules: spam keyword families, URL features (a URL alone never blocks)"),
             "(none: Azure has no spam category)", "(none; illicit for fraud instructions)", ("S2",)),
)}

#: Categories the text models score, in the order of the text contract's score outputs.
TEXT_CATEGORIES: tuple[str, ...] = tuple(name for name, c in CATEGORIES.items() if "text" in c.modalities)
#: Categories the vision model scores.
IMAGE_CATEGORIES: tuple[str, ...] = tuple(name for name, c in CATEGORIES.items() if "image" in c.modalities)


def is_custom_category(category: str) -> bool:
    """True for a tenant blocklist category, `custom.<name>`."""
    return category.startswith(CUSTOM_PREFIX) and len(category) > len(CUSTOM_PREFIX)


def is_well_formed_custom_category(category: str) -> bool:
    """True for `custom.<name>` with a name of lower-case letters, digits and underscores (starting with
    a letter, at most 63): what a tenant classifier may be trained for and a policy may set thresholds on.

    Example::

        >>> is_well_formed_custom_category("custom.crypto_scam"), is_well_formed_custom_category("custom.Bad-Name")
        (True, False)
    """
    return category.startswith(CUSTOM_PREFIX) and _CUSTOM_NAME.fullmatch(category[len(CUSTOM_PREFIX):]) is not None

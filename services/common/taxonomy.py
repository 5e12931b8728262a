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

__all__ = ["CATEGORIES", "CUSTOM_PREFIX", "Category", "IMAGE_CATEGORIES", "LLAMA_GUARD_3", "MODELLED_SUBCATEGORIES",
           "SUBCATEGORIES", "Subcategory", "TEXT_CATEGORIES", "is_custom_category", "is_well_formed_custom_category",
           "subcategories_of"]

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


@dataclass(frozen=True)
class Subcategory:
    """A kind of content inside a category that a trust-and-safety team acts on differently (`<parent>/<kind>`).

    The text models give, for every English text, the share of each kind: the probability that the text is
    of this kind *if* it is content of the parent category (heads trained on the naturalistic corpus's
    parent-labelled rows; `sexual/minors` is read from references to minors instead, `minor_references`).
    When the parent category fires, the kinds whose share reaches the policy's `share` decide its action
    (`subcategories` in a policy, services/router/policy.py). `default_action` is that action in a policy
    that does not set it; `floor` is the lowest action any policy may give it (None: no floor).
    """

    name: str
    description: str
    default_action: str
    openai: str
    azure: str
    llama_guard: tuple[str, ...]
    #: "heads": the text models' subcategory heads; "minor_references": references to minors in the text.
    scored_by: str = "heads"
    floor: str | None = None

    @property
    def parent(self) -> str:
        """The category this kind belongs to (the part before the slash)."""
        return self.name.split("/", 1)[0]

    def __post_init__(self) -> None:
        if "/" not in self.name or self.parent not in CATEGORIES:
            raise ValueError(f"subcategory {self.name!r} must be <category>/<kind> of a taxonomy category")
        if self.default_action not in ("allow", "review", "block") or self.floor not in (None, "review", "block"):
            raise ValueError(f"subcategory {self.name!r}: default_action/floor must be allow, review or block")
        unknown = [code for code in self.llama_guard if code not in LLAMA_GUARD_3]
        if unknown:
            raise ValueError(f"subcategory {self.name!r}: llama_guard {unknown[0]!r} is not one of S1..S14")
        if self.scored_by not in ("heads", "minor_references"):
            raise ValueError(f"subcategory {self.name!r}: scored_by must be 'heads' or 'minor_references'")


SUBCATEGORIES: dict[str, Subcategory] = {s.name: s for s in (
    Subcategory("self_harm/intent",
                "Someone says they want to hurt or kill themselves, or are about to (ideation, plans, goodbyes): a "
                "person in crisis. Default REVIEW, so a platform can route them to support instead of removing them.",
                "review", "self-harm/intent", "SelfHarm", ("S11",)),
    Subcategory("self_harm/instructions",
                "How to hurt or kill oneself: methods, amounts, ways to hide it.", "block",
                "self-harm/instructions", "SelfHarm", ("S11",)),
    Subcategory("self_harm/encouragement",
                "Urging or daring someone to hurt or kill themselves (\"kys\"), or praising self-harm.", "block",
                "self-harm", "SelfHarm", ("S11",)),
    Subcategory("violence/threat",
                "A threat or call to hurt a person or group, direct or veiled.", "block",
                "violence", "Violence", ("S1",)),
    Subcategory("violence/graphic",
                "A depiction of injury, gore or death, without a threat. Default REVIEW (age-gate or warn).",
                "review", "violence/graphic", "Violence", ("S1",)),
    Subcategory("harassment/threatening",
                "Harassment of a person that threatens them (harm, exposure, \"watch your back\").", "block",
                "harassment/threatening", "Hate (harassment), Violence", ("S1",)),
    Subcategory("hate/threatening",
                "Hate against a protected group that threatens or calls for violence against it.", "block",
                "hate/threatening", "Hate, Violence", ("S10", "S1")),
    Subcategory("sexual/minors",
                "Any sexual content that involves or refers to a minor. BLOCK by default; no policy may lower "
                "it below REVIEW.", "block", "sexual/minors", "Sexual", ("S4",),
                scored_by="minor_references", floor="review"),
)}

#: The subcategories the text models' heads score, in the order of their heads' columns.
MODELLED_SUBCATEGORIES: tuple[str, ...] = tuple(name for name, s in SUBCATEGORIES.items() if s.scored_by == "heads")


def subcategories_of(category: str) -> tuple[Subcategory, ...]:
    """The subcategories of `category`, in taxonomy order (() for one without any).

    Example::

        >>> [s.name for s in subcategories_of("violence")]
        ['violence/threat', 'violence/graphic']
    """
    return tuple(s for s in SUBCATEGORIES.values() if s.parent == category)

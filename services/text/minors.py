"""References to minors in a text: what makes sexual content `sexual/minors` (docs/taxonomy.md).

The naturalistic corpus holds no sexual content about minors and never will (the project does not write
it), so no head learns this kind. It is read instead from what the text says about someone's age:

* an age under 18 with an age word: "14 year old", "14-year-old", "15yo", "9 y/o", "14 y.o.", "fourteen
  years old";
* the age-and-sex tags of forums and chat: "13f", "(14F)", "m15", "14/f/usa", "f/14";
* an age stated of someone: "she's 14", "she is 12,", "he was 13", "im 13", "i am 15", "ur 14?", "you're
  13", "she's only 14", "my daughter is 12", "she's under 16", "not even 15"; and after an age cue: "aged
  12", "age: 14", "turned 14", "barely 13";
* a school year: "7th grade", "8th grader", "grade 8", "year 9 student", "a middle schooler", "in
  middle school", "in high school", "high schooler";
* a word that names a minor and nothing else: "underage", "preteen", "toddler", "jailbait", "loli",
  "shota" (not "kid", "child" or "minor": "2 kids, divorced", "child-free", "minors DNI" are what adult
  platforms' users write of themselves); a word preceded by a negation ("no underage", "not underage") is
  not a reference;
* Chinese: an age under 18 with 岁 or 周岁 ("14岁", "十四岁", "十四五岁", "未满18岁"), and 初中生, 小学生,
  中学生, 高中生, 未成年, 幼女, 萝莉, 女童, 男童, 幼童.

Sizes, times, ratings, ranges, prices and counts after a number are not ages ("only 5 inches", "she's
5'4", "he's 6-4", "she's 10/10", "10 years younger", "im 5 minutes away", "top 10"), and neither is an
age in a disclaimer or a condition ("DNI if you're 13-17", "if ur 16 dont interact", "no one under 16"). The text is read as sent and as the
normaliser reads it (`services.common.text_match.normalize`: look-alike letters, full-width digits and
spacing undone, so "kіd" and "１４" are found too), and each reference's span is given in the text as sent.

The share of `sexual/minors` is 1 when the text has such a reference and 0 when it has none; it counts
only where the text is sexual content (services/router/fusion.py), so "my 15 year old's first job" never
acts on its own. The span of each reference is the evidence. Plain Python.

Example::

    >>> [text[a:b] for text in ["she's only 14 and so hot"] for a, b in minor_references(text)]
    ['14']
    >>> minor_references("a 25 year old woman"), minor_references("only 5 inches, 2 kids")
    ([], [])
"""

from __future__ import annotations

import re

from services.common.text_match.normalize import NormalizedText, normalize

__all__ = ["MINOR_WORDS", "minor_references"]

#: Words that name a minor and nothing else (whole words; plurals included).
MINOR_WORDS = ("underage", "under-age", "preteen", "preteens", "pre-teen", "pre-teens", "toddler", "toddlers",
               "jailbait", "loli", "lolis", "lolicon", "shota", "shotas", "shotacon", "middle schooler",
               "middle schoolers", "grade schooler", "grade schoolers", "elementary schooler", "elementary schoolers",
               "high schooler", "high schoolers")
_ZH_WORDS = ("初中生", "小学生", "中学生", "高中生", "未成年", "幼女", "萝莉", "女童", "男童", "幼童")
_AGE = r"(?:1[0-7]|[1-9])"
_TEEN = r"(?:1[0-7])"
_WORD_AGE = r"(?:five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen)"
_ANY_AGE = rf"(?:{_AGE}|{_WORD_AGE})"
#: What makes a number after a subject or a cue a size, a time, a rating, a range, a price or a count, not an
#: age ("she's 5'4", "he's 6-4", "10/10", "13-17", "10 years younger", "5 seconds", "8 and a half inches").
_NOT_AN_AGE = (r"(?!\s*(?:\d|[.,:/x]\d|-\s*\d|%|'|\"|/|\+|(?:years?|yrs?)\s+(?!old\b|of\s+age\b)|and\s+a\s+half|"
               r"to\s+\d|or\s+(?:under|younger|below|less|older|over)|for\s+\d|(?:inch|inches|in|foot|feet|ft|cm|mm|"
               r"m|km|miles?|kg|lbs?|pounds|stone|sec|secs|seconds?|minutes?|mins?|hours?|hrs?|h|days?|weeks?|months?|"
               r"am|pm|times?|of|out|more|dollars?|bucks|k|percent|points?|pts|under|over|thick|cut|uncut|shades?|kids?|"
               r"children|girls?|boys?|guys?|people|men|women|drinks?|beers?|shots?|glasses?)\b))")
_SUBJECT = (r"(?:she's|shes|she\s+is|she\s+was|he's|hes|he\s+is|he\s+was|i'm|im|i\s+am|i\s+was|you're|youre|"
            r"you\s+are|ur|u\s+r|u\s+are|(?:my|her|his|their|our|your|the)\s+(?:step)?(?:daughter|son|sister|brother|"
            r"niece|nephew|cousin|girl|boy)\s+(?:who\s+)?(?:is|was|'s))")
#: A word before a match that makes it a disclaimer or a condition, not a statement: "DNI if you're 16",
#: "no one under 16", "if ur 14 leave", "not for anyone aged 15".
_DISCLAIMER = re.compile(r"(?:\bif|\bdni|\bunless|\bno\s+one|\bnobody|\bnot\s+for|\banyone)\b[^.!?\n]{0,12}$",
                         re.IGNORECASE)
_NEGATION = re.compile(r"(?:\bno|\bnot|\bnever|\bnon)[\s-]+$", re.IGNORECASE)
_PATTERNS = (
    # "14 year old", "14-year-old", "14 yrs old", "14 year olds", "14 years of age", "14yo", "14 y/o", "14 y.o."
    re.compile(rf"(?<![\d.,/$£€])({_ANY_AGE})(?:\s*(?:-\s*)?(?:years?|yrs?|yr)\s*(?:-\s*)?(?:olds?|of\s+age)\b|"
               rf"\s*(?:yo|y/o|y\.o\.?)(?![a-z]))", re.IGNORECASE),
    # forum tags: "13f", "(14F)", "14/f", "16f4m", "m15", "f/14" (two-digit ages only: "5m", "F1", "M3" are not tags)
    re.compile(rf"(?<![\w.'/$£€-])({_TEEN})/?[fm](?:4[fmat])?(?![\w'])|(?<![\w'/.-])[fm]/?({_TEEN})(?![\w.'/:])",
               re.IGNORECASE),
    # an age stated of someone: "she's 14", "she is 12,", "im 13", "ur 14?", "my daughter is 12", "not even 15"
    re.compile(rf"\b{_SUBJECT}\s+(?:only\s+|just\s+|barely\s+|not\s+even\s+)?({_ANY_AGE})\b{_NOT_AN_AGE}", re.IGNORECASE),
    re.compile(rf"\b{_SUBJECT}\s+under\s+(?:the\s+age\s+of\s+)?(1[0-8]|eighteen)\b", re.IGNORECASE),
    # an age cue: "aged 12", "age: 14", "turned 14", "barely 13", "not even 15"
    re.compile(rf"\b(?:aged?\s*(?::\s*)?|turned\s+|turning\s+|barely\s+|not\s+even\s+)({_ANY_AGE})\b{_NOT_AN_AGE}",
               re.IGNORECASE),
    # school years: "7th grade", "8th grader", "grade 8", "year 9 student", "in middle school", "in high school"
    re.compile(r"\b(?:[1-9]|1[0-2])(?:st|nd|rd|th)[\s-]+grader?s?\b|\bgrade\s+(?:[1-8])\b(?![.,:/]\d)(?!\s+(?:steel|"
               r"titanium|aluminium|aluminum|bolts?|paper|oil))|"
               r"\byear\s+(?:[7-9]|1[01])\s+(?:student|pupil|girl|boy)s?\b|"
               r"\bin\s+(?:middle|junior\s+high|high|elementary|primary|grade)\s+school\b|"
               r"\b(?:freshman|sophomore)\s+in\s+high\s+school\b", re.IGNORECASE),
    re.compile(r"(?:" + "|".join(sorted(map(re.escape, _ZH_WORDS), key=len, reverse=True)) +
               r"|未满\s*(?:1[0-8]|十[一二三四五六七八]?)\s*周?岁|(?<![\d.])(?:1[0-7]|[1-9])\s*周?岁"
               r"|(?<![一二三四五六七八九十百])(?:十(?:[一二三四五六七][一二三四五六七八九]?)?|[一二三四五六七八九])周?岁)"),
)
#: A text without any of these has no reference (most texts: one search instead of the patterns).
_TRIGGER = re.compile(r"[0-9０-９岁]|初中|小学|中学|高中|未成年|幼|萝莉|女童|男童|\b(?:" + _WORD_AGE[3:-1] +
                      r"|grade|grader|graders|school|schooler|schoolers|year|freshman|sophomore|underage|under-age|"
                      r"pre-?teens?|toddlers?|jailbait|loli|lolis|lolicon|shota|shotas|shotacon)\b", re.IGNORECASE)
_WORDS = re.compile(r"\b(?:" + "|".join(re.escape(word) for word in sorted(MINOR_WORDS, key=len, reverse=True)) + r")\b",
                    re.IGNORECASE)


def minor_references(text: str, normalized: NormalizedText | None = None) -> list[tuple[int, int]]:
    """Half-open spans (in `text` as sent) of the references to minors in `text`, sorted and without overlaps:
    the age itself for a written age, the words for a name (see the module docstring); empty when none.
    `normalized`: `text` as the normaliser already read it (the text models pass their analysis's), else it
    is normalised here."""
    if normalized is None or normalized.original != text:
        normalized = normalize(text)
    if not _TRIGGER.search(text) and not _TRIGGER.search(normalized.text):
        return []
    spans = set(_references(text.replace("’", "'")))
    if normalized.text != text:
        spans.update(normalized.original_span(a, b) for a, b in _references(normalized.text.replace("’", "'")))
    kept: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if kept and start < kept[-1][1]:
            kept[-1] = (kept[-1][0], max(kept[-1][1], end))
        else:
            kept.append((start, end))
    return kept


def _references(text: str) -> list[tuple[int, int]]:
    """Spans of references in `text` itself (one reading of it)."""
    spans = []
    for pattern in _PATTERNS:
        for found in pattern.finditer(text):
            if _DISCLAIMER.search(text[max(0, found.start() - 24):found.start()]):
                continue
            groups = [k for k in range(1, pattern.groups + 1) if found.group(k) is not None]
            spans.append(found.span(groups[0]) if groups else found.span())
    for found in _WORDS.finditer(text):
        if not _NEGATION.search(text[max(0, found.start() - 12):found.start()]):
            spans.append(found.span())
    return spans

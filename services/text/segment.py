"""Splitting unspaced English ("youareanidiot") into words before matching and scoring, offsets kept.

wordninja (MIT; an English Wikipedia unigram model) proposes the split. A token is split only when it
is not itself a word of that vocabulary, is at least `MIN_LENGTH` letters, every piece is a real word
(two letters or more, or "i"/"a"/"u"), and either at least one piece is a function word (a pronoun,
auxiliary, determiner or preposition) or there are at least `MIN_CONTENT_PIECES` pieces:
concatenated abuse is addressed speech ("gokillyourself") or a phrase ("sendnudesbabe"), while a
place name such as "penistone" splits into two content words only and is left alone. A run right
after an apostrophe may start with the rest of a contraction ("don't|cometothe..." -> "t come to the").

The result is a `NormalizedText` whose inserted spaces map to the position of the following letter,
so lexicon matches found in it still report spans of the original text; the lexicon's word-boundary
filter then sees the cuts, so a term straddling a cut is not matched.

Example::

    >>> segment(normalize("youareanidiot")).text
    'you are an idiot'
    >>> segment(normalize("penistone and classic")).text
    'penistone and classic'
"""

from __future__ import annotations

import re
from functools import lru_cache

from services.common.text_match.lexicon import PLURAL_SUFFIXES
from services.common.text_match.normalize import NormalizedText

__all__ = ["FUNCTION_WORDS", "MIN_CONTENT_PIECES", "MIN_LENGTH", "segment", "split_token"]

MIN_LENGTH = 6
FUNCTION_WORDS = frozenset({
    "i", "you", "u", "he", "she", "we", "they", "it", "me", "him", "her", "us", "them", "my", "your", "ur",
    "his", "our", "their", "yourself", "myself", "himself", "herself", "themselves", "are", "is", "am", "was",
    "be", "will", "go", "just", "so", "such", "a", "an", "the", "and", "to", "of", "should", "can", "do",
    "don't", "not", "no", "re", "all", "off", "up", "get", "now",
    "this", "that", "in", "on", "at", "for", "from", "with", "what", "any", "were", "has", "have",
    "had", "if", "or", "but", "by", "as", "its", "some", "who", "how", "why", "when",
})
#: pieces enough to split a token that has no function word in it
MIN_CONTENT_PIECES = 3
_SHORT_WORDS = frozenset({"i", "a", "u"})
#: what may follow an apostrophe as the first piece of a run ("i'm", "don't", "you'll")
_CONTRACTION_ENDS = frozenset({"m", "s", "t", "d", "ll", "re", "ve"})
_LETTERS = re.compile(r"[a-z]+")


@lru_cache(maxsize=1)
def _model() -> tuple[object, frozenset[str]]:
    import wordninja  # imported lazily: it reads its word list (about 70 ms) on first use

    model = wordninja.DEFAULT_LANGUAGE_MODEL
    return model, frozenset(model._wordcost)


@lru_cache(maxsize=16384)
def split_token(token: str, after_apostrophe: bool = False) -> tuple[str, ...]:
    """The pieces of one lower-case letter token, or `(token,)` when it should stay whole;
    `after_apostrophe`: the token follows an apostrophe, so its first piece may end a contraction."""
    if len(token) < MIN_LENGTH:
        return (token,)
    model, vocabulary = _model()
    if token in vocabulary:
        return (token,)
    pieces = tuple(model.split(token))  # type: ignore[attr-defined]
    head = 1 if after_apostrophe and pieces and pieces[0] in _CONTRACTION_ENDS else 0
    words = pieces[head:]
    if (len(pieces) < 2 or "".join(pieces) != token
            or any(p not in vocabulary or (len(p) < 2 and p not in _SHORT_WORDS) for p in words)
            or not (any(p in FUNCTION_WORDS for p in words) or len(words) >= MIN_CONTENT_PIECES)):
        return (token,)
    return pieces


def segment(text: NormalizedText, keep: frozenset[str] = frozenset()) -> NormalizedText:
    """`text` with unspaced runs split into words (see the module docstring); unchanged if none are.
    A token in `keep` (the blocklist's one-word terms), or its plural, is never split: wordninja would
    read "jigaboo" as "jig a boo" and the slur would match nowhere.

    Example::

        >>> segment(normalize("jigaboo")).text, segment(normalize("jigaboo"), frozenset({"jigaboo"})).text
        ('jig a boo', 'jigaboo')
    """
    pieces: list[str] = []
    offsets: list[int] = []
    position = 0
    changed = False
    for match in _LETTERS.finditer(text.text):
        after_apostrophe = match.start() > 0 and text.text[match.start() - 1] == "'"
        words = (match.group(),) if _kept(match.group(), keep) else split_token(match.group(), after_apostrophe)
        if len(words) == 1:
            continue
        changed = True
        pieces.append(text.text[position:match.start()])
        offsets.extend(text.offsets[position:match.start()])
        cursor = match.start()
        for index, word in enumerate(words):
            if index:
                pieces.append(" ")
                offsets.append(text.offsets[cursor])
            pieces.append(word)
            offsets.extend(text.offsets[cursor:cursor + len(word)])
            cursor += len(word)
        position = match.end()
    if not changed:
        return text
    pieces.append(text.text[position:])
    offsets.extend(text.offsets[position:])
    return NormalizedText("".join(pieces), tuple(offsets), text.original)


def _kept(token: str, keep: frozenset[str]) -> bool:
    """Whether `token`, or it without a plural ending (the lexicon's `PLURAL_SUFFIXES`), is in `keep`."""
    return token in keep or any(token.endswith(s) and token[:-len(s)] in keep for s in PLURAL_SUFFIXES)

"""The text the English models read: the segmented text with every emoji written out as its name.

The tokenizers of TF-IDF and MiniLM have no emoji: TF-IDF drops them and MiniLM reads each as
`[UNK]`, one vector shared by 😊, 🍕, 🔪 and 🍆. Trained on a corpus where most emoji sit in sexual
spam, the heads scored any emoji-only message ("😊", "🍕🍕") as `sexual` (0.77) and `self_harm`:
the models saw one unknown token, not a smile. Here each emoji becomes its Unicode character name in
lower case between spaces ("😊" -> " smiling face with smiling eyes "), so "🔪" reads as a knife and
a smile as a smile, in training and serving alike (the build reads the same view).

A run of one emoji repeated ("😂😂😂") is written once, and at most `MAX_NAMED` emoji are written per
text (later ones are dropped, as the tokenizers dropped every emoji before): a text padded with emoji
cannot push its words out of MiniLM's 128-token window faster than a text padded with words.

Only the models' view changes: the lexicon, the context rules and the structured features still read
the segmented text (emoji terms such as the Chinese emoji variants match there). The view is a
`NormalizedText` whose offsets point at the original text (every character of a name maps to its
emoji), so token evidence found in it is reported on the text as sent.

Example::

    >>> describe_emoji(normalize("gm 😊")).text
    'gm smiling face with smiling eyes'
    >>> describe_emoji(normalize("no emoji")).text
    'no emoji'
    >>> describe_emoji(normalize("lol 😂 😂😂")).text
    'lol face with tears of joy'
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from services.common.text_match.normalize import NormalizedText, normalize

__all__ = ["MAX_NAMED", "describe_emoji", "emoji_name", "normalize"]

MAX_NAMED = 16

#: pictographic code points: Miscellaneous Symbols and Dingbats, arrows and technical symbols used as
#: emoji, and the supplementary emoji blocks (Mahjong tiles through Symbols and Pictographs Extended-A)
_EMOJI_RANGES = ((0x2190, 0x21FF), (0x2300, 0x23FF), (0x2460, 0x24FF), (0x25A0, 0x27BF), (0x2900, 0x297F),
                 (0x2B00, 0x2BFF), (0x1F000, 0x1FAFF))
_SKIN_TONES = range(0x1F3FB, 0x1F400)
_REGIONAL_INDICATORS = range(0x1F1E6, 0x1F200)


@lru_cache(maxsize=4096)
def emoji_name(char: str) -> str | None:
    """The words `char` is written as in the models' view, `""` to drop it (skin tones), or None
    when it is not an emoji (left as it is).

    Example::

        >>> emoji_name("🔪"), emoji_name("a"), emoji_name("🏽"), emoji_name("🇫")
        ('hocho', None, '', 'flag')
    """
    code = ord(char)
    if code in _SKIN_TONES:
        return ""
    if code in _REGIONAL_INDICATORS:
        return "flag"
    if not any(low <= code <= high for low, high in _EMOJI_RANGES):
        return None
    if unicodedata.category(char) not in ("So", "Sm"):
        return None
    return unicodedata.name(char, "emoji").lower().replace("-", " ")


def describe_emoji(text: NormalizedText) -> NormalizedText:
    """`text` with each emoji replaced by its name between spaces (see the module docstring);
    `text` itself when it has none. Spaces are collapsed and the ends trimmed."""
    if text.text.isascii():  # fast path: almost every English text
        return text
    names = [emoji_name(c) if not c.isascii() else None for c in text.text]
    if all(name is None for name in names):
        return text
    chars: list[str] = []
    offsets: list[int] = []
    ends: list[int] = []

    def put(char: str, index: int) -> None:
        if char == " " and (not chars or chars[-1] == " "):
            return
        chars.append(char)
        offsets.append(text.offsets[index])
        ends.append(text.ends[index] if text.ends is not None else text.offsets[index] + 1)

    named = 0
    previous: str | None = None  # the last emoji written, while only spaces follow it
    for index, (char, name) in enumerate(zip(text.text, names)):
        if name is None:
            put(char, index)
            if char != " ":
                previous = None
        elif name and char != previous and named < MAX_NAMED:
            for piece in f" {name} ":
                put(piece, index)
            named += 1
            previous = char
    while chars and chars[-1] == " ":
        chars.pop(), offsets.pop(), ends.pop()
    return NormalizedText("".join(chars), tuple(offsets), text.original, tuple(ends))

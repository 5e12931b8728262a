"""The hashes known-content matching compares (issue 42). Pure: bytes and text in, hashes out.

Images: PDQ (Meta's perceptual hash, 256 bits, with a quality 0..100; `pdqhash`, bindings MIT over Meta's
BSD-licensed PDQ) of the decoded pixels, and MD5 and SHA-256 of the bytes as sent. With `dihedral`, the
PDQ hashes of the 8 rotations and flips of the image too (a query that also finds a mirrored re-post).

Texts: a 256-bit SimHash of the text's canonical form, and the SHA-256 of that form. The canonical form is
the mesh's normalised text (services/common/text_match/normalize.py: width, case, look-alikes, leet,
separators, repeats) with URLs replaced by one placeholder and every character that is not a letter,
a digit or a space dropped (emoji, punctuation), so a spam message re-sent with another link, other
emoji or other punctuation has the same canonical form. The SimHash is over its character 3-grams (words
or CJK alike), each weighted once. 256 bits, not 64: on short texts a 64-bit SimHash is too noisy (light
edits of a spam message moved it by up to 16 bits while unrelated messages came within 22). At 256 bits,
measured on six spam messages and 20 light edits of each (tests/unit/match/test_signals.py): edits moved
it by at most 55 bits (a short Chinese message whose words were swapped), while the 9,772 benign messages
of the naturalistic corpus's training split all stayed 85 or more bits from every one of the six, and of
1.1 million pairs of those benign messages one came within 56. So a bank's default `text_distance` is 56.
SimHash rather than MinHash + LSH: one value per text, stored and searched as a binary vector by the
same Hamming-distance index as PDQ (services/match/index.py), with a per-bank distance threshold.

Example::

    >>> a = text_signals("FREE crypto airdrop!!! claim now 👉 https://x.co/abc")
    >>> b = text_signals("free crypto airdrop, claim now 🔥 https://y.io/zzz")
    >>> a.canonical
    'free crypto airdrop claim now url'
    >>> a.sha256 == b.sha256, hamming(a.simhash, b.simhash)
    (True, 0)
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass

import numpy as np

from services.common.text_match.normalize import normalize

__all__ = ["ImageSignals", "MAX_TEXT_CHARS", "MIN_MATCH_CHARS", "PDQ_BITS", "PDQ_SIDE", "SIMHASH_BITS", "TextSignals", "canonical_text",
           "hamming", "image_signals", "matchable", "pdq_hex", "simhash", "text_signals"]

SIMHASH_BITS = 256
PDQ_BITS = 256
#: Images are hashed at most this many pixels a side (the same for banked and queried images).
PDQ_SIDE = 512
#: A canonical text (placeholders aside) shorter than this is too generic to match: "url", "dm me".
MIN_MATCH_CHARS = 10
#: Characters of a text that are hashed at most (a longer text is hashed on its first part, queried and
#: banked alike).
MAX_TEXT_CHARS = 20_000
#: Character n-gram length of the SimHash's features.
GRAM = 3
_URL = re.compile(r"(?:https?://|www\.)\S+|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|net|org|io|co|me|ly|gg|xyz|top|cn|ru|info|biz|app|link|site|shop|vip|cc)(?:/\S*)?")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class TextSignals:
    canonical: str
    sha256: str
    #: The 256-bit SimHash, 32 bytes (its hex is a bank entry's `text_simhash` value).
    simhash: bytes


@dataclass(frozen=True)
class ImageSignals:
    md5: str
    sha256: str
    #: PDQ hash (32 bytes) of the image as sent, then (with `dihedral`) of its 7 other rotations and flips.
    pdq: tuple[bytes, ...]
    #: PDQ quality 0..100 (below 50: too flat to match perceptually; HMA discards those hashes).
    quality: int


def canonical_text(text: str) -> str:
    """What a text's hashes are computed over (see the module docstring)."""
    folded = _URL.sub(" url ", normalize(text).text)
    kept = "".join(c if c.isspace() or unicodedata.category(c)[0] in "LN" else " " for c in folded)
    return _SPACES.sub(" ", kept).strip()


def simhash(text: str, gram: int = GRAM) -> bytes:
    """The 256-bit SimHash (32 bytes) of `text`'s character `gram`-grams, each distinct gram counted once.

    Example::

        >>> simhash("") == bytes(32), simhash("abcd") == simhash("abcd"), len(simhash("abcd"))
        (True, True, 32)
    """
    grams = sorted({text[i:i + gram] for i in range(max(1, len(text) - gram + 1))}) if text else []
    if not grams:
        return bytes(SIMHASH_BITS // 8)
    digests = np.frombuffer(b"".join(hashlib.blake2b(g.encode("utf-8"), digest_size=SIMHASH_BITS // 8).digest()
                                     for g in grams), dtype=np.uint8).reshape(len(grams), SIMHASH_BITS // 8)
    votes = np.unpackbits(digests, axis=1).sum(axis=0, dtype=np.int64) * 2 - len(grams)
    return np.packbits(votes > 0).tobytes()


def hamming(a: bytes, b: bytes) -> int:
    """Bits that differ between two hashes of the same length."""
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).bit_count()


def matchable(canonical: str) -> bool:
    """Whether a canonical text says enough to be matched at all: at least MIN_MATCH_CHARS letters or
    digits once the URL placeholders are left out (every link-only message canonicalises to "url").

    Example::

        >>> matchable("url"), matchable("dm me url"), matchable("free airdrop claim now url")
        (False, False, True)
    """
    return len("".join(word for word in canonical.split() if word != "url")) >= MIN_MATCH_CHARS


def text_signals(text: str) -> TextSignals:
    """A text's canonical form, its SHA-256 and its SimHash."""
    canonical = canonical_text(text)
    return TextSignals(canonical, hashlib.sha256(canonical.encode("utf-8")).hexdigest(), simhash(canonical))


def image_signals(data: bytes, rgb: np.ndarray, *, dihedral: bool = False) -> ImageSignals:
    """The hashes of an image: `data` as sent (MD5, SHA-256), `rgb` its decoded pixels (H x W x 3, uint8)."""
    import pdqhash

    pixels = np.ascontiguousarray(_for_pdq(rgb), dtype=np.uint8)
    if dihedral:
        hashes, quality = pdqhash.compute_dihedral(pixels)
        pdq = tuple(_pack(h) for h in hashes)
    else:
        bits, quality = pdqhash.compute(pixels)
        pdq = (_pack(bits),)
    return ImageSignals(hashlib.md5(data).hexdigest(), hashlib.sha256(data).hexdigest(), pdq, int(quality))


def _for_pdq(rgb: np.ndarray) -> np.ndarray:
    """`rgb` at most PDQ_SIDE pixels a side (PDQ reduces every image to 64x64 anyway): hashing a 40-megapixel
    image at full size holds the GIL for seconds and needs about 1 GB of temporaries."""
    height, width = rgb.shape[:2]
    if max(height, width) <= PDQ_SIDE:
        return rgb
    from PIL import Image

    image = Image.fromarray(np.ascontiguousarray(rgb, dtype=np.uint8))
    image.thumbnail((PDQ_SIDE, PDQ_SIDE), Image.Resampling.BILINEAR)
    return np.asarray(image)


def pdq_hex(value: bytes) -> str:
    """A PDQ hash as the 64 hex digits ThreatExchange and HMA exchange."""
    return value.hex()


def _pack(bits: np.ndarray) -> bytes:
    """pdqhash's 256 0/1 values (most significant bit first: its bindings reverse PDQ's bit order) as 32
    bytes whose hex is PDQ's reference hex form (`Hash256::format`, word 15 first)."""
    return np.packbits(np.asarray(bits, dtype=np.uint8)).tobytes()

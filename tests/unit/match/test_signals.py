"""services/match/signals.py: canonical text, SimHash under light edits and between unrelated texts, PDQ of
real photos and their re-posts."""

from __future__ import annotations

import random

import pdqhash
import pytest

from services.match.signals import canonical_text, hamming, image_signals, text_signals
from tests.unit.match.conftest import rgb, variants

SPAM = [
    "🔥 FREE crypto airdrop! Connect your wallet at https://claim-airdrop.xyz/r/8831 before midnight, only 500 spots left",
    "Earn $500 a day from home, no experience needed. DM me on telegram @richfast99 and I will show you how",
    "Congratulations! You have been selected for a $1000 Walmart gift card. Click bit.ly/3xYz9 to claim now",
    "加微信 vx8866123 领取免费会员，每天签到送现金红包，名额有限先到先得",
    "Hot singles in your area want to meet tonight 💋 see their photos at dating-hot.top/join",
    "Buy 10k real instagram followers for only $9.99, instant delivery, visit followerz.shop today",
]


def light_edits(text: str, count: int = 20, seed: int = 0) -> list[str]:
    """`count` light edits of a spam message, as a campaign varies it: words swapped, dropped or added,
    punctuation and emoji changed, the link changed, case changed."""
    rng = random.Random(seed)
    edits = []
    for _ in range(count):
        words = text.split()
        for _ in range(rng.randint(1, 2)):
            kind = rng.choice(["swap", "drop", "add", "punct", "emoji", "url", "case"])
            i = rng.randrange(len(words))
            j = min(i + 1, len(words) - 1)
            if kind == "swap" and len(words) > 2 and len(words[i]) <= 10 and len(words[j]) <= 10:  # words, not clauses
                words[i], words[j] = words[j], words[i]
            elif kind == "drop" and len(words) > 6 and len(words[i]) <= 10:  # a word, not a third of a Chinese message
                del words[i]
            elif kind == "add":
                words.insert(i, rng.choice(["now", "pls", "!!", "today", "guys", "100%"]))
            elif kind == "punct":
                words[i] = words[i] + rng.choice(["!", "...", ",", "?"])
            elif kind == "emoji":
                words.insert(i, rng.choice(["🚀", "💰", "👉", "✅"]))
            elif kind == "url":
                words.append(f"https://promo{rng.randint(10, 99)}.io/{rng.randint(1000, 9999)}")
            else:
                words[i] = words[i].upper()
        edits.append(" ".join(words))
    return edits


def test_the_canonical_form_drops_what_campaigns_vary() -> None:
    assert canonical_text("FREE airdrop!!! 🚀 https://a.io/x") == canonical_text("free airdrop 💰 www.b.com/y") == "free airdrop url"
    assert canonical_text("ｆｒｅｅ  a.i.r.d.r.o.p") == "free airdrop"
    assert canonical_text("加微信，领红包！") == "加微信领红包"


@pytest.mark.parametrize("spam", SPAM)
def test_light_edits_stay_within_the_default_text_distance(spam: str) -> None:
    base = text_signals(spam).simhash
    distances = [hamming(base, text_signals(edit).simhash) for edit in light_edits(spam)]
    assert max(distances) <= 56, distances  # BankSpec.text_distance's default


def test_unrelated_spam_messages_are_far_apart() -> None:
    hashes = [text_signals(s).simhash for s in SPAM]
    distances = [hamming(a, b) for i, a in enumerate(hashes) for b in hashes[i + 1:]]
    assert min(distances) >= 80, distances


def test_pdq_of_a_photo_is_its_identity_variant_and_reposts_stay_close(photos: dict[str, bytes]) -> None:
    data = photos["chelsea.png"]
    plain = image_signals(data, rgb(data))
    turned = image_signals(data, rgb(data), dihedral=True)
    assert len(plain.pdq) == 1 and len(turned.pdq) == 8 and turned.pdq[0] == plain.pdq[0]
    assert plain.quality >= 50 and len(plain.md5) == 32 and len(plain.sha256) == 64
    bits, _ = pdqhash.compute(rgb(data))
    assert plain.pdq[0] == bytes(int("".join(str(int(b)) for b in bits[i:i + 8]), 2) for i in range(0, 256, 8))
    for name, repost in variants(data).items():
        distance = int.from_bytes(plain.pdq[0], "big") ^ int.from_bytes(image_signals(repost, rgb(repost)).pdq[0], "big")
        assert distance.bit_count() <= 31, name

"""Labelled examples for the trainer's unit tests: a seeded mix of scam-like and everyday sentences."""

from __future__ import annotations

import numpy as np
import pytest

from services.trainer.examples import Example

SCAM = ["free", "airdrop", "wallet", "crypto", "claim", "token", "100x", "giveaway", "connect", "dm"]
EVERYDAY = ["lunch", "meeting", "tomorrow", "weather", "train", "coffee", "garden", "movie", "dinner", "school",
            "the", "we", "at", "see", "you"]


def labelled(count: int, seed: int = 0) -> list[Example]:
    """`count` examples; a third are scams (custom.crypto_scam 1, spam 1), the rest everyday (both 0);
    every example has a distinct number in it, so no two texts are equal."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        scam = i % 3 == 0
        words = list(rng.choice(SCAM if scam else EVERYDAY, size=5)) + list(rng.choice(EVERYDAY, size=3))
        rng.shuffle(words)
        out.append(Example(" ".join(words) + f" {i}", {"custom.crypto_scam": int(scam), "spam": int(scam)}))
    return out


@pytest.fixture(scope="module")
def examples() -> list[Example]:
    return labelled(300)

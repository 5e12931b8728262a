"""services/vision/build/benign_corpus.py: the offline calibration corpus."""

from __future__ import annotations

import pytest

from services.common.image_decode import decode_rgb
from services.vision.build.benign_corpus import KINDS, CorpusImage, benign_corpus, photo_like


def test_corpus_has_every_kind_and_decodes() -> None:
    corpus = benign_corpus(synthetic_count=2)
    assert {item.kind for item in corpus} == set(KINDS)  # sklearn's photos are always there
    for item in corpus:
        assert decode_rgb(item.data).ndim == 3, item.name


def test_synthetic_images_are_deterministic() -> None:
    assert photo_like((64, 48), seed=3) == photo_like((64, 48), seed=3) != photo_like((64, 48), seed=4)


def test_corpus_image_validation() -> None:
    with pytest.raises(ValueError, match="kind"):
        CorpusImage("gore", "x", b"x")
    with pytest.raises(ValueError, match="empty"):
        CorpusImage("photo", "x", b"")
    with pytest.raises(ValueError, match="synthetic_count"):
        benign_corpus(synthetic_count=-1)

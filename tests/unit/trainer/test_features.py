"""Tests for services/trainer/features.py: n-gram TF-IDF and the encoder's windows averaged per text."""

from __future__ import annotations

import numpy as np

from services.text.multilingual import DIMENSION
from services.trainer.features import CharNgrams, Featurizer, ngrams, prepared
from tests.stubs import WordHashEncoder


def test_ngrams_keep_the_most_frequent_terms_and_rows_are_unit_length() -> None:
    grams = CharNgrams.fit(["abc", "abd", "xyz"], max_terms=3, min_df=2)
    assert grams.terms == ("a", "ab", "b")  # df 2 each, ties by term; c, d, x.. appear once
    rows = grams.transform(["ab", "zzz"]).toarray()
    assert np.allclose(np.linalg.norm(rows[0]), 1.0) and not rows[1].any()
    assert ngrams("aa", (1,)) == {"a": 2}


def test_the_classifier_reads_the_normalised_text() -> None:
    assert prepared("F.R.E.E  CRYPTO") == prepared("free crypto")


def test_a_long_text_is_encoded_in_windows_and_averaged() -> None:
    encoder = WordHashEncoder()
    featurizer = Featurizer(encoder, CharNgrams.fit(["hello there"], min_df=1))
    long_text = "第一句话。" * 40  # 200 characters: several 96-character windows
    rows = featurizer.rows(["hello there", long_text])
    assert rows.shape == (2, featurizer.width) and featurizer.width == DIMENSION + len(featurizer.grams.terms)
    assert encoder.calls == [1 + 3]  # one call for all windows of the batch
    assert np.allclose(rows.toarray()[0, :DIMENSION], encoder.embed(["hello there"])[0], atol=1e-6)

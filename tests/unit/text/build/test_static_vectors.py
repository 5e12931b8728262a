"""Tests for services/text/build/static_vectors.py and services/text/static_embedding.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from services.common.serving.model_repository import find_model
from services.common.serving.onnx_session import SessionOptions
from services.text.build.static_vectors import static_graph
from services.text.embedding import DIMENSION
from services.text.static_embedding import EMBEDDING_OUTPUT, INPUT_IDS, MASK, STATIC_MODEL, StaticEmbedder


def run_graph(table: np.ndarray, ids: list[list[int]], mask: list[list[int]]) -> np.ndarray:
    session = ort.InferenceSession(static_graph(table).SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(session.run([EMBEDDING_OUTPUT], {INPUT_IDS: np.array(ids, np.int64),
                                                       MASK: np.array(mask, np.int64)})[0])


def test_graph_is_the_normalised_sum_of_the_unmasked_tokens() -> None:
    rng = np.random.default_rng(0)
    table = rng.normal(size=(10, DIMENSION)).astype(np.float32)
    out = run_graph(table, [[1, 2, 3], [4, 5, 0]], [[1, 1, 1], [1, 1, 0]])
    for row, tokens in enumerate(([1, 2, 3], [4, 5])):
        expected = table[tokens].sum(0)
        np.testing.assert_allclose(out[row], expected / np.linalg.norm(expected), rtol=1e-5, atol=1e-6)


def test_padding_tokens_do_not_count_and_an_empty_row_is_zero() -> None:
    table = np.eye(12, DIMENSION, dtype=np.float32)
    out = run_graph(table, [[3, 7, 7], [7, 7, 7]], [[1, 0, 0], [0, 0, 0]])
    np.testing.assert_allclose(out[0, :12], np.eye(12, dtype=np.float32)[3], atol=1e-6)
    assert not out[1].any()


@pytest.fixture(scope="module")
def embedder(repository_root: Path) -> StaticEmbedder:
    return StaticEmbedder(find_model(STATIC_MODEL, root=repository_root), SessionOptions(intra_op_threads=1))


def test_built_vectors_are_unit_length_and_empty_text_is_zero(embedder: StaticEmbedder) -> None:
    vectors = embedder.embed(["you are an idiot", "", "see you tomorrow at the station"])
    assert vectors.shape == (3, DIMENSION)
    np.testing.assert_allclose(np.linalg.norm(vectors[[0, 2]], axis=1), 1.0, rtol=1e-5)
    assert not vectors[1].any()
    assert embedder.embed([]).shape == (0, DIMENSION)


def test_built_vectors_put_insults_nearer_each_other_than_everyday_words(embedder: StaticEmbedder) -> None:
    idiot, moron, tuesday = embedder.embed(["you idiot", "you moron", "on tuesday"])
    assert float(idiot @ moron) > float(idiot @ tuesday)


def test_chinese_characters_are_not_read(embedder: StaticEmbedder) -> None:
    mixed, latin, han = embedder.embed(["jb 你这个人", "jb", "你这个人"])
    np.testing.assert_allclose(mixed, latin, atol=1e-6)
    assert not han.any()

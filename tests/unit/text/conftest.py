"""Fixtures for the text tests. The model tests need the built model repository: they FAIL (never
skip) with the command to run when it is missing, so a forgotten `make models` cannot pass silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.serving.model_repository import DEFAULT_ROOT, ModelNotFoundError, find_model
from services.common.serving.onnx_session import SessionOptions
from services.text.model import FAST_HEADS, SPAM_MODEL, STATIC_MODEL, TFIDF_MODEL, TOXICITY_MODEL, TextModerationModel
from services.text.semantic import EMBEDDING_MODEL, LEXICAL_HEADS, SEMANTIC_HEADS, TextSemanticModel
from services.text.zh_ngram import ZH_HEADS, ZH_TFIDF_MODEL


@pytest.fixture(scope="session")
def repository_root() -> Path:
    for name in (TOXICITY_MODEL, SPAM_MODEL, TFIDF_MODEL, STATIC_MODEL, FAST_HEADS, LEXICAL_HEADS, EMBEDDING_MODEL,
                 SEMANTIC_HEADS, ZH_TFIDF_MODEL, ZH_HEADS):
        try:
            find_model(name, root=DEFAULT_ROOT)
        except ModelNotFoundError as error:
            pytest.fail(f"{error}\nBuild it first: `make models` or "
                        f"`python -m services.text.build.build_models --repository {DEFAULT_ROOT}`", pytrace=False)
    return DEFAULT_ROOT


@pytest.fixture(scope="session")
def text_model(repository_root: Path) -> TextModerationModel:
    model = TextModerationModel(repository_root, SessionOptions(intra_op_threads=1))
    model.warmup()
    return model


@pytest.fixture(scope="session")
def semantic_model(repository_root: Path, text_model: TextModerationModel) -> TextSemanticModel:
    model = TextSemanticModel(repository_root, SessionOptions(intra_op_threads=1), fast=text_model)
    model.warmup()
    return model

"""Exporting a scikit-learn text pipeline (TF-IDF + linear classifier) to ONNX with skl2onnx.

The exported graph is `text[N] string -> label[N] int64, probabilities[N, 2] float32` (no ZipMap).
Two details make the file load and agree with scikit-learn here:

* skl2onnx's TfIdfVectorizer tokenises with `tokenexp`; scikit-learn's default token pattern is
  `(?u)\\b\\w\\w+\\b`, which RE2 writes as `\\b\\w\\w+\\b`.
* Its StringNormalizer (lower-casing, stop words) asks for locale `en_US.UTF-8` unless told otherwise;
  that locale is not installed in our images, so the session would fail to load. We set `C.UTF-8`.

Example::

    model = export_text_pipeline(Pipeline([("tfidf", vectorizer), ("clf", classifier)]), "spam_en")
    onnx.save(model, "model.onnx")
"""

from __future__ import annotations

from typing import Any

import onnx
from onnx import helper

__all__ = ["INPUT_NAME", "LOCALE", "OUTPUT_NAME", "TOKEN_PATTERN", "export_text_pipeline", "set_string_normalizer_locale"]

INPUT_NAME = "text"
OUTPUT_NAME = "probabilities"
TOKEN_PATTERN = r"\b\w\w+\b"
LOCALE = "C.UTF-8"
TARGET_OPSET = {"": 17, "ai.onnx.ml": 3}


def export_text_pipeline(pipeline: Any, name: str) -> onnx.ModelProto:
    """Convert a fitted `Pipeline([("tfidf", TfidfVectorizer), ("clf", classifier)])` to ONNX.

    `name` becomes the graph name (skl2onnx would pick a random one) and the opset list is sorted, so
    the same pipeline always gives a byte-identical file.
    """
    from skl2onnx import convert_sklearn  # build-time dependency only
    from skl2onnx.common.data_types import StringTensorType

    vectorizer, classifier = pipeline.steps[0][1], pipeline.steps[-1][1]
    model: onnx.ModelProto = convert_sklearn(
        pipeline,
        initial_types=[(INPUT_NAME, StringTensorType([None]))],
        options={id(vectorizer): {"tokenexp": TOKEN_PATTERN}, id(classifier): {"zipmap": False}},
        target_opset=TARGET_OPSET,
        name=name,
    )
    model.graph.name = name
    # skl2onnx collects opsets in a set: its order follows string hashing, which changes per process.
    opsets = sorted(((o.domain, o.version) for o in model.opset_import))
    del model.opset_import[:]
    model.opset_import.extend(helper.make_opsetid(domain, version) for domain, version in opsets)
    set_string_normalizer_locale(model, LOCALE)
    return model


def set_string_normalizer_locale(model: onnx.ModelProto, locale: str) -> int:
    """Set `locale` on every StringNormalizer node; returns how many nodes were changed."""
    changed = 0
    for node in model.graph.node:
        if node.op_type != "StringNormalizer":
            continue
        kept = [a for a in node.attribute if a.name != "locale"]
        del node.attribute[:]
        node.attribute.extend(kept + [helper.make_attribute("locale", locale)])
        changed += 1
    return changed

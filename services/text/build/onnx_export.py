"""Exporting a scikit-learn text pipeline (TF-IDF + linear classifier) to ONNX with skl2onnx.

The exported graph is `text[N] string -> label[N] int64, probabilities[N, 2] float32` (no ZipMap).
Two details make the file load and agree with scikit-learn here:

* skl2onnx's TfIdfVectorizer tokenises with `tokenexp`; scikit-learn's default token pattern is
  `(?u)\\b\\w\\w+\\b`, which RE2 writes as `\\b\\w\\w+\\b`.
* Its StringNormalizer (lower-casing, stop words) asks for locale `en_US.UTF-8` unless told otherwise;
  that locale is not installed in our images, so the session would fail to load. We set `C.UTF-8`.

Known limit: with `ngram_range` above 1 *and* `stop_words`, scikit-learn forms bigrams across a
removed stop word and the ONNX graph does not; the toxicity model is unigram with stop words, the spam
model uses bigrams without stop words, so both agree.

One rewrite makes it faster: the TF-IDF rows are dense [N, vocabulary], and ONNX Runtime's
`ai.onnx.ml.Normalizer` (L2) was the slowest node (about 50 us per row at 15k columns); it is replaced
by the equivalent `ReduceL2 -> Max(eps) -> Div`, several times faster.

Example::

    model = export_text_pipeline(Pipeline([("tfidf", vectorizer), ("clf", classifier)]), "spam_en")
    onnx.save(model, "model.onnx")
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = ["INPUT_NAME", "LOCALE", "OUTPUT_NAME", "TOKEN_PATTERN", "export_text_pipeline", "replace_l2_normalizer",
           "set_string_normalizer_locale"]

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
    replace_l2_normalizer(model)
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


def replace_l2_normalizer(model: onnx.ModelProto) -> int:
    """Replace every `Normalizer(norm="L2")` by `X / max(ReduceL2(X, axis 1), eps)`; returns the count.

    Same result as scikit-learn's `normalize` (an all-zero row stays zero).
    """
    nodes = list(model.graph.node)
    replaced = 0
    del model.graph.node[:]
    for node in nodes:
        norm = next((a.s for a in node.attribute if a.name == "norm"), b"")
        if node.op_type != "Normalizer" or norm != b"L2":
            model.graph.node.append(node)
            continue
        prefix = f"{node.name or 'normalizer'}_l2_{replaced}"
        source, target = node.input[0], node.output[0]
        model.graph.initializer.append(numpy_helper.from_array(np.array(1e-30, dtype=np.float32), f"{prefix}_eps"))
        model.graph.node.extend([
            helper.make_node("ReduceL2", [source], [f"{prefix}_norm"], name=f"{prefix}_reduce", axes=[1], keepdims=1),
            helper.make_node("Max", [f"{prefix}_norm", f"{prefix}_eps"], [f"{prefix}_safe"], name=f"{prefix}_max"),
            helper.make_node("Div", [source, f"{prefix}_safe"], [target], name=f"{prefix}_div"),
        ])
        replaced += 1
    return replaced

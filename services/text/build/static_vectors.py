"""Distil the tuned MiniLM into static token vectors (`static_en`) for the fast heads, and install them.

The fast profile cannot afford a transformer pass (~4-8 ms per text), and TF-IDF only knows the
words of the training rows. A static embedding sits between the two: every WordPiece of the MiniLM
vocabulary gets one 384-d vector, the state the tuned encoder (`minilm_l6_moderation`) gives that
token alone in `[CLS] token [SEP]`; a text's vector is the L2-normalised sum of its tokens' vectors.
Words the corpus never showed still land near the words they mean, for ~40 µs per text. The table is
rounded to int8 per row (`compact.quantize_rows`, the form committed under `models/`) before the fast
heads are trained on it.

The installed model is a small ONNX graph over the table (Gather, masked sum, L2 normalise), so it is
served and versioned like every other entry and a Triton server can run it::

    input_ids [N, S] INT64, attention_mask [N, S] INT64 -> embedding [N, 384] FP32

Texts are tokenized with the MiniLM tokenizer (copied beside the graph) without special tokens; a text
with no token gets the zero vector. `services.text.static_embedding.StaticEmbedder` serves it.

Example::

    entry = build_static_vectors(Path("model_repository"), find_model("minilm_l6_moderation", root=...))
    entry.name   # "static_en"
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from services.common.serving.model_repository import RepositoryEntry, install_model, sha256_of
from services.text.build.compact import dequantize_rows, quantize_rows
from services.common.serving.onnx_session import SessionOptions, create_session
from services.text.embedding import DIMENSION
from services.text.static_embedding import EMBEDDING_OUTPUT, INPUT_IDS, MASK, STATIC_MODEL

__all__ = ["build_static_vectors", "static_graph", "token_table"]

#: The committed form of the table: int8 codes [V, 384] and a float32 scale per row (`compact.py`).
TABLE_FILE = "table.npz"
CLS_ID = 101  # [CLS] in the MiniLM (BERT uncased) vocabulary
SEP_ID = 102  # [SEP]
TABLE_BATCH = 1024
_EPS = 1e-12


def token_table(encoder: RepositoryEntry, vocabulary_size: int, options: SessionOptions) -> np.ndarray:
    """[V, 384]: for each token id, the encoder's state of that token in `[CLS] token [SEP]`."""
    session = create_session(str(encoder.path), options)
    output = session.get_outputs()[0].name
    table = np.zeros((vocabulary_size, DIMENSION), np.float32)
    for start in range(0, vocabulary_size, TABLE_BATCH):
        ids = np.arange(start, min(vocabulary_size, start + TABLE_BATCH), dtype=np.int64)
        batch = np.stack([np.full_like(ids, CLS_ID), ids, np.full_like(ids, SEP_ID)], axis=1)
        states = session.run([output], {"input_ids": batch, "attention_mask": np.ones_like(batch),
                                        "token_type_ids": np.zeros_like(batch)})[0]
        table[ids] = np.asarray(states, dtype=np.float32)[:, 1, :]
    return table


def static_graph(table: np.ndarray) -> Any:
    """The serving graph over `table` (see the module docstring), deterministic for a given table."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Gather", ["table", INPUT_IDS], ["tokens"], name="gather"),
        helper.make_node("Cast", [MASK], ["mask_f"], to=TensorProto.FLOAT, name="cast"),
        helper.make_node("Unsqueeze", ["mask_f", "axis_2"], ["mask_3d"], name="unsqueeze"),
        helper.make_node("Mul", ["tokens", "mask_3d"], ["masked"], name="mask"),
        helper.make_node("ReduceSum", ["masked", "axis_1"], ["summed"], keepdims=0, name="sum"),
        helper.make_node("ReduceL2", ["summed"], ["norm"], axes=[1], keepdims=1, name="norm"),
        helper.make_node("Max", ["norm", "eps"], ["safe_norm"], name="floor"),
        helper.make_node("Div", ["summed", "safe_norm"], [EMBEDDING_OUTPUT], name="normalise"),
    ]
    graph = helper.make_graph(
        nodes, STATIC_MODEL,
        [helper.make_tensor_value_info(INPUT_IDS, TensorProto.INT64, [None, None]),
         helper.make_tensor_value_info(MASK, TensorProto.INT64, [None, None])],
        [helper.make_tensor_value_info(EMBEDDING_OUTPUT, TensorProto.FLOAT, [None, DIMENSION])],
        [numpy_helper.from_array(table.astype(np.float32), "table"),
         numpy_helper.from_array(np.array([2], dtype=np.int64), "axis_2"),
         numpy_helper.from_array(np.array([1], dtype=np.int64), "axis_1"),
         numpy_helper.from_array(np.array(_EPS, dtype=np.float32), "eps")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="auditmesh")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def build_static_vectors(repository: Path, encoder: RepositoryEntry) -> RepositoryEntry:
    """Compute the token table from `encoder` (the tuned MiniLM) and install `static_en` version 1."""
    import onnx
    from tokenizers import Tokenizer

    tokenizer_file = Path(encoder.path).parent / str(encoder.extra.get("tokenizer", "tokenizer.json"))
    vocabulary_size = Tokenizer.from_file(str(tokenizer_file)).get_vocab_size()
    started = time.perf_counter()
    # int8 per row (`compact.quantize_rows`, `table.npz`): the committed form; the fast heads train on exactly this.
    codes, scale = quantize_rows(token_table(encoder, vocabulary_size, SessionOptions(intra_op_threads=2)))
    table = dequantize_rows(codes, scale)
    print(f"{STATIC_MODEL}: {vocabulary_size} token vectors from {encoder.name} in "
          f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        onnx.save(static_graph(table), str(path))
        target = repository / STATIC_MODEL / "1"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tokenizer_file, target / "tokenizer.json")
        np.savez_compressed(target / TABLE_FILE, codes=codes, scale=scale)
        return install_model(
            repository, STATIC_MODEL, "1", path,
            source=f"distilled by auditmesh from {encoder.name}/{encoder.version} "
                   f"(services/text/build/static_vectors.py)", license="Apache-2.0 (derived from all-MiniLM-L6-v2)",
            extra={"task": "static token vectors: L2-normalised sum over the text's WordPieces",
                   "tokenizer": "tokenizer.json", "special_tokens": False, "dimension": DIMENSION,
                   "vocabulary_size": vocabulary_size, "table_file": TABLE_FILE, "derived_from": f"{encoder.name}/{encoder.version}",
                   "derived_from_files": dict(encoder.extra.get("file_sha256", {})),
                   "file_sha256": {"tokenizer.json": sha256_of(target / "tokenizer.json")},
                   "inputs": [INPUT_IDS, MASK], "output": EMBEDDING_OUTPUT})

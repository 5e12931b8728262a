"""The text moderation served model: normalisation, blocklist matching and two ONNX classifiers.

KServe v2 tensors: declared once in `services.common.contracts.text` (the router reads the same module).

Each text is normalised once; the lexicon and both classifiers see the normalised text (each model's
config records `preprocessing`, see build_models.py for the measurement behind it). One
`session.run` per classifier per batch.

Example::

    model = TextModerationModel(Path("model_repository"), SessionOptions(intra_op_threads=1))
    out = model.infer({"TEXT": np.array([["傻　.　逼".encode()]], dtype=object)})
    json.loads(out["MATCHES"][0, 0])  # [{"category": "profanity", "term": "傻逼", "start": 0, "end": 5, ...}]
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from services.common.contracts import text as contract
from services.common.contracts.tensors import TensorSpec
from services.common.serving.model_api import ModelFile
from services.common.errors import InvalidInputError
from services.common.serving.model_repository import find_model
from services.common.serving.onnx_session import SessionOptions
from services.text.classifier import TextClassifier
from services.common.text_match.lexicon import DEFAULT_LEXICON_PATH, Lexicon
from services.common.text_match.normalize import NormalizedText, normalize

__all__ = ["TextModerationModel", "decode_texts"]

TOXICITY_MODEL = "toxicity_en"
SPAM_MODEL = "spam_en"
_WARMUP_TEXTS = ("hello there, see you tomorrow", "WINNER!! claim your £1000 prize now", "你个傻　.　逼")


class TextModerationModel:
    """Implements `services.common.serving.model_api.ServedModel` for text (see the module docstring)."""

    name = contract.MODEL_NAME
    version = "1"
    platform = "auditmesh_text_pipeline"
    max_batch_size = 64
    inputs: Sequence[TensorSpec] = (contract.INPUT,)
    outputs: Sequence[TensorSpec] = contract.OUTPUTS

    def __init__(self, repository_root: Path, session_options: SessionOptions, lexicon: Lexicon | None = None) -> None:
        """Open both classifiers from `repository_root`; `lexicon=None` loads the shipped default.

        Raises `services.common.serving.model_repository.ModelNotFoundError` if a model is missing.
        """
        self._toxicity = TextClassifier(find_model(TOXICITY_MODEL, root=Path(repository_root)), session_options)
        self._spam = TextClassifier(find_model(SPAM_MODEL, root=Path(repository_root)), session_options)
        self._lexicon_path = DEFAULT_LEXICON_PATH if lexicon is None else None
        self._lexicon = Lexicon.load(DEFAULT_LEXICON_PATH) if lexicon is None else lexicon

    @property
    def classifiers(self) -> Mapping[str, TextClassifier]:
        """The ONNX classifiers by output category ("toxicity", "spam"), e.g. for benchmarks."""
        return {"toxicity": self._toxicity, "spam": self._spam}

    @property
    def lexicon(self) -> Lexicon:
        """The blocklist in use (immutable; a hot reload would build a new model or swap this)."""
        return self._lexicon

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one batch (see the module docstring). Raises InvalidInputError for a malformed TEXT."""
        texts = decode_texts(inputs, max_batch_size=self.max_batch_size)
        normalized = [normalize(text) for text in texts]
        matches = np.empty((len(texts), 1), dtype=object)
        for index, item in enumerate(normalized):
            hits = [m.to_json() for m in self._lexicon.find(item)]
            matches[index, 0] = contract.encode_matches(hits)
        return {
            "TOXICITY": self._score(self._toxicity, texts, normalized),
            "SPAM": self._score(self._spam, texts, normalized),
            "MATCHES": matches,
        }

    def warmup(self) -> None:
        """Run a small mixed batch so sessions, the t2s table and caches are ready."""
        self.infer({"TEXT": np.array([[t.encode("utf-8")] for t in _WARMUP_TEXTS], dtype=object)})

    def model_files(self) -> Sequence[ModelFile]:
        """Both ONNX models plus a pseudo entry `lexicon` whose version is the lexicon content hash."""
        files = [ModelFile(c.entry.name, c.entry.version, str(c.entry.path), c.entry.sha256, c.entry.source,
                           c.entry.license) for c in (self._toxicity, self._spam)]
        lexicon_sha = hashlib.sha256(self._lexicon_path.read_bytes()).hexdigest() if self._lexicon_path else ""
        files.append(ModelFile("lexicon", self._lexicon.version,
                               str(self._lexicon_path) if self._lexicon_path else "<in memory>", lexicon_sha,
                               "services/common/text_match/data/default_lexicon.json" if self._lexicon_path else "caller-supplied",
                               "see services/text/data/README.md" if self._lexicon_path else ""))
        return files

    @staticmethod
    def _score(classifier: TextClassifier, texts: Sequence[str], normalized: Sequence[NormalizedText]) -> np.ndarray:
        batch = [n.text for n in normalized] if classifier.preprocessing == "normalize" else list(texts)
        return classifier.predict(batch).reshape(-1, 1)


def decode_texts(inputs: Mapping[str, np.ndarray], *, max_batch_size: int) -> list[str]:
    """Validate the `TEXT` tensor ([N, 1] of UTF-8 bytes) and decode it.

    Example::

        >>> decode_texts({"TEXT": np.array([[b"hi"], ["é".encode()]], dtype=object)}, max_batch_size=8)
        ['hi', 'é']
    """
    if "TEXT" not in inputs:
        raise InvalidInputError(f"missing input tensor 'TEXT' (got {sorted(inputs)}); expected BYTES [N, 1]")
    array = np.asarray(inputs["TEXT"])
    if array.ndim != 2 or array.shape[1] != 1:
        raise InvalidInputError(f"TEXT must have shape [N, 1], got {list(array.shape)}")
    if array.shape[0] > max_batch_size:
        raise InvalidInputError(f"TEXT batch of {array.shape[0]} exceeds max_batch_size {max_batch_size}")
    texts = []
    for index, value in enumerate(array[:, 0]):
        if not isinstance(value, (bytes, bytearray, np.bytes_)):
            raise InvalidInputError(f"TEXT[{index}] must be UTF-8 bytes, got {type(value).__name__}")
        try:
            texts.append(bytes(value).decode("utf-8"))
        except UnicodeDecodeError as error:
            raise InvalidInputError(f"TEXT[{index}] is not valid UTF-8 (byte {error.start}: {error.reason})") from None
    return texts

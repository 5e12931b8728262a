"""A tenant's trained classifier (services/trainer/) as a served KServe v2 model: `classifier.<tenant>.<version>`.

Contract: `services.common.contracts.classifier`. The model reads a classifier directory written by
`auditmesh classifier train` (checked on load: checksum, encoder), shares the text service's multilingual
encoder (one copy of its 118 MB, whatever the number of tenants), and scores a batch of texts in one
encoder call. Its model files name the classifier's version, so responses and audit records can say which
classifier decided.

Example::

    model = TenantClassifierModel(Path("classifiers/acme"), encoder)
    out = model.infer({"TEXT": np.array([[b"free airdrop, connect your wallet"]], dtype=object)})
    decode_scores(out["SCORES"][0, 0])   # {'custom.crypto_scam': (0.97, True)}
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from services.common.contracts import classifier as contract
from services.common.contracts.tensors import TensorSpec
from services.common.serving.model_api import ModelFile
from services.text.model import decode_texts
from services.trainer.artifact import HEADS_FILE, LoadedClassifier, load
from services.trainer.features import Encoder

__all__ = ["TenantClassifierModel", "classifier_bytes"]

_WARMUP = ("hello, see you tomorrow", "你好，明天见")


class TenantClassifierModel:
    """Implements `services.common.serving.model_api.ServedModel` (see the module docstring)."""

    platform = "auditmesh_tenant_classifier"
    max_batch_size = 64
    #: Its version is the classifier's (a digest of what it was trained from), also after a hot reload.
    versioned_by_content = True
    inputs: Sequence[TensorSpec] = (contract.INPUT,)
    outputs: Sequence[TensorSpec] = contract.OUTPUTS

    def __init__(self, directory: Path, encoder: Encoder) -> None:
        """Load the classifier in `directory`; `services.trainer.artifact.ArtifactError` naming the file when
        it is missing, altered or trained for another encoder."""
        self.directory = Path(directory)
        self.classifier = load(self.directory)
        self.encoder = encoder
        self.name = contract.model_name(self.classifier.tenant, self.classifier.version)
        self.version = self.classifier.version
        self._bytes = classifier_bytes(self.classifier)

    def memory_bytes(self) -> int:
        """What this classifier holds (its arrays and vocabulary; the shared encoder is not counted): what the
        text service's `tenant_classifier_budget_mb` counts."""
        return self._bytes

    @property
    def categories(self) -> tuple[str, ...]:
        """The categories this classifier scores."""
        return self.classifier.categories

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Score one batch; InvalidInputError for a malformed TEXT."""
        texts = decode_texts(inputs, max_batch_size=self.max_batch_size)
        out = np.empty((len(texts), 1), dtype=object)
        if texts:
            probabilities = self.classifier.probabilities(texts, self.encoder)
            flagged = self.classifier.flags(probabilities)
            for row in range(len(texts)):
                out[row, 0] = contract.encode_scores({c: float(p[row]) for c, p in probabilities.items()},
                                                     {c: bool(f[row]) for c, f in flagged.items()})
        return {contract.OUTPUT.name: out}

    def warmup(self) -> None:
        """Score a short mixed batch (the encoder's first call loads its weights)."""
        self.infer({contract.INPUT.name: np.array([[t.encode("utf-8")] for t in _WARMUP], dtype=object)})

    def model_files(self) -> Sequence[ModelFile]:
        """The classifier's heads file, under the model's name and the classifier's version."""
        manifest = self.classifier.manifest
        return [ModelFile(self.name, self.version, str(self.directory / HEADS_FILE), str(manifest["heads_sha256"]),
                          f"auditmesh classifier train (examples sha256 {str(manifest['examples_sha256'])[:12]})",
                          "the tenant's own data")]


def classifier_bytes(classifier: LoadedClassifier) -> int:
    """The memory `classifier` holds: its arrays, and its n-gram terms (each string object and its slot)."""
    arrays = (classifier.weights, classifier.biases, classifier.thresholds, classifier.grams.idf)
    terms = classifier.grams.terms
    return sum(a.nbytes for a in arrays) + sum(sys.getsizeof(t) for t in terms) + sys.getsizeof(terms)

"""A trained tenant classifier on disk: versioned, checksummed, loadable without scikit-learn.

A classifier directory holds `heads.npz` (idf, weights [width, K], biases and thresholds, in category
order) and `classifier.json` (tenant, categories, the n-gram terms, the encoder it was trained with,
held-out scores and learning curves per category, the digest of the examples, and the SHA-256 of
`heads.npz`). The version is the first 12 hex digits of the digest over both, so the same examples,
seed and code give the same version. Loading checks the checksum and the encoder, and refuses a
directory that does not match with a message naming the file.

Example::

    path = save(trained, Path("classifiers/acme"), tenant="acme", examples_digest=digest(examples))
    classifier = load(path)
    classifier.probabilities(["free crypto, dm me"], encoder)   # {"custom.crypto_scam": array([0.97])}
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from services.common.contracts.classifier import MANIFEST_FILE
from services.text.multilingual import DIMENSION, ENCODER
from services.trainer.examples import Example, check_category
from services.trainer.features import CharNgrams, Encoder, Featurizer
from services.trainer.train import Trained

__all__ = ["ArtifactError", "LoadedClassifier", "digest", "load", "read_manifest", "save", "save_into"]

HEADS_FILE = "heads.npz"
FORMAT = 1


class ArtifactError(ValueError):
    """A classifier directory that cannot be loaded; the message names the file and what is wrong."""


def digest(examples: Sequence[Example]) -> str:
    """SHA-256 over the examples in order (text and sorted labels): what a classifier was trained from."""
    hasher = hashlib.sha256()
    for example in examples:
        hasher.update(json.dumps([example.text, sorted(example.labels.items())], ensure_ascii=False).encode("utf-8"))
        hasher.update(b"\n")
    return hasher.hexdigest()


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An .npz archive whose bytes depend on the arrays only (np.savez stamps the time into the zip)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.save(member, array, allow_pickle=False)
            archive.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)), member.getvalue())
    return buffer.getvalue()


def _contents(trained: Trained, tenant: str, examples_digest: str) -> tuple[dict[str, Any], bytes]:
    """The manifest (with its version) and the heads file of `trained`."""
    categories = sorted(trained.heads)
    heads = [trained.heads[c] for c in categories]
    payload = _npz_bytes({"idf": trained.grams.idf.astype(np.float32),
                          "weights": np.stack([h.weights for h in heads], axis=1).astype(np.float32),
                          "biases": np.array([h.bias for h in heads], np.float64),
                          "thresholds": np.array([h.threshold for h in heads], np.float64)})
    manifest: dict[str, Any] = {
        "format": FORMAT, "tenant": tenant, "encoder": ENCODER, "categories": categories,
        "terms": list(trained.grams.terms), "examples_sha256": examples_digest,
        "heads_sha256": hashlib.sha256(payload).hexdigest(),
        "metrics": {h.category: {"held_out": asdict(h.held_out), "threshold": round(h.threshold, 6),
                                 "trained_on": h.trained_on, "curve": [list(p) for p in h.curve]} for h in heads}}
    manifest["version"] = hashlib.sha256(json.dumps(manifest, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:12]
    return manifest, payload


def _write(directory: Path, manifest: dict[str, Any], payload: bytes) -> Path:
    """Write the classifier into `directory` atomically: a reader (the text service) sees the old directory
    or the new one, never a half-written one. A directory already holding this very version, unaltered, is kept."""
    if (directory / MANIFEST_FILE).is_file():
        try:
            if load(directory).version == manifest["version"]:  # whole and unaltered: nothing to write
                return directory
        except ArtifactError:
            pass  # altered or half-written: replaced below
    directory.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{directory.name}.partial-", dir=directory.parent))
    (partial / HEADS_FILE).write_bytes(payload)
    (partial / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.chmod(partial, 0o755)
    old = directory.parent / f".{directory.name}.old-{os.getpid()}"
    if directory.exists():
        os.replace(directory, old)
    os.replace(partial, directory)
    shutil.rmtree(old, ignore_errors=True)
    return directory


def save(trained: Trained, directory: Path, *, tenant: str, examples_digest: str) -> Path:
    """Write `trained` into `directory` (created; replaced atomically if it exists) and return it."""
    manifest, payload = _contents(trained, tenant, examples_digest)
    return _write(directory, manifest, payload)


def save_into(trained: Trained, folder: Path, *, tenant: str, examples_digest: str) -> Path:
    """Write `trained` into `folder/<tenant>/<version>/` (the text service's `tenant_classifiers` layout:
    every version in its own directory, so a retrain never overwrites the version a policy reads)."""
    manifest, payload = _contents(trained, tenant, examples_digest)
    return _write(folder / tenant / str(manifest["version"]), manifest, payload)


@dataclass(frozen=True)
class LoadedClassifier:
    """A classifier read back from disk: scores texts with a given encoder (the service's, shared)."""

    tenant: str
    version: str
    categories: tuple[str, ...]
    grams: CharNgrams
    weights: np.ndarray
    biases: np.ndarray
    thresholds: np.ndarray
    manifest: dict[str, Any]

    def probabilities(self, texts: Sequence[str], encoder: Encoder) -> dict[str, np.ndarray]:
        """Per category, each text's probability."""
        rows = Featurizer(encoder, self.grams).rows(texts)
        logits = np.asarray(rows @ self.weights, dtype=np.float64) + self.biases[None, :]
        probability = 1.0 / (1.0 + np.exp(-logits))
        return {category: probability[:, k] for k, category in enumerate(self.categories)}

    def flags(self, probabilities: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Per category, whether each probability (from `probabilities`) reaches the category's threshold."""
        return {c: probabilities[c] >= self.thresholds[k] for k, c in enumerate(self.categories)}

    def flagged(self, texts: Sequence[str], encoder: Encoder) -> dict[str, np.ndarray]:
        """Per category, whether each text reaches the category's threshold."""
        return self.flags(self.probabilities(texts, encoder))


def read_manifest(directory: Path) -> dict[str, Any]:
    """`directory`'s manifest as written (nothing checked: `load` checks), e.g. to find a tenant's
    classifier among several; ArtifactError when it cannot be read."""
    path = directory / MANIFEST_FILE
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ArtifactError(f"{path}: cannot read the manifest ({error})") from None
    if not isinstance(manifest, dict):
        raise ArtifactError(f"{path}: not a JSON object")
    return manifest


def load(directory: Path) -> LoadedClassifier:
    """The classifier in `directory`; ArtifactError naming the file when it is missing, altered or made
    for another encoder."""
    manifest_path, heads_path = directory / MANIFEST_FILE, directory / HEADS_FILE
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        payload = heads_path.read_bytes()
    except (OSError, json.JSONDecodeError) as error:
        raise ArtifactError(f"{directory}: cannot read the classifier ({error})") from None
    if manifest.get("format") != FORMAT:
        raise ArtifactError(f"{manifest_path}: format {manifest.get('format')!r}, this version reads {FORMAT}")
    if hashlib.sha256(payload).hexdigest() != manifest.get("heads_sha256"):
        raise ArtifactError(f"{heads_path}: SHA-256 differs from {MANIFEST_FILE}'s heads_sha256 (altered or truncated)")
    if manifest.get("encoder") != ENCODER:
        raise ArtifactError(f"{manifest_path}: trained with encoder {manifest.get('encoder')!r}, this service has "
                            f"{ENCODER!r}; retrain")
    categories = tuple(check_category(str(c)) for c in manifest["categories"])
    with np.load(io.BytesIO(payload), allow_pickle=False) as arrays:
        idf, weights = arrays["idf"], arrays["weights"]
        biases, thresholds = arrays["biases"], arrays["thresholds"]
    terms = tuple(str(t) for t in manifest["terms"])
    if weights.shape != (DIMENSION + len(terms), len(categories)) or idf.shape != (len(terms),):
        raise ArtifactError(f"{heads_path}: weights {weights.shape} and idf {idf.shape} do not fit "
                            f"{len(terms)} terms and {len(categories)} categories")
    return LoadedClassifier(str(manifest["tenant"]), str(manifest["version"]), categories, CharNgrams(terms, idf),
                            weights, biases, thresholds, manifest)

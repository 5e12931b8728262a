"""Tensor contract of a tenant classifier served as a KServe v2 model (issue 40), declared once.

A classifier trained with `auditmesh classifier train` (services/trainer/) is served under the model name
`classifier.<tenant>.<version>`, its version the classifier's version (a digest of what it was trained
from) as well: a policy pins the version it reads, so several versions of one tenant's classifier can be
served at once (the active policy's and a shadow candidate's), and a retrained classifier never replaces
the one a policy already reads:

* input `TEXT`: BYTES [N, 1], UTF-8 texts (the same input as the text models);
* output `SCORES`: BYTES [N, 1], per text a JSON object {category: {"score": 0..1, "flagged": bool}} for
  every category the classifier was trained for (built-in names or `custom.<name>`); `flagged` is the
  score against the threshold the training run chose by cross-validation.

JSON, not one FP32 tensor per category: each tenant's classifier has its own categories, and a Triton
server hosting the same model must declare the same outputs whatever they are.

Example::

    >>> row = encode_scores({"custom.crypto_scam": 0.91}, {"custom.crypto_scam": True})
    >>> decode_scores(row)
    {'custom.crypto_scam': (0.91, True)}
"""

from __future__ import annotations

import json
import math
import re
from typing import Mapping

import numpy as np

from services.common.contracts.rows import MalformedRowError, row_bytes
from services.common.contracts.tensors import TensorSpec

__all__ = ["INPUT", "MANIFEST_FILE", "MODEL_PREFIX", "OUTPUT", "OUTPUTS", "ROUTER_OUTPUTS", "decode_row", "decode_scores",
           "encode_scores", "is_version", "model_name", "parse_model_name"]

MODEL_PREFIX = "classifier."
#: The file that makes a directory a classifier (services/trainer/artifact.py writes it; the text service
#: looks for it without importing the trainer).
MANIFEST_FILE = "classifier.json"
INPUT = TensorSpec("TEXT", "BYTES", (1,))
OUTPUT = TensorSpec("SCORES", "BYTES", (1,))
OUTPUTS = (OUTPUT,)
#: The outputs the router asks for.
ROUTER_OUTPUTS: tuple[str, ...] = (OUTPUT.name,)
_TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
_VERSION = re.compile(r"[0-9a-f]{6,64}")


def is_version(version: str) -> bool:
    """Whether `version` can be a classifier's version (6-64 lower-case hex digits)."""
    return _VERSION.fullmatch(version) is not None


def model_name(tenant: str, version: str) -> str:
    """The KServe model name of `tenant`'s classifier at `version`; ValueError for a tenant id or version
    that cannot be part of one.

    Example::

        >>> model_name("acme", "68b7e413a4f1")
        'classifier.acme.68b7e413a4f1'
    """
    if not _TENANT.fullmatch(tenant):
        raise ValueError(f"tenant {tenant!r}: a classifier's tenant must be 1-63 letters, digits, '_' or '-'")
    if not is_version(version):
        raise ValueError(f"version {version!r}: a classifier's version is 6-64 lower-case hex digits")
    return f"{MODEL_PREFIX}{tenant}.{version}"


def parse_model_name(name: str) -> tuple[str, str] | None:
    """(tenant, version) of a classifier's model name, or None for any other name.

    Example::

        >>> parse_model_name("classifier.acme.68b7e413a4f1"), parse_model_name("text_moderation")
        (('acme', '68b7e413a4f1'), None)
    """
    if not name.startswith(MODEL_PREFIX):
        return None
    tenant, _, version = name[len(MODEL_PREFIX):].partition(".")
    return (tenant, version) if _TENANT.fullmatch(tenant) and is_version(version) else None


def encode_scores(scores: Mapping[str, float], flagged: Mapping[str, bool]) -> bytes:
    """One text's `SCORES` value."""
    return json.dumps({c: {"score": round(float(s), 6), "flagged": bool(flagged[c])} for c, s in sorted(scores.items())},
                      ensure_ascii=False).encode("utf-8")


def decode_scores(value: bytes) -> dict[str, tuple[float, bool]]:
    """{category: (score, flagged)} from one `SCORES` value; ValueError when it breaks the contract."""
    try:
        document = json.loads(bytes(value).decode("utf-8"))
        return {str(c): (float(v["score"]), bool(v["flagged"])) for c, v in document.items()}
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise ValueError(f"SCORES: not a classifier scores object ({error})") from None


def decode_row(row: Mapping[str, np.ndarray]) -> dict[str, float]:
    """{category: score} of one response row (the router's view); MalformedRowError when the row breaks the
    contract, including a score that is not a number in 0..1."""
    try:
        scores = decode_scores(row_bytes(row, OUTPUT.name))
    except ValueError as error:
        raise MalformedRowError(str(error)) from None
    bad = [c for c, (score, _) in scores.items() if not (math.isfinite(score) and 0.0 <= score <= 1.0)]
    if bad:
        raise MalformedRowError(f"output {OUTPUT.name!r}: the score of {bad[0]!r} is not in 0..1")
    return {category: score for category, (score, _) in scores.items()}

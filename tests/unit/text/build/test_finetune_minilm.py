"""The PyTorch twin of MiniLM matches the shipped ONNX graph, writes back losslessly, and fine-tuning is
seeded, changes only the top layers, and installs a model the serving embedder opens."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from services.common.serving.model_repository import RepositoryEntry, find_model
from services.common.serving.onnx_session import SessionOptions
from services.text.build.compact import apply_delta
from services.text.build.finetune_minilm import BASE_MODEL, TUNED_MODEL, TuningConfig, build_tuned_minilm
from services.text.embedding import SentenceEmbedder

TEXTS = ["you are an idiot", "see you tomorrow at five", "kill the tmux session", "I'll be outside your office",
         "free crypto pump join now", "lovely weather today", "nobody would miss you", "how do I kill a process"]


@pytest.fixture(scope="module")
def base(repository_root: Path) -> RepositoryEntry:
    return find_model(BASE_MODEL, root=repository_root)


def test_torch_twin_matches_the_onnx_session(base: RepositoryEntry) -> None:
    import onnx
    import torch

    from services.text.build.minilm_torch import MiniLM

    embedder = SentenceEmbedder(base, SessionOptions(intra_op_threads=1))
    expected = embedder.embed(TEXTS[:3])
    encoder = MiniLM.from_onnx(onnx.load(str(base.path))).eval()
    with torch.no_grad():
        states = encoder(torch.tensor(_ids(embedder, TEXTS[:3])), torch.tensor(expected.mask.astype(np.int64))).numpy()
    assert np.abs(states - expected.states).max() < 1e-4


def _ids(embedder: SentenceEmbedder, texts: list[str]) -> np.ndarray:
    encodings = embedder._tokenizer.encode_batch(texts)
    return np.array([e.ids for e in encodings], dtype=np.int64)


def test_write_onnx_round_trips_the_weights(base: RepositoryEntry, tmp_path: Path) -> None:
    import onnx

    from services.text.build.minilm_torch import MiniLM, write_onnx

    graph = onnx.load(str(base.path))
    encoder = MiniLM.from_onnx(graph)
    write_onnx(graph, encoder, tmp_path / "model.onnx")
    again = MiniLM.from_onnx(onnx.load(str(tmp_path / "model.onnx")))
    for name, value in encoder.initializers().items():
        assert np.array_equal(value, again.initializers()[name]), name


def test_fine_tuning_is_seeded_moves_only_top_layers_and_serves(base: RepositoryEntry, tmp_path: Path) -> None:
    import onnx

    from services.text.build.minilm_torch import MiniLM

    labels = np.zeros((len(TEXTS), 2), dtype=np.int64)
    labels[[0, 6], 0] = 1
    labels[[3], 1] = 1
    config = TuningConfig(tuned_layers=1, epochs=1, batch_size=4, threads=1)
    digests = []
    for run in ("a", "b"):
        repository = tmp_path / run
        target = repository / BASE_MODEL
        shutil.copytree(Path(base.path).parents[1], target)
        entry = build_tuned_minilm(repository, TEXTS, labels, np.ones(len(TEXTS)), seed=3, config=config)
        assert entry.name == TUNED_MODEL
        digests.append(entry.extra["file_sha256"]["model.onnx_data"])
    assert digests[0] == digests[1], "same seed, same data: the tuned weights must be identical"
    weights_file = find_model(TUNED_MODEL, root=tmp_path / "a").path.parent / "model.onnx_data"
    before = weights_file.stat().st_mtime_ns
    again = build_tuned_minilm(tmp_path / "a", TEXTS, labels, np.ones(len(TEXTS)), seed=3, config=config)
    assert again.extra["file_sha256"]["model.onnx_data"] == digests[0]
    assert weights_file.stat().st_mtime_ns == before, "unchanged inputs reuse the installed model"
    other = build_tuned_minilm(tmp_path / "a", TEXTS, labels, np.ones(len(TEXTS)), seed=4, config=config)
    assert other.extra["inputs_sha256"] != again.extra["inputs_sha256"]  # another seed tunes again
    tuned = MiniLM.from_onnx(onnx.load(str(find_model(TUNED_MODEL, root=tmp_path / "a").path))).initializers()
    original = MiniLM.from_onnx(onnx.load(str(base.path))).initializers()
    changed = {name for name in original if not np.array_equal(original[name], tuned[name])}
    assert changed and all(name.startswith("model.layers.5.") for name in changed), sorted(changed)[:5]
    # The committed form (delta.npz, float16) holds exactly the moved tensors and decodes to what is served.
    with np.load(find_model(TUNED_MODEL, root=tmp_path / "a").path.parent / "delta.npz") as stored:
        deltas = {name: stored[name] for name in stored.files}
    assert set(deltas) == changed and all(d.dtype == np.float16 for d in deltas.values())
    decoded = apply_delta(original, deltas)
    assert all(np.array_equal(decoded[name], tuned[name]) for name in changed)
    vectors = SentenceEmbedder(find_model(TUNED_MODEL, root=tmp_path / "a"), SessionOptions()).embed(TEXTS).vectors
    assert vectors.shape == (len(TEXTS), 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_bad_configuration_is_refused(base: RepositoryEntry, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tuned_layers"):
        build_tuned_minilm(tmp_path, TEXTS, np.zeros((8, 1)), np.ones(8), config=TuningConfig(tuned_layers=7))
    with pytest.raises(ValueError, match="differ in length"):
        build_tuned_minilm(tmp_path, TEXTS, np.zeros((3, 1)), np.ones(8))


def test_batches_cover_every_row_once_and_group_similar_lengths() -> None:
    from services.text.build.finetune_minilm import _batches

    lengths = np.random.default_rng(1).integers(3, 48, size=1000)
    batches = _batches(lengths, 32, 10, np.random.default_rng(0))
    assert sorted(int(i) for b in batches for i in b) == list(range(1000))
    assert sorted(len(b) for b in batches) == [8] + [32] * 31  # pools of 320 rows: 3 full ones, then 40 rows
    padding = sum(int(lengths[b].max() - lengths[b].min()) for b in batches)
    shuffled = np.random.default_rng(0).permutation(1000)
    unsorted = sum(int(lengths[shuffled[i:i + 32]].max() - lengths[shuffled[i:i + 32]].min()) for i in range(0, 1000, 32))
    assert padding < unsorted / 3
    again = _batches(lengths, 32, 10, np.random.default_rng(0))
    assert all(np.array_equal(a, b) for a, b in zip(batches, again))


def test_partners_are_the_nearest_rows_with_another_label_set() -> None:
    import torch

    from services.text.build.finetune_minilm import _partners

    # rows 0 and 1 are near duplicates with different labels (a threat and a plan); row 2 shares row 1's
    # labels and lies nearer row 3 (row 0's labels) than row 0; row 3 lies nearer row 1 than row 2.
    states = [torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.2, 0.0]]), torch.tensor([[1.0, 0.1, 0.0]]),
              torch.tensor([[0.0, 0.6, 0.8]]), torch.tensor([[0.7, 0.7, 0.0]])]
    labels = np.array([[1, 0], [0, 0], [0, 0], [1, 0]])
    partners = _partners(states, labels, chunk=3)  # a chunk boundary inside the rows
    assert partners.tolist() == [1, 0, 3, 1]
    codes = labels @ np.array([1, 2])
    assert all(codes[i] != codes[p] for i, p in enumerate(partners))


def test_mined_partner_batches_tune_and_differ_from_plain_batches(base: RepositoryEntry, tmp_path: Path) -> None:
    labels = np.zeros((len(TEXTS), 2), dtype=np.int64)
    labels[[0, 6], 0] = 1
    labels[[3], 1] = 1
    digests = {}
    for mined in (False, True):
        repository = tmp_path / str(mined)
        shutil.copytree(Path(base.path).parents[1], repository / BASE_MODEL)
        config = TuningConfig(tuned_layers=1, epochs=1, batch_size=4, threads=1, mined_partners=mined)
        entry = build_tuned_minilm(repository, TEXTS, labels, np.ones(len(TEXTS)), seed=3, config=config)
        assert entry.extra["tuning"]["mined_partners"] is mined
        digests[mined] = entry.extra["file_sha256"]["model.onnx_data"]
    assert digests[True] != digests[False]

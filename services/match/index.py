"""Hamming-distance search over one bank's hashes (PDQ and text SimHash: 256 bits each), on faiss binary
indexes (`faiss-cpu`, MIT).

Banks use an exhaustive scan (`IndexBinaryFlat`: exact; ~2 ms at 10^6 hashes); banks of at least
`MIH_FROM` hashes use multi-index hashing (`IndexBinaryMultiHash`, Norouzi et al.: the hash is cut into
`nhash` substrings, and any hash within distance r of the query agrees exactly with it on at least one
substring when r < nhash * (substring bits + 1)... faiss probes each substring's buckets up to a
flip distance, so recall depends on `nflip`); `bench/match_bench.py` measures both, with recall against
the exhaustive answer. An index is built once, off the request path, and never changed afterwards. A bank
is searched as `IndexLayers`: its index as last built whole, and a small one of the hashes added since
(services/match/banks.py), so adding hashes to a large bank rebuilds only the small one.

Example::

    index = HammingIndex.build(np.array([...], dtype=np.uint8).reshape(-1, 32), ids=["c1", "c2"])
    index.query(query_bytes, max_distance=31)   # [("c1", 4)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["HammingIndex", "IndexLayers", "MIH_FROM"]

#: Banks with at least this many hashes get a multi-index hashing index instead of a flat scan. Measured
#: (bench/match_bench.py, 256-bit hashes, distance 31): at 1M hashes the flat scan answers in P99 1.95 ms
#: with recall 1.0 in 32 MB of hashes; MIH answers in 0.58 ms with recall 0.993 but adds ~690 MB. So the
#: flat scan serves every bank up to 20M hashes (640 MB of hashes) and MIH only past that.
MIH_FROM = 20_000_000


@dataclass
class HammingIndex:
    """An immutable Hamming-distance index over fixed-length binary hashes, each with its content id."""

    bits: int
    ids: tuple[str, ...]
    kind: str
    _index: object

    @classmethod
    def build(cls, hashes: np.ndarray, ids: Sequence[str], *, mih_from: int = MIH_FROM) -> HammingIndex:
        """An index over `hashes` (uint8, one row of bits/8 bytes per hash), row i named `ids[i]`."""
        import faiss

        rows = np.ascontiguousarray(hashes, dtype=np.uint8)
        if rows.ndim != 2 or rows.shape[0] != len(ids) or rows.shape[1] not in (8, 32):
            raise ValueError(f"hashes must be an (n, 8) or (n, 32) uint8 array with one id per row, got {rows.shape} "
                             f"and {len(ids)} ids")
        bits = rows.shape[1] * 8
        index: Any
        if len(rows) >= mih_from:
            index = faiss.IndexBinaryMultiHash(bits, bits // 32 if bits == 256 else 4, 32 if bits == 256 else 16)
            index.nflip = 2
            kind = "mih"
        else:
            index = faiss.IndexBinaryFlat(bits)
            kind = "flat"
        if len(rows):
            index.add(rows)
        return cls(bits, tuple(ids), kind, index)

    def __len__(self) -> int:
        return len(self.ids)

    def query(self, hashes: np.ndarray, max_distance: int) -> list[list[tuple[str, int]]]:
        """For each query row, the (id, distance) of every hash within `max_distance` bits, nearest first."""
        queries = np.ascontiguousarray(hashes, dtype=np.uint8).reshape(-1, self.bits // 8)
        if not len(self.ids) or not len(queries):
            return [[] for _ in range(len(queries))]
        limits, distances, labels = self._index.range_search(queries, max_distance + 1)  # type: ignore[attr-defined]
        out: list[list[tuple[str, int]]] = []
        for row in range(len(queries)):
            found = sorted(zip(distances[limits[row]:limits[row + 1]].tolist(), labels[limits[row]:limits[row + 1]].tolist()))
            out.append([(self.ids[label], int(distance)) for distance, label in found])
        return out

    def memory_bytes(self) -> int:
        """The hashes' bytes plus the ids' (an estimate of what the index holds)."""
        return len(self.ids) * (self.bits // 8) + sum(len(i) + 49 for i in self.ids)


@dataclass(frozen=True)
class IndexLayers:
    """Several indexes of one bank's hashes (disjoint), searched as one."""

    layers: tuple[HammingIndex, ...]

    def __len__(self) -> int:
        return sum(len(layer) for layer in self.layers)

    def query(self, hashes: np.ndarray, max_distance: int) -> list[list[tuple[str, int]]]:
        """As `HammingIndex.query`, over every layer: per query row, the hits of all layers, nearest first."""
        answers = [layer.query(hashes, max_distance) for layer in self.layers if len(layer)]
        if len(answers) == 1:
            return answers[0]
        rows = len(np.asarray(hashes).reshape(-1, self.layers[0].bits // 8)) if self.layers else 0
        if not answers:
            return [[] for _ in range(rows)]
        return [sorted((hit for answer in answers for hit in answer[row]), key=lambda hit: hit[1]) for row in range(rows)]

    def memory_bytes(self) -> int:
        return sum(layer.memory_bytes() for layer in self.layers)

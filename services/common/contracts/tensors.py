"""KServe v2 tensor descriptions shared by every contract and the serving kit."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DATATYPES", "TensorSpec"]


#: KServe v2 datatype name -> numpy dtype used in memory.
DATATYPES: dict[str, type] = {
    "BYTES": np.object_,
    "FP32": np.float32,
    "FP64": np.float64,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT8": np.uint8,
    "BOOL": np.bool_,
}


@dataclass(frozen=True)
class TensorSpec:
    """Name, KServe datatype and per-item shape (without the batch dimension; -1 = variable)."""

    name: str
    datatype: str
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.datatype not in DATATYPES:
            raise ValueError(f"TensorSpec {self.name!r}: datatype {self.datatype!r} is not one of {sorted(DATATYPES)}")

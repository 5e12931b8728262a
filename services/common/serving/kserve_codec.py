"""Converting KServe v2 (Triton) inference messages to and from numpy arrays.

Both encodings a client may use are accepted: `raw_input_contents` (what tritonclient sends: binary,
BYTES elements length-prefixed) and the typed `contents` fields. Responses always use
`raw_output_contents`, as Triton does.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from tritonclient.grpc import service_pb2
from tritonclient.utils import deserialize_bytes_tensor, serialize_byte_tensor

from services.common.contracts.tensors import DATATYPES, TensorSpec
from services.common.errors import InvalidInputError, LimitExceededError
from services.common.serving.modality_config import ServingLimits

#: Bytes each BYTES element takes in `raw_input_contents` besides its data (the length prefix).
BYTES_PREFIX = 4

_CONTENTS_FIELD = {
    "BYTES": "bytes_contents", "FP32": "fp32_contents", "FP64": "fp64_contents",
    "INT32": "int_contents", "INT64": "int64_contents", "UINT8": "uint_contents", "BOOL": "bool_contents",
}


def decode_inputs(request: service_pb2.ModelInferRequest, specs: Sequence[TensorSpec]) -> dict[str, np.ndarray]:
    """Turn a ModelInferRequest into {name: array}, checking names, datatypes and shapes against `specs`.

    Raises InvalidInputError with a message naming the tensor and what was expected.
    """
    expected = {spec.name: spec for spec in specs}
    given = {tensor.name for tensor in request.inputs}
    if given != set(expected):
        raise InvalidInputError(f"model {request.model_name!r} expects inputs {sorted(expected)}, got {sorted(given)}")
    use_raw = len(request.raw_input_contents) > 0
    if use_raw and len(request.raw_input_contents) != len(request.inputs):
        raise InvalidInputError("raw_input_contents must have one entry per input tensor")
    arrays: dict[str, np.ndarray] = {}
    for index, tensor in enumerate(request.inputs):
        spec = expected[tensor.name]
        if tensor.datatype != spec.datatype:
            raise InvalidInputError(f"input {tensor.name!r} must be {spec.datatype}, got {tensor.datatype}")
        shape = tuple(int(d) for d in tensor.shape)
        if len(shape) != len(spec.shape) + 1 or any(e != -1 and e != d for e, d in zip(spec.shape, shape[1:])):
            raise InvalidInputError(f"input {tensor.name!r} must have shape [N, {', '.join(map(str, spec.shape))}], got {list(shape)}")
        raw = request.raw_input_contents[index] if use_raw else None
        arrays[tensor.name] = _tensor_to_array(tensor, spec.datatype, shape, raw)
    batch_sizes = {array.shape[0] for array in arrays.values()}
    if len(batch_sizes) != 1:
        raise InvalidInputError(f"all inputs must have the same batch size, got {sorted(batch_sizes)}")
    return arrays


def check_rows(request: service_pb2.ModelInferRequest, limits: ServingLimits) -> None:
    """LimitExceededError when the request declares more rows than `limits.max_rows` (checked before
    decoding, from the shapes only)."""
    for tensor in request.inputs:
        rows = int(tensor.shape[0]) if len(tensor.shape) else 0
        if rows > limits.max_rows:
            raise LimitExceededError(f"input {tensor.name[:64]!r} has {rows} rows; this service takes at most "
                                     f"{limits.max_rows} per request (limits.max_rows)")


def check_sizes(arrays: Mapping[str, np.ndarray], limits: ServingLimits) -> None:
    """LimitExceededError naming the limit when a BYTES element is over `limits.max_row_bytes` or all
    of them together (with their length prefixes) are over `limits.max_request_bytes`."""
    total = 0
    for name, array in arrays.items():
        if array.dtype != np.object_:
            total += int(array.nbytes)
            continue
        for index, value in enumerate(array.reshape(-1)):
            size = len(value) if isinstance(value, (bytes, bytearray, str)) else 0
            if size > limits.max_row_bytes:
                raise LimitExceededError(f"input {name!r} element {index} is {size} bytes; this service takes at most "
                                         f"{limits.max_row_bytes} per element (limits.max_row_bytes)")
            total += size + BYTES_PREFIX
    if total > limits.max_request_bytes:
        raise LimitExceededError(f"the request's inputs are {total} bytes; this service takes at most "
                                 f"{limits.max_request_bytes} per request (limits.max_request_bytes)")


def _tensor_to_array(tensor: service_pb2.ModelInferRequest.InferInputTensor, datatype: str,
                     shape: tuple[int, ...], raw: bytes | None) -> np.ndarray:
    count = int(np.prod(shape))
    try:
        if datatype == "BYTES":
            if raw is not None:
                flat = deserialize_bytes_tensor(raw) if raw else np.empty(0, dtype=np.object_)
            else:
                flat = np.array(list(tensor.contents.bytes_contents), dtype=np.object_)
        elif raw is not None:
            flat = np.frombuffer(raw, dtype=DATATYPES[datatype])
        else:
            flat = np.array(getattr(tensor.contents, _CONTENTS_FIELD[datatype]), dtype=DATATYPES[datatype])
    except Exception as exc:  # malformed length prefixes raise assorted errors inside tritonclient
        raise InvalidInputError(f"input {tensor.name!r}: malformed {datatype} data ({exc})") from None
    if flat.size != count:
        raise InvalidInputError(f"input {tensor.name!r}: shape {list(shape)} needs {count} elements, got {flat.size}")
    return flat.reshape(shape)


def encode_outputs(response: service_pb2.ModelInferResponse, outputs: Mapping[str, np.ndarray],
                   specs: Sequence[TensorSpec], requested: Sequence[str] = ()) -> None:
    """Append `outputs` to `response` (raw_output_contents), in spec order, only `requested` if given."""
    wanted = set(requested) or {spec.name for spec in specs}
    for spec in specs:
        if spec.name not in wanted:
            continue
        array = outputs[spec.name]
        tensor = response.outputs.add(name=spec.name, datatype=spec.datatype, shape=list(array.shape))
        del tensor  # the message is filled in place
        if spec.datatype == "BYTES":
            serialized = serialize_byte_tensor(array)
            response.raw_output_contents.append(serialized.item() if serialized.size else b"")
        else:
            response.raw_output_contents.append(np.ascontiguousarray(array, dtype=DATATYPES[spec.datatype]).tobytes())

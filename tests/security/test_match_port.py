"""The match service `make run` now starts (issue 42) is an internal port like the modality services':
on the real mesh, a caller without the mesh's shared secret gets UNAUTHENTICATED and learns nothing
about the banks; a caller with it (the router) is answered."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.utils import InferenceServerException

from services.common.contracts import match as contract
from services.launcher import MATCH, Mesh


def envelope_input() -> triton.InferInput:
    item = contract.encode_item("acme", "text", "free crypto airdrop, connect your wallet now".encode())
    tensor = triton.InferInput(contract.INPUT.name, [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[item]], dtype=np.object_))
    return tensor


def test_the_mesh_match_port_refuses_callers_without_the_secret(mesh: Mesh) -> None:
    client = triton.InferenceServerClient(mesh.address(MATCH))
    try:
        with pytest.raises(InferenceServerException, match="UNAUTHENTICATED"):
            client.infer(contract.MODEL_NAME, [envelope_input()])
        answered = client.infer(contract.MODEL_NAME, [envelope_input()], headers=dict(mesh.internal_metadata()))
        assert answered.as_numpy(contract.MATCHES) is not None
    finally:
        client.close()

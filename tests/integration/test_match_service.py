"""The match service over a real KServe v2 gRPC server on loopback (the shared serving kit): a client sends
envelopes and gets matches; a bank updated while requests flow fails none of them and is matched within
the reload interval."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np
import tritonclient.grpc.aio as triton_aio
from tritonclient.grpc import InferInput

from services.common.contracts import match as contract
from services.common.service_config import ServerConfig
from services.common.serving.modality_config import ModalityServiceConfig
from services.common.serving.modality_main import build_service
from services.match.banks import BankSpec, BankStore, Entry
from services.match.server import served_models
from services.match.settings import MatchSettings
from services.match.signals import text_signals

CAMPAIGN = "Earn $500 a day from home, no experience needed. DM me on telegram @richfast99"


async def test_matches_over_kserve_and_a_bank_update_under_load_fails_nothing(tmp_path: Path) -> None:
    store_path = tmp_path / "banks.sqlite"
    store = BankStore(store_path)
    store.put_bank(BankSpec("spam_waves", shared=True, category="spam", action="review"))
    config = ModalityServiceConfig("match", ServerConfig("127.0.0.1:0", grace_period_s=1.0),
                                   match=MatchSettings(banks_path=str(store_path), reload_interval_s=0.2))
    models = served_models(config)
    service, _ = build_service(config, models)
    port = await service.start()
    client = triton_aio.InferenceServerClient(f"127.0.0.1:{port}")

    async def ask(text: str) -> list[contract.Match]:
        tensor = InferInput("ITEM", [1, 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[contract.encode_item("acme", "text", text.encode())]], dtype=object))
        result = await client.infer("match", [tensor], outputs=None)
        matches, error = contract.decode_row({"MATCHES": result.as_numpy("MATCHES")[0], "ERROR": result.as_numpy("ERROR")[0]})
        assert error == ""
        return matches

    try:
        assert await ask(CAMPAIGN + " 🚀") == []
        answers: list[int] = []
        stop = asyncio.Event()

        async def load() -> None:
            while not stop.is_set():
                answers.append(len(await ask(f"{CAMPAIGN} now!!")))
        flow = asyncio.create_task(load())
        await asyncio.sleep(0.2)
        added = time.monotonic()
        await asyncio.to_thread(store.add, "spam_waves", [Entry("text_simhash", text_signals(CAMPAIGN).simhash.hex(), "wave-7")])
        while not (found := await ask(CAMPAIGN + " 🚀")):
            assert time.monotonic() - added < 2.0, "the bank change was not matched within 2 s (reload every 0.2 s)"
            await asyncio.sleep(0.05)
        stop.set()
        await flow  # every request of the flow answered (an exception here fails the test)
        assert [(m.bank, m.content_id, m.bank_version) for m in found] == [("spam_waves", "wave-7", 2)]
        assert answers and set(answers) <= {0, 1} and answers[-1] == 1
    finally:
        await client.close()
        await service.stop()
        for model in models:
            model.close()  # type: ignore[attr-defined]

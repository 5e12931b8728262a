"""Shared fakes for tests: in-memory tracing, a gated served model, a /metrics scraper, a KServe client
that authenticates to the mesh's internal ports, and the batching fakes (a fake clock, a gated
run_batch, `settle`)."""

from __future__ import annotations

import contextlib
import hashlib
import functools
import io
import json
import struct
import asyncio
import threading
import zlib
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, AsyncIterator, Callable, Generic, Mapping, Sequence, TypeVar

import grpc

import numpy as np
from auditmesh.v1 import admin_pb2_grpc as apb_grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from opentelemetry.sdk.trace import ReadableSpan
from PIL import Image
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from services.common.contracts import text as text_contract
from services.common.contracts.tensors import TensorSpec
from services.common.text_match.lexicon import Lexicon
from services.common.serving.model_api import ModelFile
from services.common.tracing.telemetry import install_tracing, shutdown_tracing
from services.router.control.admin import PolicyAdminServicer
from services.router.control.admin_auth import AdminKey, AdminAuth
from services.router.control.audit_store import AuditStore
from services.match.banks import BankStore
from services.router.control.label_store import LabelStore
from services.router.control.review_queue import ReviewQueue
from services.router.control.canary import RollbackBounds
from services.router.control.control import PolicyControl
from services.router.control.runtime import Snapshot
from services.router.control.store import SQLitePolicyStore
from services.router.control.versions import parse_document
from services.router.policy import CompiledPolicy
from services.router.tenants import hash_key

V = TypeVar("V")


class InMemoryTracing:
    """Tracing on (sample everything, export synchronously to memory) inside a `with` block.

    Example::

        with InMemoryTracing() as tracing:
            ...
            spans = tracing.named("/inference.GRPCInferenceService/ModelInfer")
    """

    def __init__(self, service_name: str = "auditmesh-test") -> None:
        self.service_name = service_name
        self.exporter = InMemorySpanExporter()

    def __enter__(self) -> InMemoryTracing:
        install_tracing(self.service_name, self.exporter, batch=False)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        shutdown_tracing()

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name == name]


class GatedModel:
    """A served model (`LENGTH` of each `TEXT`) whose batches wait for `gate` while `hold` is set.

    `entered` is set when a batch starts; `batches` records each batch's size.
    """

    name = "gated"
    version = "1"
    platform = "onnxruntime_onnx"
    max_batch_size = 8
    inputs: Sequence[TensorSpec] = (TensorSpec("TEXT", "BYTES", (1,)),)
    outputs: Sequence[TensorSpec] = (TensorSpec("LENGTH", "FP32", (1,)),)

    def __init__(self) -> None:
        self.hold = threading.Event()
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.batches: list[int] = []

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = inputs["TEXT"]
        self.batches.append(len(texts))
        self.entered.set()
        if self.hold.is_set():
            self.gate.wait(10.0)
        return {"LENGTH": np.array([[len(t[0])] for t in texts], np.float32)}

    def warmup(self) -> None:
        self.infer({"TEXT": np.array([[b"hi"]], object)})

    def model_files(self) -> Sequence[ModelFile]:
        return ()


def scrape(port: int, host: str = "127.0.0.1") -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """GET /metrics and parse it: {(sample name, sorted labels): value}."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as response:
        text = response.read().decode("utf-8")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def sample(samples: Mapping[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """The value of one sample (0.0 when absent, as for a counter not yet incremented)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


# --- Integration-test client helpers (tests/integration, tests/security): keys of the test tenants
# (tests/integration/conftest.py writes their tenants file) and one-call helpers.
KEY_A, KEY_B = "test-key-tenant-a", "test-key-tenant-b"
KEY_CHAT, KEY_FLOOD, KEY_LIMITED = "test-key-chat", "test-key-flood", "test-key-limited"


def item(*parts: str | bytes, item_id: str = "it-1") -> pb.Item:
    message = pb.Item(id=item_id)
    for part in parts:
        if isinstance(part, str):
            message.parts.add(text=part)
        else:
            message.parts.add(image=pb.Image(data=part))
    return message


def moderate(stub: pb_grpc.ModerationServiceStub, *parts: str | bytes, key: str = KEY_A, policy: str = "",
             timeout: float = 30.0) -> pb.ModerateResponse:
    return stub.Moderate(pb.ModerateRequest(request_id="r1", item=item(*parts), policy=policy),
                         metadata=[("x-api-key", key)], timeout=timeout)


# --- Policy lifecycle fakes (tests/unit/router, tests/unit/router/control): documents, a control over a
# temporary store, a clock.
def policy_yaml(name: str, version: str, *, hate_block: float = 0.9, terms: Sequence[str] = (),
                include_content: bool = False, use_default: bool = True) -> str:
    """A small valid policy document."""
    custom = f"custom: {{watch: {{severity: high, terms: {list(terms)!r}}}}}" if terms else "custom: {}"
    return (f"name: {name}\nversion: '{version}'\ncategories:\n  hate: {{review: 0.5, block: {hate_block}}}\n"
            f"blocklist:\n  use_default_lexicon: {str(use_default).lower()}\n  {custom}\n"
            f"audit: {{include_content: {str(include_content).lower()}}}\n")


def tenants_yaml(tenants: Sequence[tuple[str, str, Sequence[str]]], version: str = "") -> str:
    """A tenants document: (id, API key, policies) per tenant."""
    lines = [f"version: '{version}'"] if version else []
    lines.append("tenants:")
    for tenant_id, key, policies in tenants:
        lines.append(f"  - {{id: {tenant_id}, api_key_sha256: {hash_key(key)}, policies: {list(policies)!r}}}")
    return "\n".join(lines) + "\n"


@dataclass
class ConfigFiles:
    policies_dir: Path
    tenants_file: Path

    def write_policy(self, name: str, text: str) -> Path:
        path = self.policies_dir / f"{name}.yaml"
        path.write_text(text)
        return path


def config_files(tmp_path: Path) -> ConfigFiles:
    """policies default@1 and strict@1; tenants a (default, strict) and b (strict)."""
    files = ConfigFiles(tmp_path / "policies", tmp_path / "tenants.yaml")
    files.policies_dir.mkdir()
    files.write_policy("default", policy_yaml("default", "1"))
    files.write_policy("strict", policy_yaml("strict", "1", hate_block=0.75, terms=["megacorp sucks"]))
    files.tenants_file.write_text(tenants_yaml([("a", "key-a", ["default", "strict"]), ("b", "key-b", ["strict"])]))
    return files


def import_config(store: Path, policies_dir: Path, tenants_file: Path) -> Snapshot:
    """What the router does with its config files at start (`PolicyLifecycle.open`): import every policy
    file and the tenants file into a fresh policy store at `store` and build the first snapshot.
    Raises ConfigError naming the file and the key."""
    return PolicyControl(SQLitePolicyStore(store)).import_files(policies_dir, tenants_file)


def policy_from_file(path: Path) -> CompiledPolicy:
    """One policy file validated and compiled as the router imports it (`PolicyControl.import_file`:
    `parse_document`, with the file's name as the policy's); ConfigError names the file and the key."""
    compiled = parse_document("policy", path.read_text(encoding="utf-8"), str(path), name=path.stem).compiled
    if compiled is None:  # parse_document compiles every policy; None is for tenants documents only
        raise AssertionError(f"{path}: parse_document returned no compiled policy")
    return compiled


def open_control(tmp_path: Path, bounds: RollbackBounds = RollbackBounds()) -> tuple[PolicyControl, ConfigFiles]:
    """A PolicyControl over a fresh store, with `config_files` imported."""
    files = config_files(tmp_path)
    control = PolicyControl(SQLitePolicyStore(tmp_path / "store.sqlite"), default_bounds=bounds)
    control.import_files(files.policies_dir, files.tenants_file)
    return control, files


@dataclass
class AdminApi:
    """The PolicyAdmin API served in process: its client stub and what it changes."""

    stub: apb_grpc.PolicyAdminStub
    audit: AuditStore
    control: PolicyControl
    reviews: ReviewQueue
    #: host:port of the served API (for clients other than `stub`: the command line)
    address: str = ""
    #: The bank store image labels go to (None: the API was served without one).
    banks: BankStore | None = None


@contextlib.asynccontextmanager
async def admin_api(tmp_path: Path, keys: Sequence[AdminKey], *, with_banks: bool = True) -> AsyncIterator[AdminApi]:
    """`PolicyAdminServicer` on a loopback port over `open_control(tmp_path)` (tenants a and b, policies
    default@1 and strict@1), a fresh audit store, label store and (with `with_banks`) bank store, accepting
    `keys`; stopped and closed on exit."""
    control, _ = open_control(tmp_path)
    audit = AuditStore(tmp_path / "audit.sqlite")
    labels = LabelStore(tmp_path / "labels.sqlite")
    reviews = ReviewQueue(tmp_path / "review_tasks.sqlite")
    banks = BankStore(tmp_path / "banks.sqlite") if with_banks else None
    server = grpc.aio.server()
    apb_grpc.add_PolicyAdminServicer_to_server(PolicyAdminServicer(control, audit, AdminAuth(list(keys)), labels=labels,
                                                                   reviews=reviews, banks=banks, poll_s=0.02), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield AdminApi(apb_grpc.PolicyAdminStub(channel), audit, control, reviews, f"127.0.0.1:{port}", banks)
    finally:
        await server.stop(None)
        audit.close()
        labels.close()
        reviews.close()
        if banks is not None:
            banks.close()


def admin_key(value: str) -> list[tuple[str, str]]:
    """Call metadata presenting admin key `value`."""
    return [("x-admin-key", value)]


async def status_of(call: object) -> tuple[grpc.StatusCode, str]:
    """The status code and details a call that must fail ends with (AssertionError if it succeeds)."""
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or ""
    raise AssertionError("the call succeeded")


# --- auditmesh.client fakes (tests/unit/client): a scripted ModerateBatch sender.
class ScriptedBatchSend:
    """An `auditmesh.client.autobatch.BatchSend` that records each call's items and answers with
    `answer(items)` (default: "ok:<item>" per item); `gate`, when given, holds every call until set."""

    def __init__(self, answer: Callable[[Sequence[object]], Sequence[object]] | None = None,
                 gate: asyncio.Event | None = None) -> None:
        self.calls: list[list[object]] = []
        self.timeouts: list[float] = []
        self._answer = answer or (lambda items: [f"ok:{item}" for item in items])
        self._gate = gate

    async def __call__(self, key: str, items: Sequence[object], timeout_s: float, /) -> Sequence[object]:
        self.calls.append(list(items))
        self.timeouts.append(timeout_s)
        if self._gate is not None:
            await self._gate.wait()
        return self._answer(items)


class FakeStreamCall:
    """A grpc.aio stream-stream call for `auditmesh.client.chat` tests: records writes; `reply`
    feeds a response, `fail` ends the stream with an error, `end` with EOF."""

    def __init__(self) -> None:
        self.written: list[pb.ModerateRequest] = []
        self.done_writing_called = False
        self.cancelled = False
        self._responses: asyncio.Queue[object] = asyncio.Queue()

    async def write(self, request: pb.ModerateRequest) -> None:
        self.written.append(request)

    async def done_writing(self) -> None:
        self.done_writing_called = True

    async def read(self) -> object:
        response = await self._responses.get()
        if isinstance(response, BaseException):
            raise response
        return response

    def cancel(self) -> bool:
        self.cancelled = True
        return True

    def reply(self, request_id: str, *, decision: int = pb.ALLOW) -> None:
        self._responses.put_nowait(pb.ModerateResponse(request_id=request_id, decision=decision))

    def fail(self, error: BaseException) -> None:
        self._responses.put_nowait(error)

    def end(self) -> None:
        import grpc

        self._responses.put_nowait(grpc.aio.EOF)


class FakeStreamStub:
    """`ModerateStream(metadata=..., timeout=...)` returns `call` (a FakeStreamCall)."""

    def __init__(self, call: FakeStreamCall) -> None:
        self.call = call
        self.metadata: object = None

    def ModerateStream(self, *, metadata: object, timeout: float | None) -> FakeStreamCall:  # noqa: N802 - gRPC's name
        self.metadata = metadata
        return self.call


# --- Image bytes for decoder and vision tests.
def encode_image(image: Image.Image, fmt: str, **options: object) -> bytes:
    """`image` encoded as `fmt` (JPEG, PNG, WEBP...), with Pillow's save `options`."""
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def png_declaring(width: int, height: int) -> bytes:
    """A tiny 1-bit greyscale PNG whose header declares width x height (only one row of pixel data):
    a decompression-bomb probe that costs nothing to build."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    row = zlib.compress(b"\0" * (1 + (width + 7) // 8))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", row) + chunk(b"IEND", b"")


# --- Batching fakes (the batch loop's contract tests, the batcher's and the scheduler's) ----------------


@dataclass
class FakeClock:
    """A monotonic clock that moves only when told to (`advance`, or set `now`)."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class GatedBatchRun(Generic[V]):
    """A `run_batch` that records each batch's values, then waits for `release` (set at first) and
    'takes' `duration` on the fake clock; each result is `value * 10` (an int) or `str(value)`.
    `value_of` reads the value from what the batching front end hands over (a Job's payload, say).

    Example::

        run = GatedBatchRun(clock, value_of=lambda job: job.payload)
        run.release.clear()         # batches now wait inside run_batch until release.set()
    """

    def __init__(self, clock: FakeClock, *, value_of: Callable[[Any], V], duration: float = 0.01) -> None:
        self.clock, self.duration, self.value_of = clock, duration, value_of
        self.batches: list[list[V]] = []
        self.release = asyncio.Event()
        self.release.set()

    async def __call__(self, entries: Sequence[Any]) -> list[Any]:
        values = [self.value_of(entry) for entry in entries]
        self.batches.append(values)
        await self.release.wait()
        await asyncio.sleep(0)  # a batch takes at least one step of the event loop, as a real one does
        self.clock.advance(self.duration)
        return [value * 10 if isinstance(value, int) else str(value) for value in values]


async def settle(rounds: int = 8) -> None:
    """Let every ready task run a few steps (no time passes; the batching tests' only way to wait)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


class MeshTritonClient:
    """tritonclient's (sync or aio) KServe client that sends the mesh's internal secret on every call
    (`Mesh.internal_metadata()`: the modality ports need it, services/common/internal_auth.py).

    Example::

        client = MeshTritonClient(triton.InferenceServerClient(mesh.address("text")), mesh.internal_metadata())
        client.infer("text_moderation", [tensor])
    """

    def __init__(self, client: Any, metadata: Sequence[tuple[str, str]]) -> None:
        self._client = client
        self._headers = dict(metadata)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name == "close" or not callable(attribute):
            return attribute
        return functools.partial(attribute, headers=self._headers)


@functools.lru_cache(maxsize=1)
def default_lexicon() -> Lexicon:
    """The shipped default lexicon, built once per test run (a build takes 1-3 s; it is immutable, so
    every test may share it). A test of loading itself calls `Lexicon.load` directly."""
    return Lexicon.load()


class WordHashEncoder:
    """A stand-in sentence encoder for trainer unit tests: each word adds a fixed random unit vector
    (seeded by the word's SHA-256), so texts sharing words are near; [N, 512] unit rows like USE's."""

    def __init__(self, dimension: int = 512) -> None:
        self.dimension = dimension
        self.calls: list[int] = []

    def _word(self, word: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(word.encode("utf-8")).digest()[:8], "big")
        return np.random.default_rng(seed).standard_normal(self.dimension)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self.dimension), np.float32)
        for row, text in enumerate(texts):
            for word in text.split() or [text]:
                out[row] += self._word(word)
            out[row] /= max(float(np.linalg.norm(out[row])), 1e-9)
        return out


def text_row(text: str) -> dict[str, np.ndarray]:
    """The text model's answer row for a fake upstream: its harassment score is the number after "=" in
    `text` ("score=0.9"), every other score 0, no matches or evidence, model text_moderation@1."""
    from services.router.dispatch import MODELS_OUTPUT
    score = float(text.split("=")[1]) if "=" in text else 0.0
    row: dict[str, np.ndarray] = {name: np.array([score if category == "harassment" else 0.0], np.float32)
                                  for name, category in text_contract.SCORE_OUTPUTS.items()}
    row.update({text_contract.MATCHES: np.array([b"[]"], object), text_contract.EVIDENCE: np.array([b"[]"], object),
                text_contract.TARGET: np.array([0.0], np.float32),
                **{name: np.array([0.0], np.float32) for name in text_contract.SUBCATEGORY_OUTPUTS},
                MODELS_OUTPUT: np.array([json.dumps([["text_moderation", "1"]])], object)})
    return row

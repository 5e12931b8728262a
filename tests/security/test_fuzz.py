"""Seeded fuzzing of the real router and the real text service (issue 12, "Proof"): a few thousand
malformed messages (random bytes, truncated and garbled protobufs, huge fields, invalid UTF-8, odd
tensor shapes) must never be answered UNKNOWN or INTERNAL (a bug), and both services must be alive
and answer correctly afterwards. Derandomised: the same messages every run."""

from __future__ import annotations

import struct

import grpc
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tritonclient.grpc import service_pb2

from tests.security.inputs import KEY, MODEL_INFER, MODERATE, MODERATE_BATCH, auth, raw_unary
from tests.stubs import item

BUGS = (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)
def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None, print_blob=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.large_base_example])

texts = st.one_of(st.text(max_size=40), st.integers(20_001, 40_000).map(lambda n: "é" * n),
                  st.sampled_from(["", "   ", "you are a worthless idiot", "\u202e\u0000\ud7ff", "傻逼" * 3]))
images = st.one_of(st.binary(max_size=64), st.sampled_from([b"\x89PNG\r\n\x1a\n" + b"\0" * 30, b"\xff\xd8\xff" + b"\0" * 20]))
parts = st.lists(st.one_of(texts.map(lambda t: pb.Part(text=t)), images.map(lambda b: pb.Part(image=pb.Image(data=b))),
                           st.just(pb.Part())), max_size=20)
items = st.builds(lambda i, p, m: pb.Item(id=i, parts=p, metadata=m), st.text(max_size=140), parts,
                  st.dictionaries(st.text(max_size=70), st.text(max_size=40), max_size=40))
requests = st.builds(lambda r, i, p, d: pb.ModerateRequest(request_id=r, item=i, policy=p, deadline_ms=d),
                     st.text(max_size=20), items, st.sampled_from(["", "default", "strict", "nope", "x" * 5000]),
                     st.integers(0, 5000))


def corrupt(data: bytes, draw: st.DrawFn) -> bytes:
    """A valid encoding cut short, with bytes flipped, or with invalid UTF-8 spliced into it."""
    how = draw(st.sampled_from(["truncate", "flip", "splice", "append"]))
    if how == "truncate" and data:
        return data[:draw(st.integers(0, len(data) - 1))]
    if how == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        return data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:]
    if how == "splice":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.sampled_from([b"\x0a\x02\xff\xfe", b"\x1a\x03\xc3\x28\x00", b"\xff"])) + data[at:]
    return data + draw(st.binary(min_size=1, max_size=16))


@st.composite
def moderation_bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["random", "valid", "corrupt", "corrupt", "batch"]))
    if kind == "random":
        return draw(st.binary(max_size=512))
    if kind == "batch":
        return bytes(pb.ModerateBatchRequest(items=draw(st.lists(items, max_size=4))).SerializeToString())
    encoded = bytes(draw(requests).SerializeToString())
    return encoded if kind == "valid" else corrupt(encoded, draw)


@st.composite
def infer_bodies(draw: st.DrawFn) -> bytes:
    request = service_pb2.ModelInferRequest(model_name=draw(st.sampled_from(["text_moderation", "", "nope"])))
    for _ in range(draw(st.integers(0, 2))):
        shape = draw(st.lists(st.integers(-3, 2**40), min_size=0, max_size=3))
        request.inputs.add(name=draw(st.sampled_from(["TEXT", "IMAGE", ""])),
                           datatype=draw(st.sampled_from(["BYTES", "FP32", "INT64", "nope"])), shape=shape)
        rows = draw(st.lists(st.binary(max_size=draw(st.sampled_from([16, 200_000]))), max_size=4))
        raw = b"".join(struct.pack("<I", len(r)) + r for r in rows)
        request.raw_input_contents.append(draw(st.sampled_from([raw, raw[:-1], raw + b"\x01", b""])))
    encoded = bytes(request.SerializeToString())
    return encoded if draw(st.booleans()) else corrupt(encoded, draw)


def outcome(call: grpc.UnaryUnaryMultiCallable, body: bytes, metadata: list[tuple[str, str]] | None) -> grpc.StatusCode:
    try:
        call(body, metadata=metadata, timeout=15)
    except grpc.RpcError as error:
        return error.code()
    return grpc.StatusCode.OK


def test_fuzzed_moderation_calls_never_hit_a_bug(router_channel: grpc.Channel) -> None:
    moderate, batch = raw_unary(router_channel, MODERATE), raw_unary(router_channel, MODERATE_BATCH)

    @fuzz(1800)
    # Mostly with a valid key (so the bodies reach validation); a keyless call is UNAUTHENTICATED and,
    # not being a guess, never trips the failed-auth throttle. Never a wrong key: that would.
    @given(body=moderation_bodies(), as_batch=st.booleans(), keyed=st.sampled_from([True, True, True, False]))
    def check(body: bytes, as_batch: bool, keyed: bool) -> None:
        code = outcome(batch if as_batch else moderate, body, auth(KEY) if keyed else None)
        assert code not in BUGS, (code, body[:64])

    check()
    assert_router_alive_and_right(router_channel)


def test_fuzzed_model_infer_calls_never_hit_a_bug(text_channel: grpc.Channel, router_channel: grpc.Channel) -> None:
    infer = raw_unary(text_channel, MODEL_INFER)

    @fuzz(1200)
    @given(body=infer_bodies())
    def check(body: bytes) -> None:
        code = outcome(infer, body, None)
        assert code not in BUGS, (code, body[:64])

    check()
    health = health_pb2_grpc.HealthStub(text_channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    assert_router_alive_and_right(router_channel)


def assert_router_alive_and_right(channel: grpc.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    stub = pb_grpc.ModerationServiceStub(channel)
    for text, decision in [("see you at the match on sunday", pb.ALLOW), ("you are a worthless idiot", pb.BLOCK)]:
        response = stub.Moderate(pb.ModerateRequest(request_id="after", item=item(text)), metadata=auth(KEY), timeout=30)
        assert response.decision == decision and not response.degraded, response

"""Inputs the security tests send: their tenant's key, items, padded images, raw (unserialised) calls."""

from __future__ import annotations

import io
import struct
import zlib

import grpc
from PIL import Image

from bench.render import render_text_image
from tests.mesh_fixtures import message_options

#: The API key of the security suite's one tenant (tests/security/conftest.py writes its tenants file).
KEY = "test-key-security"
#: Channels of the tests may send and receive more than the router accepts (64 MiB), so the services'
#: own limits are what is tested, not the client's.
CHANNEL_OPTIONS = message_options(80 << 20)

MODERATE = "/auditmesh.v1.ModerationService/Moderate"
MODERATE_BATCH = "/auditmesh.v1.ModerationService/ModerateBatch"
MODERATE_STREAM = "/auditmesh.v1.ModerationService/ModerateStream"
MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def padded_png(lines: list[str], total_bytes: int) -> bytes:
    """A valid PNG showing `lines` whose file is `total_bytes` long: the rest is a private ancillary
    chunk (`auPd`), which decoders skip. A big upload as far as every byte limit is concerned, cheap
    to decode."""
    small = render_text_image(lines)
    head, tail = small[:-12], small[-12:]  # IEND is the last 12 bytes
    padding = total_bytes - len(small) - 12
    if padding < 0:
        raise ValueError(f"{total_bytes} bytes is smaller than the image itself ({len(small)})")
    return head + png_chunk(b"auPd", b"\0" * padding) + tail


def plain_png(size: tuple[int, int] = (64, 48)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 210, 220)).save(buffer, format="PNG")
    return buffer.getvalue()


def raw_unary(channel: grpc.Channel, method: str) -> grpc.UnaryUnaryMultiCallable:
    """A unary call that sends bytes as they are (no serialiser) and returns the response bytes."""
    return channel.unary_unary(method, request_serializer=None, response_deserializer=None)


def auth(key: str) -> list[tuple[str, str]]:
    return [("x-api-key", key)]

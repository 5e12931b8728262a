"""Issue 12 item 5: TLS and mTLS did not exist. A TLS listener (public port), mTLS between the router's
upstream client and a modality service, and certificate files re-read when they change, all with
certificates this test makes (services/common/tls_certs.py, the `cryptography` package)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import AsyncIterator

import grpc
import pytest
from auditmesh.v1 import moderation_pb2 as pb
from auditmesh.v1 import moderation_pb2_grpc as pb_grpc
from grpc_health.v1 import health as health_service
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.config import ConfigError
from services.common.grpc_server import GrpcService
from services.common.internal_auth import InternalCredentials, SharedSecret
from services.common.service_config import ServerConfig
from services.common.serving.modality_config import ModalityServiceConfig
from services.common.serving.modality_main import build_service
from services.common.tls import channel_credentials, server_credentials
from services.common.tls_certs import Authority, issue, make_ca, write_mesh_certificates
from services.common.tls_config import ClientTlsConfig, ServerTlsConfig
from services.router.upstream_client import UpstreamClient, UpstreamSecurity
from tests.stubs import GatedModel

SECRET = "service-secret-0123456789"


def write_pair(folder: Path, ca: Authority, name: str) -> tuple[str, str]:
    cert, key = issue(ca, name)
    (folder / f"{name}.crt").write_bytes(cert)
    (folder / f"{name}.key").write_bytes(key)
    return str(folder / f"{name}.crt"), str(folder / f"{name}.key")


def write_ca(folder: Path, ca: Authority, name: str = "ca") -> str:
    (folder / f"{name}.crt").write_bytes(ca.certificate_pem)
    return str(folder / f"{name}.crt")


async def health(address: str, credentials: grpc.ChannelCredentials | None) -> bool:
    """True when a health check over a new channel succeeds."""
    channel = (grpc.aio.secure_channel(address, credentials) if credentials is not None
               else grpc.aio.insecure_channel(address))
    async with channel:
        try:
            await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
            return True
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.UNAVAILABLE, error
            return False


@contextlib.asynccontextmanager
async def serving(name: str, tls: ServerTlsConfig) -> AsyncIterator[str]:
    """A `GrpcService` with only the health service, listening with `tls`; yields its address."""
    service = GrpcService(name, ServerConfig("127.0.0.1:0", grace_period_s=0.1, tls=tls),
                          service_names=[], register=lambda server: None)
    port = await service.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await service.stop()


async def test_a_tls_listener_refuses_plaintext_and_serves_tls(tmp_path: Path) -> None:
    ca = make_ca()
    cert, key = write_pair(tmp_path, ca, "router")
    async with serving("router", ServerTlsConfig(cert, key)) as address:
        assert await health(address, channel_credentials(ClientTlsConfig(write_ca(tmp_path, ca))))
        assert not await health(address, None)
        other = make_ca("someone else")  # a client that trusts another CA refuses this server
        assert not await health(address, channel_credentials(ClientTlsConfig(write_ca(tmp_path, other, "other"))))


async def test_mtls_needs_a_client_certificate_from_the_mesh_ca(tmp_path: Path) -> None:
    ca = make_ca()
    cert, key = write_pair(tmp_path, ca, "text")
    client_cert, client_key = write_pair(tmp_path, ca, "router")
    ca_file = write_ca(tmp_path, ca)
    stranger = make_ca("stranger")
    stranger_cert, stranger_key = write_pair(tmp_path, stranger, "intruder")
    async with serving("text", ServerTlsConfig(cert, key, client_ca_file=ca_file)) as address:
        assert await health(address, channel_credentials(ClientTlsConfig(ca_file, client_cert, client_key)))
        assert not await health(address, channel_credentials(ClientTlsConfig(ca_file)))
        assert not await health(address, channel_credentials(ClientTlsConfig(ca_file, stranger_cert, stranger_key)))


async def test_the_router_reaches_a_modality_service_over_mtls_with_the_secret(tmp_path: Path) -> None:
    ca = make_ca()
    cert, key = write_pair(tmp_path, ca, "text")
    client_cert, client_key = write_pair(tmp_path, ca, "router")
    ca_file = write_ca(tmp_path, ca)
    config = ModalityServiceConfig("text", ServerConfig("127.0.0.1:0", grace_period_s=0.1,
                                                        tls=ServerTlsConfig(cert, key, client_ca_file=ca_file)))
    service, _ = build_service(config, [GatedModel()], credentials=InternalCredentials(SharedSecret(SECRET), None))
    port = await service.start()
    client = UpstreamClient(f"127.0.0.1:{port}", channel_args=[],
                            security=UpstreamSecurity(SECRET, ClientTlsConfig(ca_file, client_cert, client_key)))
    try:
        assert (await client.get_model_config("gated", client_timeout=5)).config.name == "gated"
    finally:
        await client.close()
        await service.stop()


async def test_rotated_certificate_files_are_used_by_new_connections(tmp_path: Path) -> None:
    old_ca, new_ca = make_ca("old CA"), make_ca("new CA")
    cert, key = write_pair(tmp_path, old_ca, "router")
    old_trust, new_trust = write_ca(tmp_path, old_ca, "old"), write_ca(tmp_path, new_ca, "new")
    tls = ServerTlsConfig(cert, key)
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health_service.aio.HealthServicer(), server)
    port = server.add_secure_port("127.0.0.1:0", server_credentials(tls, check_interval_s=0.0))
    await server.start()
    address = f"127.0.0.1:{port}"
    try:
        assert await health(address, channel_credentials(ClientTlsConfig(old_trust)))
        assert not await health(address, channel_credentials(ClientTlsConfig(new_trust)))
        # Half-written rotation (the new certificate, the old key): ignored, the old pair stays in use.
        new_cert, new_key = issue(new_ca, "router")
        Path(cert).write_bytes(new_cert)
        bump(cert)
        assert await health(address, channel_credentials(ClientTlsConfig(old_trust)))
        Path(key).write_bytes(new_key)
        bump(key)
        assert await health(address, channel_credentials(ClientTlsConfig(new_trust)))
        assert not await health(address, channel_credentials(ClientTlsConfig(old_trust)))
    finally:
        await server.stop(None)


def bump(path: str) -> None:
    """Move the file's mtime forward (a rotation within one mtime tick must still be seen)."""
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_unusable_certificate_files_fail_at_start_naming_the_setting(tmp_path: Path) -> None:
    ca = make_ca()
    cert, _ = write_pair(tmp_path, ca, "a")
    _, other_key = write_pair(tmp_path, ca, "b")
    with pytest.raises(ConfigError, match="not a certificate and its key"):
        server_credentials(ServerTlsConfig(cert, other_key), source="config/router.yaml")
    with pytest.raises(ConfigError, match="cannot read"):
        channel_credentials(ClientTlsConfig(str(tmp_path / "missing.crt")))
    with pytest.raises(ValueError, match="cert_file and key_file"):
        ClientTlsConfig("ca.crt", cert_file="x.crt")


def test_certificate_keys_are_written_owner_only(tmp_path: Path) -> None:
    write_mesh_certificates(tmp_path / "tls", ["router", "text"])
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "tls").iterdir()}
    assert modes["router.key"] == modes["text.key"] == modes["ca.key"] == 0o600


class _FixedModeration(pb_grpc.ModerationServiceServicer):
    """A ModerationService that answers every Moderate with ALLOW (what the client library reaches over TLS)."""

    async def Moderate(self, request: pb.ModerateRequest, context: grpc.aio.ServicerContext) -> pb.ModerateResponse:
        return pb.ModerateResponse(item_id=request.item.id, decision=pb.ALLOW)


@contextlib.asynccontextmanager
async def moderation_over(tls: ServerTlsConfig) -> AsyncIterator[str]:
    service = GrpcService("router", ServerConfig("127.0.0.1:0", grace_period_s=0.1, tls=tls), service_names=[],
                          register=lambda server: pb_grpc.add_ModerationServiceServicer_to_server(_FixedModeration(),
                                                                                                  server))
    port = await service.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await service.stop()


async def test_the_client_library_reaches_a_tls_router_and_presents_its_certificate_for_mtls(tmp_path: Path) -> None:
    from auditmesh.client import AsyncClient, ClientTls, ModerationError

    ca = make_ca()
    cert, key = write_pair(tmp_path, ca, "router")
    client_cert, client_key = write_pair(tmp_path, ca, "platform")
    ca_file = write_ca(tmp_path, ca)
    async with moderation_over(ServerTlsConfig(cert, key, client_ca_file=ca_file)) as address:
        async with AsyncClient(address, api_key="k", batching=False, timeout_s=5,
                               tls=ClientTls(ca_file, client_cert, client_key)) as client:
            assert (await client.moderate("hello")).decision == "allow"
        # the certificate names "router" and 127.0.0.1; a name override checks it against another name
        async with AsyncClient(address, api_key="k", batching=False, timeout_s=5,
                               tls=ClientTls(ca_file, client_cert, client_key, server_name="router")) as client:
            assert (await client.moderate("hello")).decision == "allow"
        for refused in (None, ClientTls(ca_file), ClientTls(write_ca(tmp_path, make_ca("other"), "other"), client_cert,
                                                              client_key)):
            async with AsyncClient(address, api_key="k", batching=False, timeout_s=2, tls=refused) as client:
                with pytest.raises(ModerationError) as failed:
                    await client.moderate("hello")
                assert failed.value.code == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(ValueError, match="tls.ca_file: cannot read /nonexistent/ca.crt"):
        ClientTls("/nonexistent/ca.crt").credentials()


async def test_the_command_line_moderates_over_tls_and_names_a_missing_file(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio
    import json

    from services.cli import main

    ca = make_ca()
    cert, key = write_pair(tmp_path, ca, "router")
    ca_file = write_ca(tmp_path, ca)
    async with moderation_over(ServerTlsConfig(cert, key)) as address:
        common = ["moderate", "--router", address, "--tenant-key", "k", "--text", "hi", "--json", "--timeout", "5"]
        assert await asyncio.to_thread(main, [*common, "--tls-ca", ca_file]) == 0
        assert json.loads(capsys.readouterr().out)["decision"] == "ALLOW"
        assert await asyncio.to_thread(main, common) == 1  # plaintext to a TLS port
        assert "UNAVAILABLE" in capsys.readouterr().err
    assert await asyncio.to_thread(main, ["moderate", "--text", "hi", "--tenant-key", "k", "--tls-ca",
                                          str(tmp_path / "missing.crt")]) == 2
    assert "tls.ca_file: cannot read" in capsys.readouterr().err
    assert await asyncio.to_thread(main, ["labels", "delete", "m-1", "--tenant", "a", "--admin-key", "x",
                                          "--tls-cert", cert]) == 2
    assert "cert_file and key_file go together" in capsys.readouterr().err

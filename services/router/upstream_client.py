"""The router's KServe v2 client to one upstream (tritonclient.grpc.aio), with its calls traced one by one.

With tracing on, every grpc.aio channel the router opens is instrumented: the client instrumentor
(`services.common.tracing.telemetry`) adds the opentelemetry-instrumentation-grpc interceptors, and grpc.aio
runs the interceptors of each call in an extra task. At 1% sampling that task is most of what tracing
would cost the router per upstream call, for the 99% of calls that record nothing. So an
`UpstreamClient`'s channel is made without interceptors, and its `ModelInfer` calls go through the same
client interceptor in the caller's task (`telemetry.traced_unary_unary`): a call under an unsampled
span carries the propagation headers (W3C `traceparent`, flag "not sampled") so the upstream follows
the decision; a sampled call gets the library's CLIENT span, whose context the upstream continues; a
call outside any trace context (requests whose new trace the sampler dropped) goes out untouched, and
the upstream, which starts no traces of its own, does not trace it. While tracing is off nothing is
wrapped.

Security (`UpstreamSecurity`, from `internal:` in config/router.yaml): every call carries the mesh's
shared secret in the `x-auditmesh-internal-key` metadata header (services/common/internal_auth.py),
and with `internal.tls` the channel is TLS, presenting the router's client certificate (mTLS). When
the certificate files change, the next call opens a new channel with them (the previous channel is
closed at the following change or at `close`, so calls in flight on it finish).

Example::

    client = UpstreamClient("127.0.0.1:8101", channel_args=[("grpc.dscp", 46)])
    with batch_span(...):                       # the batch's context: sampled or not
        result = await client.infer("text_moderation", [tensor], outputs=outputs, client_timeout=1.0)
    await client.close()
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import tritonclient.grpc.aio as triton_aio

from services.common.config import ConfigError
from services.common.internal_auth import ENV_SECRET, ENV_SECRET_FILE, SECRET_HEADER, secret_value
from services.common.tls import CertificateFiles, channel_credentials, channel_options
from services.common.tls_config import ClientTlsConfig
from services.common.tracing.telemetry import traced_unary_unary, uninstrumented_channels

MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UpstreamSecurity:
    """What the router presents to the modality services: the shared secret and the TLS settings."""

    secret: str | None = None
    tls: ClientTlsConfig | None = None

    @classmethod
    def load(cls, secret_file: str, tls: ClientTlsConfig | None, env: Mapping[str, str], source: str) -> UpstreamSecurity:
        """The secret from AUDITMESH_INTERNAL_SECRET, else AUDITMESH_INTERNAL_SECRET_FILE, else `secret_file`."""
        if tls is not None:
            channel_credentials(tls, source=source)  # ConfigError now, at start, for unusable files
        return cls(secret_value(env.get(ENV_SECRET, ""), env.get(ENV_SECRET_FILE) or secret_file, source,
                                "internal.secret_file"), tls)

    def __repr__(self) -> str:  # never print the secret
        return f"UpstreamSecurity(secret={'<set>' if self.secret else None}, tls={self.tls!r})"

    @property
    def headers(self) -> dict[str, str] | None:
        return {SECRET_HEADER: self.secret} if self.secret else None


class UpstreamClient:
    """See the module docstring: tritonclient's aio client, its `infer` calls traced per call."""

    def __init__(self, url: str, *, channel_args: Sequence[tuple[str, Any]],
                 security: UpstreamSecurity = UpstreamSecurity()) -> None:
        self.url = url
        self.security = security
        self._channel_args = [*channel_args, *channel_options(security.tls)]
        self._files = (CertificateFiles([security.tls.ca_file, security.tls.cert_file, security.tls.key_file])
                       if security.tls is not None else None)
        self._retired: Any = None
        self.client = self._open()

    def _open(self) -> Any:
        tls = self.security.tls
        credentials = channel_credentials(tls) if tls is not None else None
        with uninstrumented_channels():
            client = triton_aio.InferenceServerClient(self.url, channel_args=self._channel_args, creds=credentials)
        stub: Any = client._client_stub  # tritonclient keeps its generated stub here; infer() calls its ModelInfer
        stub.ModelInfer = traced_unary_unary(stub.ModelInfer, MODEL_INFER)
        return client

    async def _current(self) -> Any:
        """The client, reopened first when the TLS files changed."""
        if self._files is not None and self._files.changed():
            try:
                fresh = self._open()
            except ConfigError as error:  # caught mid-rotation (key and certificate do not match yet)
                log.warning("upstream %s: TLS files changed but cannot be used yet; keeping the current channel: %s",
                            self.url, error)
                self._files.retry_later()
                return self.client
            if self._retired is not None:
                await self._retired.close()
            self._retired, self.client = self.client, fresh
            log.info("upstream %s: TLS files changed; new calls use a channel with the new certificate", self.url)
        return self.client

    async def infer(self, model_name: str, inputs: Sequence[Any], **options: Any) -> Any:
        """`InferenceServerClient.infer`, with the shared secret."""
        client = await self._current()
        return await client.infer(model_name, inputs, headers=self.security.headers, **options)

    async def get_model_config(self, model_name: str, model_version: str = "", **options: Any) -> Any:
        client = await self._current()
        return await client.get_model_config(model_name, model_version, headers=self.security.headers, **options)

    async def close(self) -> None:
        if self._retired is not None:
            await self._retired.close()
        await self.client.close()

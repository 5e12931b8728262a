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

Example::

    client = UpstreamClient("127.0.0.1:8101", channel_args=[("grpc.dscp", 46)])
    with batch_span(...):                       # the batch's context: sampled or not
        result = await client.infer("text_moderation", [tensor], outputs=outputs, client_timeout=1.0)
    await client.close()
"""

from __future__ import annotations

from typing import Any, Sequence

import tritonclient.grpc.aio as triton_aio

from services.common.tracing.telemetry import traced_unary_unary, uninstrumented_channels

MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"


class UpstreamClient:
    """See the module docstring: tritonclient's aio client, its `infer` calls traced per call."""

    def __init__(self, url: str, *, channel_args: Sequence[tuple[str, Any]]) -> None:
        with uninstrumented_channels():
            self.client = triton_aio.InferenceServerClient(url, channel_args=list(channel_args))
        stub: Any = self.client._client_stub  # tritonclient keeps its generated stub here; infer() calls its ModelInfer
        stub.ModelInfer = traced_unary_unary(stub.ModelInfer, MODEL_INFER)

    async def infer(self, model_name: str, inputs: Sequence[Any], **options: Any) -> Any:
        """`InferenceServerClient.infer`."""
        return await self.client.infer(model_name, inputs, **options)

    async def get_model_config(self, model_name: str, model_version: str = "", **options: Any) -> Any:
        return await self.client.get_model_config(model_name, model_version, **options)

    async def close(self) -> None:
        await self.client.close()

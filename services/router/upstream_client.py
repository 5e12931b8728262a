"""The router's KServe v2 client to one upstream (tritonclient.grpc.aio), on two channels while tracing is on.

With tracing on, every grpc.aio channel the router opens is instrumented: the client instrumentor
(`services.common.telemetry`) adds the opentelemetry-instrumentation-grpc interceptors, and grpc.aio
runs the interceptors of each call in an extra task. At 1% sampling that task is most of what tracing
costs the router per upstream call, for the 99% of calls that record nothing. So an `UpstreamClient`
holds a second client on an uninstrumented channel: a call under an unsampled span goes there with the
propagation headers (`telemetry.unsampled_headers`: W3C `traceparent`, flag "not sampled") in its
metadata, so the upstream still follows the decision; every other call (sampled, or outside any span)
goes through the instrumented channel, where the library starts the call's CLIENT span and injects its
context. While tracing is off there is one channel.

Example::

    client = UpstreamClient("127.0.0.1:8101", channel_args=[("grpc.dscp", 46)])
    with batch_span(...):                       # the batch's context: sampled or not
        result = await client.infer("text_moderation", [tensor], outputs=outputs, client_timeout=1.0)
    await client.close()
"""

from __future__ import annotations

from typing import Any, Sequence

import tritonclient.grpc.aio as triton_aio

from services.common.telemetry import tracing_enabled, uninstrumented_channels, unsampled_headers


class UpstreamClient:
    """See the module docstring. `infer` routes by sampling; the other calls use the instrumented channel."""

    def __init__(self, url: str, *, channel_args: Sequence[tuple[str, Any]]) -> None:
        self.traced = triton_aio.InferenceServerClient(url, channel_args=list(channel_args))
        self._plain: Any = None
        if tracing_enabled():
            with uninstrumented_channels():
                self._plain = triton_aio.InferenceServerClient(url, channel_args=list(channel_args))

    async def infer(self, model_name: str, inputs: Sequence[Any], **options: Any) -> Any:
        """`InferenceServerClient.infer`, on the channel that fits the current span (see the module docstring)."""
        plain = self._plain
        headers = unsampled_headers() if plain is not None else None
        if plain is None or headers is None:
            return await self.traced.infer(model_name, inputs, **options)
        return await plain.infer(model_name, inputs, headers={**(options.pop("headers", None) or {}), **headers},
                                 **options)

    async def get_model_config(self, model_name: str, model_version: str = "", **options: Any) -> Any:
        return await self.traced.get_model_config(model_name, model_version, **options)

    async def close(self) -> None:
        await self.traced.close()
        if self._plain is not None:
            await self._plain.close()

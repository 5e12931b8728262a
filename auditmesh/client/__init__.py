"""auditmesh.client: the Python client of the auditmesh router (auditmesh.v1.ModerationService).

* `AsyncClient` (asyncio / grpc.aio) and `Client` (blocking, thread-safe): `moderate(text=..., images=...)`,
  `moderate_many(items)` and `chat()` over ModerateStream.
* Concurrent single-item calls are batched automatically (`linger_ms`, `max_batch_items`), like a
  Kafka producer: each caller still gets its own `Verdict` or `ModerationError`.
* Retries honour the router's google.rpc.RetryInfo and back off with jitter on RESOURCE_EXHAUSTED /
  UNAVAILABLE / CANCELLED, within each call's deadline; calls go round robin over several routers.
* The API key is an argument or $AUDITMESH_API_KEY.

Example::

    from auditmesh.client import Client

    with Client(["127.0.0.1:8100"], api_key="...") as client:
        print(client.moderate(text="have a nice day").decision)   # "allow"
"""

from auditmesh.client.aio import AsyncClient
from auditmesh.client.chat import AsyncChat, ChatReply
from auditmesh.client.errors import ClientClosedError, ModerationError
from auditmesh.client.items import CategoryScore, Item, Verdict
from auditmesh.client.retry import RetryPolicy
from auditmesh.client.settings import API_KEY_ENV, ClientConfig, ClientTls
from auditmesh.client.sync import Chat, Client

__all__ = ["API_KEY_ENV", "AsyncChat", "AsyncClient", "CategoryScore", "Chat", "ChatReply", "Client", "ClientClosedError",
           "ClientConfig", "ClientTls", "Item", "ModerationError", "RetryPolicy", "Verdict"]

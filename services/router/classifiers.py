"""The dispatchers of tenants' own classifiers: `classifier.<tenant>` on the text upstream, one per tenant,
made the first time a policy that reads it moderates that tenant's item (issue 40; docs/tenant-classifiers.md).

Each gets its own fair queue and batches, like the text models (one KServe model per dispatcher). Tenants
are the router's authenticated tenants, so the number of dispatchers is bounded by the tenants file; a
tenant id that cannot name a model is refused with ValueError (the pipeline reports a stage failure).

Example::

    classifiers = TenantClassifiers(text_upstream, make=lambda name, upstream: ModalityDispatcher(...))
    dispatcher = classifiers("acme")   # classifier.acme on the text service
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from services.common.contracts import classifier as contract
from services.router.config import Upstream
from services.router.dispatch import ModalityDispatcher

#: The dispatchers' name (metrics label, stage failures): one for every tenant's classifier.
MODALITY = "classifier"


class TenantClassifiers:
    """Tenant id -> the started dispatcher of its classifier (see the module docstring)."""

    def __init__(self, text: Upstream, make: Callable[[str, Upstream], ModalityDispatcher]) -> None:
        """`text`: the text upstream (the classifiers are served beside its models); `make(name, upstream)`
        builds a dispatcher with the router's settings."""
        self._text = text
        self._make = make
        self._by_tenant: dict[str, ModalityDispatcher] = {}

    def __call__(self, tenant: str) -> ModalityDispatcher:
        """The dispatcher of `tenant`'s classifier, started on first use (call on the event loop)."""
        dispatcher = self._by_tenant.get(tenant)
        if dispatcher is None:
            upstream = replace(self._text, model=contract.model_name(tenant), model_version="", semantic_model="")
            dispatcher = self._make(MODALITY, upstream)
            dispatcher.start()
            self._by_tenant[tenant] = dispatcher
        return dispatcher

    def __len__(self) -> int:
        return len(self._by_tenant)

    async def close(self) -> None:
        """Close every dispatcher made so far."""
        dispatchers, self._by_tenant = list(self._by_tenant.values()), {}
        for dispatcher in dispatchers:
            await dispatcher.close()

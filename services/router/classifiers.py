"""The dispatchers of tenants' own classifiers: `classifier.<tenant>.<version>` on the text upstream, one per
tenant and version, made the first time a policy that reads it moderates that tenant's item (issue 40;
docs/tenant-classifiers.md).

Each gets its own fair queue and batches, like the text models (one KServe model per dispatcher). Tenants
are the router's authenticated tenants and versions come from stored policy versions, so the number of
dispatchers is bounded by what the admins stored (at most `MAX_DISPATCHERS`; beyond, the least recently
used is closed); an id or version that cannot name a model is refused with ValueError (the pipeline
reports a stage failure).

Example::

    classifiers = TenantClassifiers(text_upstream, make=lambda name, upstream: ModalityDispatcher(...))
    dispatcher = classifiers("acme", "68b7e413a4f1")   # classifier.acme.68b7e413a4f1 on the text service
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import replace
from typing import Callable

from services.common.contracts import classifier as contract
from services.router.config import Upstream
from services.router.dispatch import ModalityDispatcher

#: The dispatchers' name (metrics label, stage failures): one for every tenant's classifier.
MODALITY = "classifier"
#: Dispatchers kept at most (each holds a queue and channels); the least recently used one beyond is closed.
MAX_DISPATCHERS = 256


class TenantClassifiers:
    """Tenant id -> the started dispatcher of its classifier (see the module docstring)."""

    def __init__(self, text: Upstream, make: Callable[[str, Upstream], ModalityDispatcher]) -> None:
        """`text`: the text upstream (the classifiers are served beside its models); `make(name, upstream)`
        builds a dispatcher with the router's settings."""
        self._text = text
        self._make = make
        self._by_model: OrderedDict[str, ModalityDispatcher] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()
        #: Items shed by dispatchers closed since (so the total never goes down).
        self._shed_before = 0

    def __call__(self, tenant: str, version: str) -> ModalityDispatcher:
        """The dispatcher of `tenant`'s classifier at `version`, started on first use (call on the event loop)."""
        name = contract.model_name(tenant, version)
        dispatcher = self._by_model.get(name)
        if dispatcher is None:
            upstream = replace(self._text, model=name, model_version=version, semantic_model="")
            dispatcher = self._make(MODALITY, upstream)
            dispatcher.start()
            self._by_model[name] = dispatcher
            if len(self._by_model) > MAX_DISPATCHERS:
                _, oldest = self._by_model.popitem(last=False)
                self._shed_before += oldest.scheduler.shed_count
                task = asyncio.get_running_loop().create_task(oldest.close())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
        self._by_model.move_to_end(name)
        return dispatcher

    def __len__(self) -> int:
        return len(self._by_model)

    @property
    def queue_depth(self) -> int:
        """Items queued for every tenant classifier (metrics: one `classifier` upstream, whatever the tenants)."""
        return sum(d.scheduler.queue_depth for d in self._by_model.values())

    @property
    def shed_count(self) -> int:
        """Items every tenant classifier's scheduler shed so far."""
        return self._shed_before + sum(d.scheduler.shed_count for d in self._by_model.values())

    async def close(self) -> None:
        """Close every dispatcher made so far."""
        dispatchers, self._by_model = list(self._by_model.values()), OrderedDict()
        for dispatcher in dispatchers:
            await dispatcher.close()
        await asyncio.gather(*self._closing, return_exceptions=True)

"""auditmesh: a real-time, multi-tenant, multimodal content-moderation inference mesh."""

__version__ = "0.1.0"

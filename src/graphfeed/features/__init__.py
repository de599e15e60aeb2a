"""Feature storage: one interface (``Feature.read(ids)``), many backends and wrappers."""

from .base import Feature, FeatureStore
from .memory import InMemoryFeature

__all__ = ["Feature", "FeatureStore", "InMemoryFeature"]

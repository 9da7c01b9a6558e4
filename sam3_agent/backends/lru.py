"""The one bounded cache of the backends: at most ``size`` entries, the least recently used
evicted first; thread-safe."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Lru(Generic[K, V]):
    """Storing counts as use; :meth:`get` does too unless ``touch=False``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def keys(self) -> list[K]:
        """Least recently used first."""
        with self._lock:
            return list(self._entries)

    def get(self, key: K, *, touch: bool = True) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None and touch:
                self._entries.move_to_end(key)
            return value

    def latest(self) -> V | None:
        """The entry used most recently, or None."""
        with self._lock:
            return next(reversed(self._entries.values()), None)

    def put(self, key: K, value: V) -> list[K]:
        """Store ``value`` under ``key``; returns the keys evicted to make room."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            evicted = []
            while len(self._entries) > self.size:
                evicted.append(self._entries.popitem(last=False)[0])
            return evicted

"""The one bounded cache of the house: at most ``size`` entries and, with ``nbytes``, at most
``max_bytes`` of their values, the least recently used evicted first; the newest entry is
always kept, even when it alone exceeds the byte bound. Thread-safe."""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Lru(Generic[K, V]):
    """Storing counts as use; :meth:`get` does too unless ``touch=False``."""

    def __init__(
        self, size: int, max_bytes: int = sys.maxsize, nbytes: Callable[[V], int] | None = None
    ) -> None:
        self.size, self.max_bytes = size, max_bytes
        self._nbytes = nbytes or (lambda value: 0)
        self._entries: OrderedDict[K, V] = OrderedDict()
        self.bytes_used = 0
        self._lock = threading.RLock()

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

    def put(self, key: K, value: V) -> list[tuple[K, V]]:
        """Store ``value`` under ``key`` (replacing one there); returns the entries evicted."""
        with self._lock:
            if (old := self._entries.pop(key, None)) is not None:
                self.bytes_used -= self._nbytes(old)
            self._entries[key] = value
            self.bytes_used += self._nbytes(value)
            evicted: list[tuple[K, V]] = []
            while len(self._entries) > 1 and (
                len(self._entries) > self.size or self.bytes_used > self.max_bytes
            ):
                evicted.append(self._entries.popitem(last=False))
                self.bytes_used -= self._nbytes(evicted[-1][1])
            return evicted

    def keep(self, key: K, value: V) -> tuple[V, list[tuple[K, V]]]:
        """Keep ``value`` under ``key`` unless a value is there already (it stays, now the
        most recently used); returns the value stored under ``key`` and those evicted."""
        with self._lock:
            if (known := self.get(key)) is not None:
                return known, []
            return value, self.put(key, value)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes_used = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

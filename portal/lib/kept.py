"""The most recently used values of a web process, by key: a bounded, thread-safe LRU.

Values whose key names everything they are made of never go stale, so the portal keeps the latest
in memory (rendered report sections, whole run pages, share panels) instead of asking the cache or
rendering again."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

V = TypeVar("V")


class Kept(Generic[V]):
    """At most ``size`` values; reading one makes it the most recent, keeping one drops the oldest."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._values: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str | None) -> V | None:
        if key is None:
            return None
        with self._lock:
            found = self._values.get(key)
            if found is not None:
                self._values.move_to_end(key)
            return found

    def put(self, key: str, value: V) -> None:
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self.size:
                self._values.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()

    def __len__(self) -> int:
        return len(self._values)

"""A stand-in for the :mod:`ray` module where only ``init`` and the cluster's resources
matter (which Ray a run meets, what it says): no Ray needed."""

from __future__ import annotations

from typing import Any


class FakeRay:
    """Stands in for :mod:`ray`: records ``init``, raises ``error`` from it if given."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error
        self.calls: list[dict[str, Any]] = []
        self.resources: dict[str, float] = {"CPU": 4.0}

    def is_initialized(self) -> bool:
        return bool(self.calls) and self.error is None

    def init(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error

    def cluster_resources(self) -> dict[str, float]:
        return self.resources

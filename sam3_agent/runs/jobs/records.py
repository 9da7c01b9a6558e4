"""What the record of every kind of job holds: the job, the agent's outcome and its cost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from sam3_agent.agent.result import AgentResult, VideoResult

T = TypeVar("T", bound="JobRecord")

OUTCOME_FIELDS = ("status", "rounds", "prompt_tokens", "completion_tokens", "calls", "failure")
"""The fields of a record that the agent's answer fills (see :func:`agent_outcome`)."""


@dataclass(frozen=True, kw_only=True)
class JobRecord:
    """One finished job: ``status`` ``masks`` / ``no_mask`` / ``failed`` (a job that raised:
    ``infra_error`` set, the exception in ``failure``); ``prediction`` the masks' union as
    COCO RLE (None: empty); ``artifacts`` its directory relative to the run directory."""

    id: str
    image_path: str
    query: str
    status: str
    rounds: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    time_s: float = 0.0
    failure: str | None = None
    infra_error: bool = False
    prediction: dict[str, Any] | None = None
    artifacts: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls: type[T], doc: Mapping[str, Any]) -> T:
        """Read a stored record back, unknown keys left out (older ones: :meth:`_upgrade`)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in cls._upgrade(doc).items() if k in known})

    @classmethod
    def _upgrade(cls, doc: Mapping[str, Any]) -> dict[str, Any]:
        """The stored ``doc`` as this version's fields."""
        return dict(doc)


def agent_outcome(result: AgentResult | VideoResult) -> dict[str, Any]:
    """The :data:`OUTCOME_FIELDS` of the agent's answer (tokens and calls of the session)."""
    total = result.usage.total
    return {
        "status": result.status,
        "rounds": result.rounds,
        "prompt_tokens": total.prompt_tokens,
        "completion_tokens": total.completion_tokens,
        "calls": total.calls,
        "failure": result.failure,
    }

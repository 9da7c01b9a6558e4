"""`AgentResult`: what one session produced, and its JSON form (``result.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sam3_agent import __version__
from sam3_agent.detections import Detections
from sam3_agent.messages import TokenUsage

Status = Literal["masks", "no_mask", "failed"]


@dataclass
class Usage:
    """Tokens and calls of one session: the main conversation and the mask checks apart."""

    main: TokenUsage = field(default_factory=TokenUsage)
    checks: TokenUsage = field(default_factory=TokenUsage)
    cached_calls: int = 0
    """Calls answered from the response cache (no tokens spent)."""

    @property
    def total(self) -> TokenUsage:
        return self.main + self.checks

    def to_dict(self) -> dict[str, Any]:
        return {
            "main": self.main.to_dict(),
            "checks": self.checks.to_dict(),
            "total": self.total.to_dict(),
            "cached_calls": self.cached_calls,
        }


@dataclass
class AgentResult:
    """The outcome of :meth:`sam3_agent.Sam3Agent.run`.

    Attributes:
        status: ``masks`` (at least one mask selected), ``no_mask`` (the model reported that
            nothing matches) or ``failed`` (budget spent; see ``failure``).
        detections: the final masks at the image's full resolution (empty unless ``masks``).
        rounds: main-conversation MLLM calls made.
        timings: seconds per phase (``total``, ``chat``, ``checks``, ``segment``, ``render``).
        output_dir: where result.json / overlay.png / trace.jsonl were written, if anywhere.
        prompts: the prompt set the session used: ``name``, ``path`` and ``version`` (a
            content hash of its templates).
    """

    query: str
    status: Status
    detections: Detections
    image_size: tuple[int, int]
    rounds: int
    usage: Usage
    timings: dict[str, float]
    model: str
    image_path: str | None = None
    failure: str | None = None
    phrases_tried: list[str] = field(default_factory=list)
    output_dir: Path | None = None
    prompts: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``result.json`` document; masks as COCO RLE, boxes XYXY in pixels."""
        h, w = self.image_size
        masks = [
            {"rle": rle, "box_xyxy": [round(float(v), 2) for v in box], "score": round(score, 4)}
            for rle, (_, box, score) in zip(
                self.detections.to_coco_rle(), self.detections, strict=True
            )
        ]
        return {
            "query": self.query,
            "image": {"path": self.image_path, "height": h, "width": w},
            "status": self.status,
            "failure": self.failure,
            "masks": masks,
            "rounds": self.rounds,
            "phrases_tried": self.phrases_tried,
            "usage": self.usage.to_dict(),
            "timings_s": {k: round(v, 4) for k, v in self.timings.items()},
            "model": self.model,
            "prompts": self.prompts,
            "version": __version__,
        }

"""The record of one batch request as the results store keeps it, and what a finished batch
leaves for people and scripts: ``summary.jsonl`` and the totals."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sam3_agent.runs.batch.requests import BatchRequest
from sam3_agent.runs.jobs.records import JobRecord
from sam3_agent.values.files import atomic_write_bytes

SUMMARY_NAME = "summary.jsonl"
STATUSES = ("masks", "no_mask", "failed")


@dataclass(frozen=True, kw_only=True)
class RequestResult(JobRecord):
    """One finished request: ``masks`` selected and ``mask_pixels`` in their union (for a video,
    tracks, and pixels summed over the frames used)."""

    masks: int = 0
    mask_pixels: int = 0
    media: str = "image"

    @classmethod
    def _upgrade(cls, doc: Mapping[str, Any]) -> dict[str, Any]:
        """Also a record stored before batches had their own record type (the masks in
        ``extra``, their pixels as ``pred_area``)."""
        data = dict(doc)
        if "mask_pixels" not in doc:
            extra = dict(doc.get("extra") or {})
            data["masks"] = int(extra.pop("masks", 0))
            data["mask_pixels"] = int(doc.get("pred_area", 0))
            data["extra"] = extra
        return data


def summary_row(result: RequestResult) -> dict[str, Any]:
    """One line of ``summary.jsonl`` (a video's names its ``video`` and adds ``frames``)."""
    row = {
        "id": result.id,
        result.media: result.image_path,
        "query": result.query,
        "status": result.status,
        "masks": result.masks,
        "mask_pixels": result.mask_pixels,
        "rounds": result.rounds,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "time_s": result.time_s,
        "failure": result.failure,
        "outputs": result.artifacts,
    }
    if result.media == "video":
        row["frames"] = result.extra.get("frames", 0)
    return row


@dataclass(frozen=True)
class BatchTotals:
    """Counts over the requests of one batch input (stored results only)."""

    requests: int
    by_status: dict[str, int]
    missing: int
    prompt_tokens: int
    completion_tokens: int
    time_s: float


def write_summary(
    run_dir: Path, requests: Sequence[BatchRequest], results: Sequence[RequestResult]
) -> BatchTotals:
    """Write ``run_dir/summary.jsonl`` in input order and return the totals (a request with no
    stored result is missing)."""
    by_id = {r.id: r for r in results}
    rows = [by_id[q.id] for q in requests if q.id in by_id]
    text = "".join(json.dumps(summary_row(r), ensure_ascii=False) + "\n" for r in rows)
    atomic_write_bytes(run_dir / SUMMARY_NAME, text.encode("utf-8"))
    counts = Counter(r.status for r in rows)
    return BatchTotals(
        requests=len(requests),
        by_status={s: counts.get(s, 0) for s in STATUSES},
        missing=len(requests) - len(rows),
        prompt_tokens=sum(r.prompt_tokens for r in rows),
        completion_tokens=sum(r.completion_tokens for r in rows),
        time_s=round(sum(r.time_s for r in rows), 3),
    )

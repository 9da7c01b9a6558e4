"""What a finished batch leaves for people and scripts: ``summary.jsonl`` and the totals."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sam3_agent.runs.batch.requests import BatchRequest
from sam3_agent.runs.batch.results import RequestResult
from sam3_agent.values.files import atomic_write_bytes

SUMMARY_NAME = "summary.jsonl"
STATUSES = ("masks", "no_mask", "failed")


def summary_row(result: RequestResult) -> dict[str, Any]:
    """One line of ``summary.jsonl``: the request, its outcome, where its files are.

    A video request's line names its ``video`` (instead of ``image``), counts its selected
    tracks as ``masks`` and adds ``frames``, the number it used."""
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
    """Write ``run_dir/summary.jsonl`` (input order, atomically) and return the totals.

    Only the requests of this input are listed; a request with no stored result (the run
    stopped) is counted as missing and left out.
    """
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

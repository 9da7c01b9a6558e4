"""SAM 3 alone on a query, without an MLLM (the paper's baseline): every non-empty mask
scoring at least the threshold, by score, overlapping ones kept."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sam3_agent.agent import rundir
from sam3_agent.agent.result import AgentResult, Usage
from sam3_agent.agent.rundir import ExportFormat
from sam3_agent.backends.base import Segmenter
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.files import atomic_write_bytes
from sam3_agent.values.images import ImageInput, load_image
from sam3_agent.values.masks import postprocess

MODEL_NAME = "sam3-only"  # the result's model: no MLLM took part


def segment_only(
    segmenter: Segmenter,
    image: ImageInput,
    query: str,
    *,
    config: AgentConfig | None = None,
    output_dir: str | Path | None = None,
    exports: Iterable[ExportFormat] = (),
    image_path: str | Path | None = None,
    downloaded: dict[str, Any] | None = None,
) -> AgentResult:
    """Segment ``query`` with SAM 3 alone; with ``output_dir``, the run's files (its trace:
    one record of the phrase and the masks kept)."""
    config = config or AgentConfig()
    if image_path is None and isinstance(image, (str, Path)):
        image_path = image
    started = time.perf_counter()
    pixels = load_image(image, max_pixels=config.max_image_pixels)
    detections = segmenter.embed(pixels).segment([query], config.score_threshold)[0]
    segmented = time.perf_counter()
    # An overlap threshold of 1 removes nothing: every mask above the threshold is kept.
    kept = postprocess(detections, score_threshold=config.score_threshold, overlap_threshold=1.0)
    result = AgentResult(
        query=query,
        status="masks" if len(kept) else "no_mask",
        detections=kept,
        image_size=(int(pixels.shape[0]), int(pixels.shape[1])),
        rounds=0,
        usage=Usage(),
        timings={"segment": segmented - started, "total": time.perf_counter() - started},
        model=MODEL_NAME,
        image_path=str(image_path) if image_path is not None else None,
        phrases_tried=[query],
        downloaded=downloaded,
    )
    if output_dir is not None:
        out = Path(output_dir)
        rundir.write_run(out, result, pixels, exports)
        record = {
            "mode": MODEL_NAME,
            "phrase": query,
            "detected": len(detections),
            "kept": len(kept),
        }
        line = json.dumps(record, ensure_ascii=False) + "\n"
        atomic_write_bytes(out / rundir.TRACE, line.encode("utf-8", "surrogatepass"))
    return result

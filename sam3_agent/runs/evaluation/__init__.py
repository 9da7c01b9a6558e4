"""Batch evaluation on referring and reasoning segmentation datasets.

* :mod:`~sam3_agent.runs.evaluation.datasets`: ReasonSeg, RefCOCO/+/g and gRefCOCO loaders.
* :mod:`~sam3_agent.runs.evaluation.metrics`: per-sample I/U and the summary metrics (pure).
* :mod:`~sam3_agent.runs.evaluation.store`: the crash-safe results store of a run directory.
* :mod:`~sam3_agent.runs.evaluation.runner`: concurrent, resumable evaluation of samples.
* :mod:`~sam3_agent.runs.evaluation.report`: ``metrics.json``, ``report.md`` and figures.
"""

from __future__ import annotations

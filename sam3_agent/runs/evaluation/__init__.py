"""Evaluation on referring and reasoning segmentation datasets: each sample is a job.

* :mod:`~sam3_agent.runs.evaluation.run`: :func:`~sam3_agent.runs.evaluation.run.evaluate`,
  the ``eval`` command as a library call (resumable, sharded, on any engine).
* :mod:`~sam3_agent.runs.evaluation.datasets`: ReasonSeg, RefCOCO/+/g and gRefCOCO loaders
  (:mod:`~sam3_agent.runs.evaluation.refer`), giving
  :mod:`~sam3_agent.runs.evaluation.samples`.
* :mod:`~sam3_agent.runs.evaluation.metrics`: per-sample I/U and the summary metrics (pure).
* :mod:`~sam3_agent.runs.evaluation.results`: the stored record of one sample.
* :mod:`~sam3_agent.runs.evaluation.handler`: one sample predicted, scored and recorded.
* :mod:`~sam3_agent.runs.evaluation.workers`: what each engine worker builds.
* :mod:`~sam3_agent.runs.evaluation.report`: ``metrics.json``, ``report.md`` and figures
  over run directories merged into methods (:mod:`~sam3_agent.runs.evaluation.methods`,
  :mod:`~sam3_agent.runs.evaluation.figures`).
"""

from __future__ import annotations

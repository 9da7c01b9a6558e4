"""Evaluation on referring and reasoning *video* segmentation datasets (work in progress).

* :mod:`~sam3_agent.runs.evaluation.video.metrics`: J, F and J&F as the DAVIS benchmark
  defines them, per frame, per video (streamed) and per dataset / subset.
"""

from __future__ import annotations

"""Evaluation on referring and reasoning *video* segmentation datasets (work in progress).

* :mod:`~sam3_agent.runs.evaluation.video.metrics`: J, F and J&F as the DAVIS benchmark
  defines them, per frame, per video (streamed) and per dataset / subset.
* :mod:`~sam3_agent.runs.evaluation.video.datasets`: Ref-YouTube-VOS, Ref-DAVIS17, MeViS,
  ReVOS and ReasonVOS in their published layouts, as samples whose ground truth decodes one
  frame at a time.
"""

from __future__ import annotations

"""Evaluation on referring and reasoning segmentation datasets: each sample is a job
(:func:`~sam3_agent.runs.evaluation.run.evaluate`, the ``eval`` command as a library call)."""

from __future__ import annotations

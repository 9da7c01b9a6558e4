"""Batch inference: many (image, query) requests, resumable, on any engine; each request
is a job.

* :mod:`~sam3_agent.runs.batch.run`: :func:`~sam3_agent.runs.batch.run.run_batch`, the
  ``batch`` command as a library call.
* :mod:`~sam3_agent.runs.batch.requests`: the requests of a JSONL/CSV file or an image folder.
* :mod:`~sam3_agent.runs.batch.results`: the stored record of one request.
* :mod:`~sam3_agent.runs.batch.handler`: one request through the agent, as its record.
* :mod:`~sam3_agent.runs.batch.workers`: what each engine worker builds.
* :mod:`~sam3_agent.runs.batch.summary`: ``summary.jsonl`` and the totals printed at the end.
"""

from __future__ import annotations

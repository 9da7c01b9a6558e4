"""Batch inference: many (image, query) requests, resumable, on any engine.

* :mod:`~sam3_agent.runs.batch.requests`: the requests of a JSONL/CSV file or an image folder.
* :mod:`~sam3_agent.runs.batch.handler`: one request through the agent, as a stored record.
* :mod:`~sam3_agent.runs.batch.summary`: ``summary.jsonl`` and the totals printed at the end.
"""

from __future__ import annotations

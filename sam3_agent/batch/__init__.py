"""Batch inference: many (image, query) requests, resumable, on any engine.

* :mod:`~sam3_agent.batch.requests`: the requests of a JSONL/CSV file or an image folder.
* :mod:`~sam3_agent.batch.handler`: one request through the agent, as a stored record.
* :mod:`~sam3_agent.batch.summary`: ``summary.jsonl`` and the totals printed at the end.
"""

from __future__ import annotations

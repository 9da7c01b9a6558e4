"""Batch inference: many (image or video, query) requests, resumable, on any engine; each
request is a job (:func:`~sam3_agent.runs.batch.run.run_batch`)."""

"""Batch engines behind one runner interface (see :mod:`sam3_agent.engines.base`)."""

"""SAM 3 as an HTTP service (``sam3-agent serve-sam3``), so one GPU machine can segment for
many agents; the wire format is in :mod:`sam3_agent.backends.schemas` and ``.wire``."""

"""The SAM 3 service's bearer token: where server and client read it from.

A module of its own, importing nothing: the CLI declares ``--token`` / ``--sam3-token``
with it without importing the wire schemas (pydantic, numpy), and the client, the server
and ``build_segmenter`` all import it without a cycle.
"""

TOKEN_ENV = "SAM3_AGENT_TOKEN"
"""The environment variable ``serve-sam3`` and the client read the bearer token from."""

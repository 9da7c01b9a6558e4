"""sam3-agent: a multimodal LLM that uses SAM 3 as a tool to segment what a person describes."""

from __future__ import annotations

__version__ = "0.1.0"

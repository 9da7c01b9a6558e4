"""Backends: SAM 3 segmenters and chat models behind two small Protocols (see ``base``)."""

from sam3_agent.backends.base import ChatModel, ImageEmbedding, Segmenter

__all__ = ["ChatModel", "ImageEmbedding", "Segmenter"]

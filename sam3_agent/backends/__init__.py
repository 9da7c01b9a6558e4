"""Backends: SAM 3 segmenters and chat models behind small Protocols (see ``base``)."""

"""The SAM 3 service's default limits, importable without the web stack (for ``--help``)."""

from __future__ import annotations

MIB = 1024 * 1024
DEFAULT_MAX_UPLOAD_BYTES = 64 * MIB
"""Largest encoded image file accepted (raw RGB uploads are bounded by the pixel limit)."""
DEFAULT_MAX_PIXELS = 50_000_000
"""Largest ``width * height`` accepted, read from the header before decoding."""
DEFAULT_MAX_STORED_IMAGES = 64
"""Decoded images kept for later requests."""
DEFAULT_MAX_STORED_BYTES = 2048 * MIB
"""Memory for decoded images kept for later requests."""
DEFAULT_MAX_CONCURRENT_DECODES = 2
"""Images decoded at the same time; each holds its body and its pixels while it decodes."""

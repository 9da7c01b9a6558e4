"""The SAM 3 service's default limits, importable without the web stack (for ``--help``).

Peak memory does not grow with the number of clients: a request holds a body or an image
only inside a slot (``max_concurrent_uploads`` bodies and decoded images, each at most
``max_upload_bytes`` / ``max_pixels``; ``max_concurrent_segments`` segment requests at
work), at most ``max_waiting`` requests per kind wait for a slot (holding no body: the
server stops reading a socket whose body is not asked for), and past that the service
answers 503 with ``Retry-After``.
"""

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
DEFAULT_MAX_CONCURRENT_UPLOADS = 4
"""Requests carrying an image (uploads, inline-base64 segment requests) that may hold their
body and decoded pixels at once; the body is read only once a slot is taken."""
DEFAULT_MAX_CONCURRENT_SEGMENTS = 4
"""Segment requests at work at once (model calls, masks, RLE encoding)."""
DEFAULT_MAX_WAITING = 64
"""Requests of each kind (uploads, segments) that may wait for a slot; past that: 503."""
RETRY_AFTER_S = 1
"""``Retry-After`` (seconds) of a 503 answered when the service is at its bounds."""
SMALL_BODY_BYTES = 64 * 1024
"""A segment request declaring at most this many bytes is read without an upload slot."""
DEFAULT_MAX_VIDEO_BYTES = 512 * MIB
"""Largest video upload (a video file, or a tar of frames), streamed to disk."""
DEFAULT_MAX_VIDEO_FRAMES = 10_000
"""Most frames an uploaded video may have."""
DEFAULT_MAX_STORED_VIDEO_BYTES = 4096 * MIB
"""Disk for uploaded videos kept for later track requests (LRU)."""
DEFAULT_MAX_CONCURRENT_TRACKS = 1
"""Track requests at work at once: SAM 3's video model tracks one clip at a time."""

"""The exception family for failures nobody in the conversation can fix (mistakes the model
can fix become corrective messages instead). A message names a setting as a Python caller
writes it, in backticks (`` `stride` ``); the CLI shows each as its flag."""

from __future__ import annotations


class Sam3AgentError(Exception):
    """Base class of every error this package raises on purpose. ``notes``: lines the CLI
    prints first, saying what had been decided when it failed (the default MLLM chosen)."""

    notes: tuple[str, ...] = ()


class UserError(Sam3AgentError):
    """The caller asked for something impossible (bad option, bad path, bad value)."""


class ImageLoadError(UserError):
    """An image could not be read: missing path, not an image, truncated or corrupt file."""


class ChatModelError(Sam3AgentError):
    """The MLLM backend failed (endpoint down after retries, timeout, bad credentials)."""


class ReplayMissError(ChatModelError):
    """Replay mode is on and the response cache holds no answer for this request."""


class SegmenterError(Sam3AgentError):
    """The SAM 3 backend failed (out of memory, service unreachable, bad response)."""


class WeightsUnavailableError(Sam3AgentError):
    """Model weights could not be loaded: gated, missing, offline. The message says what to do."""


class DatasetError(UserError):
    """A dataset file is unreadable or inconsistent. The message names the file and sample."""


class EngineError(Sam3AgentError):
    """The batch engine itself failed (Ray could not start or lost work it cannot redo)."""


class ResumeError(UserError):
    """A session cannot be resumed: nothing saved, damaged files, or a different request."""


class DownloadError(UserError):
    """An image or video named by URL could not be fetched: a scheme other than http(s),
    an HTTP error, a timeout, too many redirects, too large, or not an image or video."""

"""The one failure policy of a run: whatever a job's own work raises becomes its failed record
with a one-line message; only an interrupt stops the run from inside a job."""

from __future__ import annotations

import asyncio
import builtins
import logging

from sam3_agent.values.errors import ChatModelError, ImageLoadError, SegmenterError, UserError
from sam3_agent.values.text import one_line

logger = logging.getLogger(__name__)

JOB_FAILURES: tuple[type[Exception], ...] = (ChatModelError, SegmenterError, ImageLoadError)
"""The failures a backend announces; logged briefly. Any other exception of one job is a
failure too, logged with its traceback (it is likely a bug worth reporting)."""

STOPS = (KeyboardInterrupt, SystemExit, asyncio.CancelledError, GeneratorExit)
"""What stops a run even when one job raises it: the user or the system asked to stop."""

FAILURE_MESSAGE_CHARS = 500


def stops_the_run(error: BaseException) -> bool:
    """An interrupt, a cancellation or an exit, alone or inside an exception group."""
    if isinstance(error, STOPS):
        return True
    group = getattr(builtins, "BaseExceptionGroup", None)  # Python 3.11+
    if group is not None and isinstance(error, group):
        return any(stops_the_run(e) for e in error.exceptions)
    return False


def job_failure(kind: str, job_id: str, error: BaseException) -> str:
    """The one-line failure to record (and log) for a job whose work raised ``error`` (an
    interrupt is raised again): bounded, encodable as UTF-8 whatever the error holds, a user
    error's type named; ``kind`` names the job in the log (``sample``, ``request``)."""
    if stops_the_run(error):
        raise error
    message = one_line(error, FAILURE_MESSAGE_CHARS)
    if isinstance(error, UserError):
        message = f"{type(error).__name__}: {message}"
    if isinstance(error, JOB_FAILURES):
        # INFO, not WARNING: the progress bar counts failures and the summaries list them.
        logger.info("%s %s failed: %s", kind, job_id, message)
    else:
        # Whatever else one job raises must not cost the others their run.
        logger.warning("%s %s failed: %s", kind, job_id, message, exc_info=error)
    return message

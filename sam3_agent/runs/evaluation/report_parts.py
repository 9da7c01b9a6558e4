"""Where :class:`ReportFiles` was imported from; the report lives in :mod:`.report`."""

from sam3_agent.runs.evaluation.report import ReportFiles

__all__ = ["ReportFiles"]

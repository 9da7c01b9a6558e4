"""Every flag group, declared once, and composed into each command that takes it.

A command names its groups in :func:`with_flags` and declares, keyword-only, the value each
group builds instead of the group's options::

    @with_flags(BACKENDS, AGENT, VERBOSE)
    def run_command(image: ..., *, backends: BackendSpec, config: AgentConfig) -> None: ...

=============  ==============================================  =========================
group          flags                                           hands the command
=============  ==============================================  =========================
``VERBOSE``    ``--verbose`` (built first)                     ``verbose`` (logging set)
``SAM3``       ``--sam3 --device --dtype``                     ``backends: BackendSpec``
``BACKENDS``   SAM 3 (local or ``--sam3-url``), the MLLM,      ``backends: BackendSpec``
               generation, ``--memory-check``, cache/replay
``AGENT``      agent and context flags (``--max-rounds`` ...,  ``config: AgentConfig``
               ``--context-policy``, ``--reserve-tokens``)
``ENGINE``     ``--concurrency --engine --workers`` ...        ``engine: EngineOptions``
``VIDEO``      ``--stride --max-frames --start --end --fps``,  ``video_flags: VideoFlags``
               ``--frames-shown --check-frames``, ...
=============  ==============================================  =========================

So ``run``, ``eval``, ``batch`` and ``demo`` take the same backend, agent and context flags,
and ``serve-sam3`` the same SAM 3 flags (``tests/test_cli_flags.py`` checks it). Nothing
here imports anything heavy: ``--help`` stays instant.
"""

from sam3_agent.apps.cli.flags.agent import AGENT, MIN_IMAGE_SIDE, check_agent
from sam3_agent.apps.cli.flags.backends import BACKENDS, SAM3
from sam3_agent.apps.cli.flags.compose import Flag, FlagGroup, flag, with_flags
from sam3_agent.apps.cli.flags.jobs import ENGINE, OutDirOpt, ProgressOpt, RetryFailedOpt
from sam3_agent.apps.cli.flags.output import VERBOSE, Mode
from sam3_agent.apps.cli.flags.video import VIDEO, VideoFlags

__all__ = [
    "AGENT",
    "BACKENDS",
    "ENGINE",
    "MIN_IMAGE_SIDE",
    "SAM3",
    "VERBOSE",
    "VIDEO",
    "Flag",
    "FlagGroup",
    "Mode",
    "OutDirOpt",
    "ProgressOpt",
    "RetryFailedOpt",
    "VideoFlags",
    "check_agent",
    "flag",
    "with_flags",
]

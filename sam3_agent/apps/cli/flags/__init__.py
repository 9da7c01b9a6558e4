"""Every flag group, declared once, and composed into each command that takes it.

A command names its groups in :func:`with_flags` and declares, keyword-only, the value each
group builds instead of the group's options::

    @with_flags(BACKENDS, AGENT, VERBOSE)
    def run_command(image: ..., *, backends: BackendSpec, config: AgentConfig) -> None: ...

Nothing here imports anything heavy: ``--help`` stays instant.
"""

from sam3_agent.apps.cli.flags.agent import AGENT, check_agent
from sam3_agent.apps.cli.flags.backends import BACKENDS, SAM3
from sam3_agent.apps.cli.flags.compose import FlagGroup, with_flags
from sam3_agent.apps.cli.flags.jobs import ENGINE, OutDirOpt, ProgressOpt, RetryFailedOpt
from sam3_agent.apps.cli.flags.output import VERBOSE, Mode
from sam3_agent.apps.cli.flags.video import VIDEO, VideoFlags

__all__ = [
    "AGENT",
    "BACKENDS",
    "ENGINE",
    "SAM3",
    "VERBOSE",
    "VIDEO",
    "FlagGroup",
    "Mode",
    "OutDirOpt",
    "ProgressOpt",
    "RetryFailedOpt",
    "VideoFlags",
    "check_agent",
    "with_flags",
]

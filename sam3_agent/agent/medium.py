"""What a kind of input (image, video) supplies to the one agent loop."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sam3_agent.agent.checkpoint import Checkpoint, Fingerprint
from sam3_agent.agent.checkpoint.state import Backends
from sam3_agent.agent.prompts import PromptKind
from sam3_agent.agent.result import SessionResult
from sam3_agent.agent.rundir import ExportFormat
from sam3_agent.agent.session import Scene
from sam3_agent.agent.steps import Final
from sam3_agent.agent.tools import Registry
from sam3_agent.values.config import AgentConfig

In_contra = TypeVar("In_contra", contravariant=True)
S = TypeVar("S", bound="Scene[Any]")
R = TypeVar("R", bound=SessionResult)


class Medium(Protocol[In_contra, S, R]):
    """What a kind of input supplies: its templates, tools, and per request a scene,
    fingerprint, result and files."""

    kind: PromptKind
    tools: Registry

    @property
    def segmenter(self) -> object: ...

    def open(
        self,
        source: In_contra,
        config: AgentConfig,
        *,
        image_path: str | Path | None,
        exports: Iterable[ExportFormat],
    ) -> S:
        """Read ``source`` (raising the medium's load error) into a scene."""
        ...

    def preflight(self) -> None: ...

    def fingerprint(
        self, scene: S, query: str, config: AgentConfig, model: str, backends: Backends
    ) -> Fingerprint: ...

    def attach(self, scene: S, checkpoint: Checkpoint) -> None:
        """Give ``scene`` the segmenter, journaled by ``checkpoint``."""
        ...

    def result(self, scene: S, fields: dict[str, Any], final: Final[Any] | None) -> R: ...

    def write(self, out: Path, result: R, scene: S) -> None:
        """Write the run directory's outputs of ``result``, ``result.json`` last."""
        ...

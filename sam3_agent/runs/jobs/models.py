"""The models a run's workers build from a :class:`ModelSource` (settings, never models), and
the part of them a run directory's settings name, so a rerun with other models is refused."""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sam3_agent.backends.base import ChatModel, Segmenter, VideoSegmenter
    from sam3_agent.runs.jobs.embeddings import SharedEmbeddings
    from sam3_agent.values.config import AgentConfig


class ModelSource(Protocol):
    """What workers build SAM 3 and the MLLM from: a picklable library value (it travels to Ray
    workers) holding the backend settings."""

    @property
    def sam3(self) -> str: ...

    @property
    def sam3_url(self) -> str | None: ...

    def generation_identity(self) -> dict[str, Any]:
        """The generation settings that were given (they change predictions)."""

    def require_model_name(self, engine: str) -> str | None:
        """The chat model's name when the settings say it; refuses the Ray engine without it."""

    def build_segmenter(self) -> Segmenter: ...

    def build_chat_model(self) -> ChatModel: ...

    def build_video_segmenter(self) -> VideoSegmenter:
        """SAM 3's video model (or its service client), for the runs that track videos."""


class LeavesChatModelOnDriver:
    """A base for frozen dataclass worker factories: ``chat_model``, one the driver built, is
    never pickled to Ray workers, which build their own from ``backends``."""

    backends: ModelSource
    chat_model: ChatModel | None
    loading_bars: bool

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["chat_model"] = None
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)  # frozen: no setattr

    def loading(self) -> AbstractContextManager[None]:
        """The block where this worker's models load."""
        return nullcontext() if self.loading_bars else loading_bars_hidden()

    def shared_segmenter(self) -> SharedEmbeddings:
        """SAM 3 (or its service client), each image's features shared by its jobs."""
        from sam3_agent.runs.jobs.embeddings import SharedEmbeddings

        return SharedEmbeddings(self.backends.build_segmenter())

    def worker_chat_model(self) -> ChatModel:
        """The driver's chat model when it came along, else one built here."""
        return self.chat_model or self.backends.build_chat_model()


def name_chat_model(models: ModelSource, engine: str) -> tuple[str, ChatModel | None]:
    """The chat model's name, and the model when it had to be built (on the driver, for the
    local engine to reuse) to learn it."""
    name = models.require_model_name(engine)
    if name is not None:
        return name, None
    chat_model = models.build_chat_model()
    return chat_model.name, chat_model


def agent_identity(config: AgentConfig, *, leave_out: Collection[str]) -> dict[str, Any]:
    """The agent settings that make two runs comparable: all but ``leave_out``, the prompt set
    named by its content."""
    from sam3_agent.agent.prompts import load_prompt_set

    settings = {k: v for k, v in config.to_dict().items() if k not in leave_out}
    prompt_set = load_prompt_set(config.prompts_dir, tool_set=config.tool_set)
    settings["prompts"] = prompt_set.identity()
    return settings


def models_identity(
    models: ModelSource, model_name: str | None, *, chat: bool = True
) -> dict[str, Any]:
    """The part of a run's settings naming its models (``generation`` only when given)."""
    doc: dict[str, Any] = {"model": model_name, "sam3": models.sam3_url or models.sam3}
    generation = models.generation_identity() if chat else {}
    if generation:
        # Only when given: runs made before these flags existed keep their identity.
        doc["generation"] = generation
    return doc


@contextmanager
def loading_bars_hidden() -> Iterator[None]:
    """No progress bars of transformers' and huggingface_hub's in the block; the process-wide
    switches are put back after it (without importing transformers)."""
    try:
        from huggingface_hub.utils import (
            are_progress_bars_disabled,
            disable_progress_bars,
            enable_progress_bars,
        )
    except ImportError:
        yield
        return
    hub_was_on = not are_progress_bars_disabled()
    before = sys.modules.get("transformers.utils.logging")
    transformers_was_on = before.is_progress_bar_enabled() if before is not None else hub_was_on
    disable_progress_bars()
    if before is not None:
        before.disable_progress_bar()
    try:
        yield
    finally:
        if hub_was_on:
            enable_progress_bars()
        after = sys.modules.get("transformers.utils.logging")
        if after is not None and transformers_was_on:
            after.enable_progress_bar()

"""``eval`` / ``report`` on video datasets with the fake backends, in a process of its own.

``python -m tests.support.video_eval_cli_driver [--delay S] eval --dataset revos ...`` runs the
real commands with the fakes of :mod:`tests.support.video_eval_fixtures` (every MLLM call
waits ``S`` seconds), so a test can kill it part-way and check what survives.
"""

from __future__ import annotations

import sys

from sam3_agent.apps.cli.main import app
from sam3_agent.backends import memory
from sam3_agent.backends.spec import BackendSpec
from tests.support.fake_hub import use_fake_hub
from tests.support.fakes import FakeVideoSegmenter, ScriptedChatModel
from tests.support.video_eval_fixtures import make_chat_model, make_video_segmenter


def use_fake_video_backends(delay_s: float = 0.0) -> None:
    """Make every BackendSpec build the video fixtures' fakes (for a process of its own)."""

    def build_video_segmenter(self: BackendSpec) -> FakeVideoSegmenter:
        return make_video_segmenter()

    def build_chat_model(self: BackendSpec) -> ScriptedChatModel:
        return make_chat_model(delay_s=delay_s)

    BackendSpec.build_video_segmenter = build_video_segmenter  # type: ignore[method-assign]
    BackendSpec.build_chat_model = build_chat_model  # type: ignore[method-assign]
    # The fakes need no memory: the memory check must not depend on this machine's.
    memory.read_memory = lambda device: memory.MemoryReading("cpu", 1 << 50, 1 << 50)
    use_fake_hub()  # nothing asks the real hub whether a model exists


if __name__ == "__main__":
    args = sys.argv[1:]
    delay = 0.0
    if args[:1] == ["--delay"]:
        delay, args = float(args[1]), args[2:]
    use_fake_video_backends(delay)
    app(args)

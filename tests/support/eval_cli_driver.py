"""``eval`` / ``report`` with the fake backends, for tests and scripts in other processes.

``python -m tests.support.eval_cli_driver [--delay S] eval --dataset ... --out ...`` runs the real
commands with :func:`eval_fixtures.make_segmenter` and a scripted chat model whose every
call waits ``S`` seconds; a test can kill it part-way and check what survives.
"""

from __future__ import annotations

import sys

import typer

from sam3_agent.apps.cli.main import app
from sam3_agent.backends import memory
from sam3_agent.backends.base import ChatModel, Segmenter
from sam3_agent.backends.spec import BackendSpec
from tests.support.eval_fixtures import make_chat_model, make_segmenter
from tests.support.fake_hub import use_fake_hub


def make_app() -> typer.Typer:
    """The real ``sam3-agent`` application (the fakes come from :func:`use_fake_backends`)."""
    return app


def use_fake_backends(delay_s: float = 0.0) -> None:
    """Make every BackendSpec build the fixtures' fakes (for a process of its own)."""

    def build_segmenter(self: BackendSpec) -> Segmenter:
        return make_segmenter()

    def build_chat_model(self: BackendSpec) -> ChatModel:
        return make_chat_model(delay_s=delay_s)

    BackendSpec.build_segmenter = build_segmenter  # type: ignore[method-assign]
    BackendSpec.build_chat_model = build_chat_model  # type: ignore[method-assign]
    # The fakes need no memory: the memory check must not depend on this machine's.
    memory.read_memory = lambda device: memory.MemoryReading("cpu", 1 << 50, 1 << 50)
    use_fake_hub()  # nothing asks the real hub whether a model exists


if __name__ == "__main__":
    args = sys.argv[1:]
    delay = 0.0
    if args[:1] == ["--delay"]:
        delay, args = float(args[1]), args[2:]
    use_fake_backends(delay)
    make_app()(args)

"""Throughput of ``sam3-agent eval`` at --concurrency 1 vs 8, side by side in one run.

The test fixtures (ReasonSeg in the LISA layout, repeated to get enough samples; RefCOCO;
gRefCOCO) are evaluated by the real agent with the fake SAM 3 and an MLLM that takes
``--latency`` seconds per call:

* ``--backend http``: ``OpenAIChatModel`` against the scripted OpenAI-compatible server of
  ``tests/support/openai_server.py`` on 127.0.0.1;
* ``--backend scripted``: ``ScriptedChatModel(delay_s=latency)`` in process;
* ``--backend auto`` (default): http when available, else scripted (the output says which).

    python -m scripts.bench eval [--latency 0.2] [--copies 6] [--backend auto]

Prints samples/s at each concurrency and their ratio; metrics must be identical.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.backends.base import ChatModel
from sam3_agent.runs.evaluation.datasets import Sample, load_samples
from sam3_agent.runs.evaluation.handler import AgentPredictor, evaluate_samples
from sam3_agent.runs.evaluation.metrics import breakdown
from sam3_agent.runs.evaluation.results import SampleResult
from sam3_agent.runs.jobs.embeddings import SharedEmbeddings
from sam3_agent.runs.jobs.store import ResultStore
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.messages import ChatMessage
from tests.support.eval_fixtures import (
    make_chat_model,
    make_segmenter,
    scripted_reply,
    write_grefcoco,
    write_reasonseg,
    write_refcoco,
)


def http_available() -> bool:
    return importlib.util.find_spec("sam3_agent.backends.openai_chat") is not None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


@contextlib.contextmanager
def http_chat_model(latency_s: float) -> Iterator[ChatModel]:
    """OpenAIChatModel against the scripted server, answering like the fixtures' MLLM."""
    from sam3_agent.backends.openai_chat import OpenAIChatModel
    from sam3_agent.values.errors import ChatModelError
    from tests.support.openai_server import Reply, ScriptedServer, serve

    def respond(body: dict[str, Any]) -> Reply:
        messages = [
            ChatMessage.text(m["role"], _text(m.get("content", ""))) for m in body["messages"]
        ]
        try:
            return Reply(text=scripted_reply(messages), usage=(1000, 20))
        except ChatModelError:
            return Reply.server_error(500)

    with serve(ScriptedServer(responder=respond, latency_s=latency_s)) as server:
        yield OpenAIChatModel("bench-vlm", base_url=server.base_url, api_key="b", max_retries=0)


@contextlib.contextmanager
def scripted_chat_model(latency_s: float) -> Iterator[ChatModel]:
    yield make_chat_model(delay_s=latency_s, replies=100_000)


def fixtures(folder: Path, copies: int) -> list[Sample]:
    reasonseg = write_reasonseg(folder / "ReasonSeg", copies=copies)
    samples = load_samples("reasonseg", reasonseg, "val", all_texts=True)
    samples += load_samples("refcoco", write_refcoco(folder / "refer"), "val")
    samples += load_samples("grefcoco", write_grefcoco(folder / "grefer"), "val")
    return samples


async def timed_run(
    samples: Sequence[Sample], chat: ChatModel, run_dir: Path, concurrency: int
) -> tuple[float, dict[str, Any]]:
    shared = SharedEmbeddings(make_segmenter())
    agent = Sam3Agent(shared, chat, AgentConfig(max_rounds=5))
    with ResultStore.create_or_resume(
        run_dir, {"bench": concurrency}, SampleResult.from_json
    ) as store:
        started = time.perf_counter()
        await evaluate_samples(
            samples,
            store,
            AgentPredictor(agent),
            concurrency=concurrency,
            shared=shared,
        )
        elapsed = time.perf_counter() - started
        metrics = breakdown(r.scored() for r in store.results()).overall.to_dict()
    return elapsed, metrics


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per MLLM call")
    parser.add_argument("--copies", type=int, default=6, help="copies of the ReasonSeg images")
    parser.add_argument("--backend", choices=["auto", "http", "scripted"], default="auto")
    parser.add_argument("--concurrency", type=int, nargs=2, default=[1, 8], metavar=("LOW", "HIGH"))
    args = parser.parse_args(argv)
    backend = args.backend
    if backend == "auto":
        backend = "http" if http_available() else "scripted"
    if backend == "http" and not http_available():
        parser.error("--backend http needs OpenAIChatModel")
    chat_context = http_chat_model if backend == "http" else scripted_chat_model

    with tempfile.TemporaryDirectory() as tmp:
        samples = fixtures(Path(tmp) / "data", args.copies)
        rates: dict[int, float] = {}
        results = {}
        for concurrency in args.concurrency:
            with chat_context(args.latency) as chat:
                elapsed, metrics = asyncio.run(
                    timed_run(samples, chat, Path(tmp) / f"run{concurrency}", concurrency)
                )
            rates[concurrency] = len(samples) / elapsed
            results[concurrency] = metrics
            print(
                f"concurrency {concurrency:>2}: {len(samples)} samples in {elapsed:6.2f} s "
                f"= {rates[concurrency]:6.2f} samples/s"
            )
    low, high = args.concurrency
    where = (
        "OpenAIChatModel -> scripted OpenAI-compatible HTTP server"
        if backend == "http"
        else "ScriptedChatModel(delay_s) in process (no HTTP)"
    )
    print(f"MLLM: {where}, {args.latency * 1000:.0f} ms per call")
    print(f"speed-up {high} vs {low}: {rates[high] / rates[low]:.2f}x")
    same = json.dumps(results[low], sort_keys=True) == json.dumps(results[high], sort_keys=True)
    print(f"metrics identical: {same} (gIoU {results[low]['gIoU']:.4f})")


if __name__ == "__main__":
    main()

"""Context policies compared on the same long sessions, at 4k, 8k and 16k token budgets.

A fixed suite of simulated sessions (seeded; 20-60 rounds each when nothing is evicted)
runs through the real agent loop (tools, renders, the policy under test) with a
simulated MLLM that acts only on what its context shows:

* it works down its own list of phrases, skipping every phrase it can *see* was tried
  (quoted in a reply, a result, the tried-phrases note, a digest or an archive line); a
  phrase it cannot see as tried is sent again and refused, a wasted round;
* it can select only when the image of the current masks is in its context: it "sees"
  which object each numbered mask covers from that image, nothing else;
* it examines the target masks once before selecting, and some decoys' masks too; it
  counts only the examine results it can see (a lost verdict is examined again);
* it applies the request's constraint ("only the ... on the left") only while the request
  is in its context; without it, it selects every target;
* it makes mistakes (replies with no tool call) at seeded rounds.

Every run has the same budgets (80 rounds, 20 corrections): each session of the suite
fits them when nothing is evicted, and a refused repeat counts as a correction.

Mask checks are answered by an oracle (accept the targets, reject the rest): they sit
outside the main context and are the same for every policy. Digest calls (``summary``)
are answered by a faithful extractor of the quoted phrases and results; ``attention``
gets a simulated attention signal (mass on the messages the model took facts from),
because no real model runs here.

Measures, per policy and budget, over the suite:

* accuracy: sessions that end with exactly the right masks;
* recall: share of key facts present in each context (the request, its constraint,
  every phrase tried so far, the current masks' image, the latest verdicts);
* ms/round: the policy's own time per call (from the eviction records), and digest
  calls per session (in brackets: calls a main call had to wait for; the others were
  written while the previous main call was in flight);
* tokens/session: prompt tokens of the main calls plus digest calls, counted by
  :mod:`sam3_agent.agent.context.tokens` (mask checks excluded: no policy changes them).

    python scripts/bench_context.py [--sessions 30] [--budgets 4096 8192 16384]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sam3_agent.agent.checkpoint import Checkpoint
from sam3_agent.agent.context.base import Context, ContextPolicy, History
from sam3_agent.agent.context.summary import DigestCall
from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.session import Session
from sam3_agent.agent.steps import current_masks_index
from sam3_agent.values.config import CONTEXT_POLICIES, AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.images import EncodedImage, ImageInput
from sam3_agent.values.messages import ChatMessage, ChatResponse, TokenUsage, ToolSpec

IMAGE_H, IMAGE_W = 384, 512
MAX_ROUNDS = 80
MAX_CORRECTIONS = 20
"""The agent's budgets in every run: a session of the suite fits them when nothing is
evicted; a policy that makes the model repeat refused phrases spends corrections."""
CONSTRAINT = "on the left"
QUOTED = re.compile(r'"([^"]{1,60})"')
CHECK_NUMBER = re.compile(r"mask\s+#?(\d+)", re.IGNORECASE)
THOUGHT = (
    "the image shows several animals near a fence and I should look at their position "
    "before choosing masks because the request names one side only and some shapes may "
    "be partly hidden behind others so a broader phrase could help or a narrower one"
)
WORDS = THOUGHT.split(" ")


# -- the world of one session --------------------------------------------------------


@dataclass(frozen=True)
class Thing:
    """One object in the scene."""

    kind: str
    left: bool
    box: tuple[int, int, int, int]
    score: float


@dataclass
class World:
    """A scene, the phrases the model will try, and its seeded habits."""

    seed: int
    things: list[Thing]
    target_kind: str
    phrases: list[str]
    decoys: dict[str, list[int]]
    examines_needed: int
    mistake_rounds: set[int]
    examine_decoys: set[str]

    @property
    def query(self) -> str:
        return f"only the {self.target_kind}s {CONSTRAINT} of the image"

    def answer(self) -> set[int]:
        return {i for i, t in enumerate(self.things) if t.kind == self.target_kind and t.left}

    def detections(self, indices: Sequence[int]) -> Detections:
        masks = np.zeros((len(indices), IMAGE_H, IMAGE_W), dtype=bool)
        boxes = np.zeros((len(indices), 4), dtype=np.float32)
        scores = np.zeros(len(indices), dtype=np.float32)
        for row, i in enumerate(indices):
            x0, y0, x1, y1 = self.things[i].box
            masks[row, y0:y1, x0:x1] = True
            boxes[row] = (x0, y0, x1, y1)
            scores[row] = self.things[i].score
        return Detections(masks=masks, boxes=boxes, scores=scores)

    def thing_by_score(self, score: float) -> int:
        return min(range(len(self.things)), key=lambda i: abs(self.things[i].score - score))


def make_world(seed: int) -> World:
    rng = np.random.default_rng(seed)
    kinds = ["cat", "dog", "bird", "chair", "bike"]
    target = str(rng.choice(kinds))
    things: list[Thing] = []
    scores = iter(np.linspace(0.97, 0.6, 12))
    cells = [(c, r) for r in range(3) for c in range(4)]
    rng.shuffle(cells)
    n_targets = int(rng.integers(2, 5))
    n_others = int(rng.integers(3, 6))
    for k in range(n_targets + n_others):
        col, row = cells[k]
        x0, y0 = 8 + col * 126, 8 + row * 125
        kind = target if k < n_targets else str(rng.choice([x for x in kinds if x != target]))
        things.append(Thing(kind, col < 2, (x0, y0, x0 + 100, y0 + 100), float(next(scores))))
    if not any(t.kind == target and t.left for t in things):  # the answer is never empty
        col, row = 0, 0
        things[0] = Thing(target, True, (8, 8, 108, 108), things[0].score)
    n_decoys = int(rng.integers(7, 32))
    decoys: dict[str, list[int]] = {}
    others = [i for i, t in enumerate(things) if t.kind != target]
    for d in range(n_decoys):
        phrase = f"{rng.choice(['small', 'furry', 'dark', 'round', 'tall', 'pale'])} thing {d + 1}"
        decoys[phrase] = (
            [] if rng.random() < 0.5 else sorted(rng.choice(others, size=2, replace=False))
        )
    phrases = [*decoys, target]
    mistakes = {int(r) for r in np.flatnonzero(rng.random(80) < rng.uniform(0.1, 0.3)) + 1}
    return World(
        seed=seed,
        things=things,
        target_kind=target,
        phrases=phrases,
        decoys=decoys,
        examines_needed=1,
        mistake_rounds=mistakes,
        examine_decoys={p for p in decoys if rng.random() < 0.5},
    )


class WorldSegmenter:
    """SAM 3 for a world: the target phrase finds every target; decoys what they cover."""

    def __init__(self, world: World) -> None:
        self.world = world

    def embed(self, image: Any) -> WorldSegmenter:
        return self

    @property
    def image_size(self) -> tuple[int, int]:
        return IMAGE_H, IMAGE_W

    def used_phrase(self, phrase: str) -> str:
        return phrase  # simulated phrases are short: never cut

    def segment(self, phrases: Sequence[str], score_threshold: float) -> list[Detections]:
        out = []
        for phrase in phrases:
            if phrase == self.world.target_kind:
                hits = [i for i, t in enumerate(self.world.things) if t.kind == phrase]
            else:
                hits = self.world.decoys.get(phrase, [])
            out.append(self.world.detections(hits))
        return out


# -- the simulated model -------------------------------------------------------------


@dataclass
class Perception:
    """What each masks image shows: image hash -> world object per mask number (1-based)."""

    shown: dict[str, list[int]] = field(default_factory=dict)


class SimulatedModel:
    """The MLLM of the benchmark: acts on its context only (see the module docstring)."""

    def __init__(self, world: World, perception: Perception) -> None:
        self.world = world
        self.perception = perception
        self.session: Session | None = None
        self.rng = np.random.default_rng(world.seed + 1)
        self.main_calls = 0
        self._attention: dict[int, list[float]] = {}

    name = "simulated"

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        system = messages[0].joined_text
        if "<verdict>" in system:
            return self._reply(self._verdict(messages))
        if "<digest>" in system:
            return self._reply(self._digest(messages))
        self.main_calls += 1
        text = self._act(messages)
        return self._reply(text)

    def _reply(self, text: str) -> ChatResponse:
        return ChatResponse(text=text, usage=TokenUsage(0, 0, 1))

    def _verdict(self, messages: Sequence[ChatMessage]) -> str:
        match = CHECK_NUMBER.search(messages[1].joined_text)
        if self.session is None or self.session.current is None or match is None:
            return "<verdict>Reject</verdict>"
        number = int(match.group(1))
        if not 1 <= number <= len(self.session.current):
            return "<verdict>Reject</verdict>"
        thing = self.world.thing_by_score(float(self.session.current.scores[number - 1]))
        ok = self.world.things[thing].kind == self.world.target_kind
        return f"<verdict>{'Accept' if ok else 'Reject'}</verdict>"

    def _digest(self, messages: Sequence[ChatMessage]) -> str:
        lines = []
        for line in messages[1].joined_text.splitlines():
            if "segment_phrase(" in line or "examine_each_mask checked" in line:
                lines.append(line.split("result: ", 1)[-1].split(". ")[0])
            elif "Refused:" in line:
                lines.append(line.split("result: ", 1)[-1].split(". ")[1])
        return "<digest>" + "; ".join(lines) + "</digest>"

    def _thinking(self) -> str:
        n = int(self.rng.integers(40, 120))
        return " ".join(self.rng.choice(WORDS, size=n))

    def _act(self, messages: Sequence[ChatMessage]) -> str:
        think = f"<think>{self._thinking()}</think>\n"
        self._attention[id(messages)] = attention_of(messages, self.world)
        if self.main_calls in self.world.mistake_rounds:
            return think + "I will now pick the masks."  # no tool call: a mistake
        view = read(messages, self.world, self.perception)
        if view.shown is not None and view.shown_are_targets:
            if view.examines_after_search < self.world.examines_needed:
                return think + call("examine_each_mask")
            chosen = [
                n
                for n, i in enumerate(view.shown, start=1)
                if not view.constraint_visible or self.world.things[i].left
            ]
            if chosen:
                return think + call("select_masks_and_return", final_answer_masks=chosen)
        if (
            view.shown
            and view.latest_phrase in self.world.examine_decoys
            and view.examines_after_search == 0
        ):
            return think + call("examine_each_mask")
        for phrase in self.world.phrases:
            if phrase not in view.tried:
                return think + call("segment_phrase", text_prompt=phrase)
        return think + call("report_no_mask")

    # Simulated attention: the policy ``attention`` reads it like a real model's.
    def record_attention(self) -> None:
        return None

    def last_message_attention(
        self, messages: Sequence[ChatMessage] | None = None
    ) -> list[float] | None:
        if messages is None:
            return None
        return self._attention.get(id(messages))


def call(name: str, **parameters: object) -> str:
    return "<tool>" + json.dumps({"name": name, "parameters": parameters}) + "</tool>"


@dataclass
class View:
    """What the model can read off one context."""

    tried: set[str]
    shown: list[int] | None
    shown_are_targets: bool
    examines_after_search: int
    constraint_visible: bool
    latest_phrase: str | None


def read(messages: Sequence[ChatMessage], world: World, perception: Perception) -> View:
    body = messages[1:]
    text = "\n".join(m.joined_text for m in body)
    tried = {p for p in QUOTED.findall(text) if p in world.phrases}
    shown = None
    for m in body[1:]:
        for image in m.images:
            shown = perception.shown.get(image.sha256, shown)
    results = [m.joined_text for m in body[1:] if m.role == "user"]
    examines, latest = 0, None
    for r in results:
        if "segment_phrase(" in r and "found" in r:
            examines = 0
            found = QUOTED.search(r)
            latest = found.group(1) if found else None
        elif "examine_each_mask checked" in r:
            examines += 1
    targets = shown is not None and all(world.things[i].kind == world.target_kind for i in shown)
    return View(tried, shown, targets, examines, CONSTRAINT in text, latest)


def attention_of(messages: Sequence[ChatMessage], world: World) -> list[float]:
    weights = []
    for m in messages:
        t = m.joined_text
        w = 1.0 + 4.0 * bool(m.images) + 3.0 * any(f'"{p}"' in t for p in world.phrases)
        weights.append(w + 2.0 * ("examine_each_mask checked" in t))
    total = sum(weights)
    return [w / total for w in weights]


# -- key-information recall, measured on every context the policy builds ----------------


@dataclass
class RecallProbe:
    """Wraps a policy; scores every context it builds against the history's key facts."""

    inner: ContextPolicy
    name: str = ""
    found: int = 0
    facts: int = 0
    latency_s: list[float] = field(default_factory=list)
    waited_digests: int = 0

    def __post_init__(self) -> None:
        self.name = self.inner.name

    async def build(self, history: History) -> Context:
        context = await self.inner.build(history)
        record = context.eviction
        if record is not None:
            self.latency_s.append(record.latency_s)
            if record.digests and record.digests["blocking_call_rounds"]:
                self.waited_digests += 1
        self._score(history, context)
        return context

    async def aclose(self) -> None:
        aclose = getattr(self.inner, "aclose", None)
        if aclose is not None:
            await aclose()

    def _score(self, history: History, context: Context) -> None:
        text = "\n".join(m.joined_text for m in context.messages[1:])
        steps = history.steps
        checks = [history.task.query in text, CONSTRAINT in text]
        checks += [f'"{s.phrase}"' in text for s in steps if s.kind == "segment" and s.phrase]
        current = current_masks_index(steps)
        if current is not None:
            image = steps[current].observation.image
            checks.append(any(image in m.images for m in context.messages))
        latest_examine = max((i for i, s in enumerate(steps) if s.kind == "examine"), default=-1)
        latest_segment = max((i for i, s in enumerate(steps) if s.kind == "segment"), default=-1)
        if latest_examine > latest_segment:
            verdict = steps[latest_examine].observation.text.split(":")[0]
            checks.append(verdict in text)
        self.found += sum(checks)
        self.facts += len(checks)


class BenchAgent(Sam3Agent):
    """The real agent, with two probes: what each masks image shows, and recall."""

    def __init__(self, world: World, config: AgentConfig) -> None:
        self.perception = Perception()
        self.model = SimulatedModel(world, self.perception)
        super().__init__(WorldSegmenter(world), self.model, config)  # type: ignore[arg-type]
        self.probe: RecallProbe | None = None
        self.digest_calls: list[DigestCall] = []

    def _new_session(
        self, image: ImageInput, query: str, out: Path | None, resume: bool = False
    ) -> tuple[Session, Checkpoint]:
        session, checkpoint = super()._new_session(image, query, out, resume)
        perception, original = self.perception, session.show_masks

        async def show_masks(detections: Detections) -> EncodedImage:
            image = await original(detections)
            world = self.model.world
            perception.shown[image.sha256] = [
                world.thing_by_score(float(s)) for s in detections.scores
            ]
            return image

        session.show_masks = show_masks  # type: ignore[method-assign]
        self.model.session = session
        return session, checkpoint

    def _context_policy(self, session: Session) -> ContextPolicy:
        inner = super()._context_policy(session)
        self.probe = RecallProbe(inner)
        return self.probe


# -- the run ---------------------------------------------------------------------------


@dataclass
class Outcome:
    correct: bool
    rounds: int
    failed: bool
    found: int
    facts: int
    latency_s: list[float]
    digest_calls: int
    waited_digests: int
    tokens: int


def run_session(world: World, policy: str, budget: int) -> Outcome:
    config = AgentConfig(
        context_policy=policy,
        max_context_tokens=budget,
        max_rounds=MAX_ROUNDS,
        max_corrections=MAX_CORRECTIONS,
        max_image_side=512,
    )
    agent = BenchAgent(world, config)
    image = np.full((IMAGE_H, IMAGE_W, 3), 128, dtype=np.uint8)
    result = agent.run(image, world.query)
    chosen = {world.thing_by_score(float(s)) for s in result.detections.scores}
    probe = agent.probe
    if probe is None:
        raise RuntimeError("the agent never built a context policy")
    estimated = result.usage.estimated
    tokens = sum(estimated[p]["text"] + estimated[p]["image"] for p in ("main", "digests"))
    return Outcome(
        correct=result.status == "masks" and chosen == world.answer(),
        rounds=result.rounds,
        failed=result.status == "failed",
        found=probe.found,
        facts=probe.facts,
        latency_s=probe.latency_s,
        digest_calls=result.usage.digests.calls,
        waited_digests=probe.waited_digests,
        tokens=tokens,
    )


def sessions(count: int) -> list[World]:
    """``count`` worlds whose uninterrupted session (keep-all, no budget) has 20-60 rounds."""
    worlds: list[World] = []
    seed = 0
    while len(worlds) < count:
        world = make_world(seed)
        seed += 1
        reference = run_session(world, "keep-all", 200_000)
        if 20 <= reference.rounds <= 60 and reference.correct:
            worlds.append(world)
    return worlds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--budgets", type=int, nargs="+", default=[4096, 8192, 16384])
    parser.add_argument("--policies", nargs="+", default=list(CONTEXT_POLICIES))
    args = parser.parse_args()
    started = time.perf_counter()
    worlds = sessions(args.sessions)
    reference = [run_session(w, "keep-all", 200_000).rounds for w in worlds]
    print(
        f"{len(worlds)} sessions, {min(reference)}-{max(reference)} rounds each "
        f"(median {statistics.median(reference):.0f}) when nothing is evicted"
    )
    header = (
        f"| {'policy':<12} | {'budget':>6} | {'accuracy':>8} | {'recall':>6} | "
        f"{'ms/round':>8} | {'digests (waited)':>16} | {'tokens/session':>14} | "
        f"{'rounds':>6} | {'failed':>6} |"
    )
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for policy in args.policies:
        for budget in args.budgets:
            outcomes = [run_session(w, policy, budget) for w in worlds]
            latencies = [x for o in outcomes for x in o.latency_s]
            recall = sum(o.found for o in outcomes) / max(1, sum(o.facts for o in outcomes))
            digests = (
                f"{statistics.mean(o.digest_calls for o in outcomes):.1f} "
                f"({statistics.mean(o.waited_digests for o in outcomes):.1f})"
            )
            print(
                f"| {policy:<12} | {budget // 1024:>5}k | "
                f"{sum(o.correct for o in outcomes) / len(outcomes):>8.0%} | "
                f"{recall:>6.0%} | "
                f"{statistics.mean(latencies) * 1e3 if latencies else 0.0:>8.2f} | "
                f"{digests:>16} | "
                f"{statistics.mean(o.tokens for o in outcomes):>14,.0f} | "
                f"{statistics.mean(o.rounds for o in outcomes):>6.1f} | "
                f"{sum(o.failed for o in outcomes):>6} |",
                flush=True,
            )
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()

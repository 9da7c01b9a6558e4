"""Context policies compared on long sessions whose answer needs facts from early rounds.

Each simulated session runs through the real agent loop (tools, renders, the policy under
test) with a simulated MLLM whose every decision depends on what its context holds. A
session plants key information of every kind a real session produces:

* **tried**: the phrases already sent (the model goes down its list of phrases to rule
  out and sends again one it cannot see was tried: refused, a correction spent);
* **count**: how many masks each candidate phrase found (at the end the model segments
  again the candidate that found the most it can see; with none in view, its first guess);
* **verdict**: which masks an examine of the best candidate accepted, by number before
  renumbering ("Accepted masks from the previous numbering: 2, 4"), needed about 20 rounds
  later, when the model selects those numbers on the same phrase's masks, searched once
  more (without it: every mask);
* **note**: the model's own note in its first reasoning ("NOTE: the wanted cats wear a
  red collar"), needed only for the final choice (without it: every colour);
* **correction**: a refused call to a tool that does not exist (``zoom_in``); the model
  has the urge again every few rounds and repeats it unless it can see the refusal;
* **constraint**: stated in the request ("on the left"); without it, both sides.

A fact counts as present when its text is in the context: in a round, a digest, an
archive line or a note (the model reads it there, as the recall probe does). The answer is
right only when every fact it needs was present at the call that needed it.

Mask checks are answered by an oracle (accept the target kind); they sit outside the main
context and are the same for every policy. Digest calls (``summary``) are answered by a
faithful extractor of what ``digest_system.j2`` asks for (phrases and counts, verdicts with
mask numbers, the assistant's notes, refusals), cut to the digest's token cap like a real
one. ``attention`` gets a simulated attention signal (mass on the messages holding
facts), because no real model runs here.

Two reference rows frame the table: ``keep-all`` with an unbounded budget (the ceiling:
every fact in every call) and ``pinned-only`` (the floor: the system prompt, the request,
the selectable masks and the latest round, nothing else; defined here, not selectable).

Per policy and budget, over the suite: accuracy (sessions ending with exactly the right
masks); recall, overall and per kind of fact (share of the facts established so far that
each context holds, over every call); tokens per session (prompt tokens of main and
digest calls, counted by :mod:`sam3_agent.agent.context.tokens`); the policy's own time per
round; digest calls per session (in brackets those a main call waited for); rounds; failed
sessions (out of rounds, corrections or budget).

    python -m scripts.bench context [--sessions 20] [--budgets 4096 6144 8192]
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
from sam3_agent.agent.context.policy import BudgetedPolicy, ContextPolicy
from sam3_agent.agent.context.types import Budget, Context, Costs, Decision, History
from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.session import Session
from sam3_agent.values.config import CONTEXT_POLICIES, AgentConfig
from sam3_agent.values.detections import Detections, Exemplars
from sam3_agent.values.images import EncodedImage, ImageInput
from sam3_agent.values.messages import ChatMessage, ChatResponse, TokenUsage, ToolSpec

IMAGE_H, IMAGE_W = 384, 512
MAX_ROUNDS = 60
MAX_CORRECTIONS = 6
"""The agent's budgets in every run: every session fits them when nothing is lost; a
policy that hides tried phrases or the refusal makes the model spend corrections."""
UNBOUNDED = 1_000_000
PINNED_ONLY = "pinned-only"
CONSTRAINT = "on the left"
KINDS = ("tried", "count", "verdict", "note", "correction", "constraint")
BAD_TOOL = "zoom_in"
REFUSAL = f'no tool named "{BAD_TOOL}"'
ACCEPTED = re.compile(r"Accepted masks? from the previous numbering: ([\d, ]+)")
CHECK_NUMBER = re.compile(r"mask\s+#?(\d+)", re.IGNORECASE)
COLOURS = ("red", "blue", "green", "yellow")
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
    colour: str
    box: tuple[int, int, int, int]
    score: float


@dataclass
class World:
    """A scene, what each phrase finds, and the model's plan for the session."""

    seed: int
    things: list[Thing]
    target: str
    colour: str
    candidates: list[str]
    best: str
    finds: dict[str, list[int]]
    decoys: list[str]
    urges: set[int]

    @property
    def query(self) -> str:
        return f"the {self.target}s {CONSTRAINT} of the image that I described to you"

    @property
    def note(self) -> str:
        return f"NOTE: the wanted {self.target}s wear a {self.colour} collar."

    @property
    def again(self) -> str:
        return f"{self.best} once more"

    def answer(self) -> set[int]:
        return {
            i
            for i, t in enumerate(self.things)
            if t.kind == self.target and t.left and t.colour == self.colour
        }

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
    """A seeded scene: targets of both sides and colours among decoy objects."""
    rng = np.random.default_rng(seed)
    kinds = ["cat", "dog", "bird", "goat"]
    target = str(rng.choice(kinds))
    colour = str(rng.choice(COLOURS))
    other_colour = str(rng.choice([c for c in COLOURS if c != colour]))
    cells = [(c, r) for r in range(3) for c in range(4)]
    rng.shuffle(cells)
    scores = iter(np.linspace(0.97, 0.6, 12))
    # Targets: one wanted (left, the note's colour), one of another colour on the left, one
    # on the right: each fact rules out a different one.
    plan = [(True, colour), (True, other_colour), (False, colour)]
    plan += [
        (bool(rng.random() < 0.5), str(rng.choice(COLOURS))) for _ in range(rng.integers(0, 2))
    ]
    things: list[Thing] = []
    lefts = [c for c in cells if c[0] < 2]
    rights = [c for c in cells if c[0] >= 2]
    for left, c in plan:
        col, row = (lefts if left else rights).pop()
        x0, y0 = 8 + col * 126, 8 + row * 125
        things.append(Thing(target, left, c, (x0, y0, x0 + 100, y0 + 100), float(next(scores))))
    for _ in range(int(rng.integers(3, 5))):
        pool = lefts if (rng.random() < 0.5 and lefts) or not rights else rights
        col, row = pool.pop()
        kind = str(rng.choice([k for k in kinds if k != target]))
        x0, y0 = 8 + col * 126, 8 + row * 125
        c = str(rng.choice(COLOURS))
        things.append(Thing(kind, col < 2, c, (x0, y0, x0 + 100, y0 + 100), float(next(scores))))
    order = sorted(range(len(things)), key=lambda i: -things[i].score)
    targets = [i for i in order if things[i].kind == target]
    others = [i for i in order if things[i].kind != target]
    # Candidates: the best finds every target and a decoy (so the examine rejects one);
    # the others find fewer masks.
    n = int(rng.integers(3, 6))
    adjectives = rng.permutation(["small", "furry", "sitting", "grey", "young", "striped"])
    candidates = [f"{a} {target}" for a in adjectives[:n]]
    best_at = int(rng.integers(1, n))  # never first: the model's first guess is wrong
    best = candidates[best_at]
    finds: dict[str, list[int]] = {}
    for k, phrase in enumerate(candidates):
        if k == best_at:
            hits = sorted([*targets, others[0]], key=lambda i: -things[i].score)
        else:
            size = int(rng.integers(1, len(targets)))
            hits = sorted(
                rng.choice(targets, size=size, replace=False).tolist(),
                key=lambda i: -things[i].score,
            )
        finds[phrase] = hits
    for phrase in candidates:  # the model searches its chosen candidate again twice
        finds[f"{phrase} again"] = finds[f"{phrase} once more"] = finds[phrase]
    decoys = [
        f"{rng.choice(['dark', 'round', 'tall', 'pale', 'shiny'])} shape {d + 1}"
        for d in range(int(rng.integers(12, 22)))
    ]
    for d in decoys:
        finds[d] = (
            [] if rng.random() < 0.5 else sorted(rng.choice(others, size=2, replace=False).tolist())
        )
    start = n + 3
    urges = {start + 6 * k for k in range(8)}
    return World(seed, things, target, colour, candidates, best, finds, decoys, urges)


class WorldSegmenter:
    """SAM 3 for a world: each phrase finds the objects the world says, highest score first."""

    def __init__(self, world: World) -> None:
        self.world = world

    def embed(self, image: Any) -> WorldSegmenter:
        return self

    @property
    def image_size(self) -> tuple[int, int]:
        return IMAGE_H, IMAGE_W

    def used_phrase(self, phrase: str) -> str:
        return phrase

    def segment(
        self, phrases: Sequence[str], score_threshold: float, exemplars: Exemplars | None = None
    ) -> list[Detections]:
        return [self.world.detections(self.world.finds.get(p, [])) for p in phrases]


# -- what a context holds --------------------------------------------------------------


def context_text(messages: Sequence[ChatMessage]) -> str:
    """Everything the model reads besides the system prompt."""
    return "\n".join(m.joined_text for m in messages[1:])


def count_seen(text: str, phrase: str, count: int) -> bool:
    """The context says how many masks ``phrase`` found."""
    unit = "mask" if count == 1 else "masks"
    found = "found no masks" if count == 0 else f"found {count} {unit}"
    return f'"{phrase}") {found}' in text or f'"{phrase}": {found}' in text


def accepted_seen(text: str) -> list[int] | None:
    """The mask numbers the latest visible examine accepted (before renumbering)."""
    found = ACCEPTED.findall(text)
    if not found:
        return None
    return [int(n) for n in found[-1].replace(" ", "").split(",") if n]


@dataclass
class Fact:
    """A key fact: its kind, the round that established it, how to find it in a context."""

    kind: str
    round: int
    needle: str = ""
    phrase: str = ""
    count: int = -1

    def present(self, text: str) -> bool:
        if self.kind == "count":
            return count_seen(text, self.phrase, self.count)
        if self.kind == "tried":
            return f'"{self.phrase}"' in text
        return self.needle in text


# -- the simulated model -------------------------------------------------------------


@dataclass
class Perception:
    """What each masks image shows: image hash -> world object per mask number (1-based)."""

    shown: dict[str, list[int]] = field(default_factory=dict)


class SimulatedModel:
    """The MLLM of the benchmark: every decision reads its context (module docstring)."""

    name = "simulated"

    def __init__(self, world: World, perception: Perception) -> None:
        self.world = world
        self.perception = perception
        self.session: Session | None = None
        self.rng = np.random.default_rng(world.seed + 1)
        self.calls = 0
        self.explored = 0
        self.final_step = 0
        self._attention: dict[int, list[float]] = {}

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        system = messages[0].joined_text
        if "<verdict>" in system:
            return self._reply(self._verdict(messages))
        if "<digest>" in system:
            return self._reply(digest_of(messages[1].joined_text))
        self.calls += 1
        self._attention[id(messages)] = attention_of(messages, self.world)
        return self._reply(self._act(messages))

    def _reply(self, text: str) -> ChatResponse:
        return ChatResponse(text=text, usage=TokenUsage(0, 0, 1))

    def _verdict(self, messages: Sequence[ChatMessage]) -> str:
        match = CHECK_NUMBER.search(messages[1].joined_text)
        current = None if self.session is None else self.session.current
        if current is None or match is None or not 1 <= int(match.group(1)) <= len(current):
            return "<verdict>Reject</verdict>"
        thing = self.world.thing_by_score(float(current.scores[int(match.group(1)) - 1]))
        ok = self.world.things[thing].kind == self.world.target
        return f"<verdict>{'Accept' if ok else 'Reject'}</verdict>"

    def _think(self, extra: str = "") -> str:
        words = " ".join(self.rng.choice(WORDS, size=int(self.rng.integers(40, 110))))
        return f"<think>{extra}{words}</think>\n"

    def _act(self, messages: Sequence[ChatMessage]) -> str:
        world = self.world
        text = context_text(messages)
        if self.calls == 1:  # the note is written once, in the first reasoning
            return self._think(world.note + " ") + call(
                "segment_phrase", text_prompt=world.candidates[0]
            )
        think = self._think()
        if self.calls in world.urges and REFUSAL not in text:
            return think + call(BAD_TOOL, factor=2)
        untried = [p for p in world.candidates if f'"{p}"' not in text]
        if self.calls <= len(world.candidates) and untried:
            return think + call("segment_phrase", text_prompt=untried[0])
        if self.calls == len(world.candidates) + 1:  # the best so far, to examine it
            return think + call("segment_phrase", text_prompt=f"{self._best(text)} again")
        if self.calls == len(world.candidates) + 2:
            return think + call("examine_each_mask")
        if self.explored < len(world.decoys):
            self.explored += 1
            phrase = next((p for p in world.decoys if f'"{p}"' not in text), world.decoys[0])
            return think + call("segment_phrase", text_prompt=phrase)
        self.final_step += 1
        if self.final_step == 1:
            return think + call("segment_phrase", text_prompt=f"{self._best(text)} once more")
        return think + call(
            "select_masks_and_return", final_answer_masks=self._choose(messages, text)
        )

    def _best(self, text: str) -> str:
        """The candidate that found the most masks, among those whose count it can see."""
        seen = [
            (len(self.world.finds[p]), -k, p)
            for k, p in enumerate(self.world.candidates)
            if count_seen(text, p, len(self.world.finds[p]))
        ]
        return max(seen)[2] if seen else self.world.candidates[0]

    def _choose(self, messages: Sequence[ChatMessage], text: str) -> list[int]:
        shown: list[int] = []
        for m in messages[2:]:
            for image in m.images:
                shown = self.perception.shown.get(image.sha256, shown)
        numbers = list(range(1, len(shown) + 1))
        accepted = accepted_seen(text)
        if accepted is not None:
            numbers = [n for n in numbers if n in accepted]
        world = self.world
        if world.note in text:
            numbers = [n for n in numbers if world.things[shown[n - 1]].colour == world.colour]
        if CONSTRAINT in text:
            numbers = [n for n in numbers if world.things[shown[n - 1]].left]
        return numbers or [1]

    # Simulated attention: the policy ``attention`` reads it like a real model's.
    def record_attention(self) -> None:
        return None

    def last_message_attention(
        self, messages: Sequence[ChatMessage] | None = None
    ) -> list[float] | None:
        return None if messages is None else self._attention.get(id(messages))


def call(name: str, **parameters: object) -> str:
    return "<tool>" + json.dumps({"name": name, "parameters": parameters}) + "</tool>"


def digest_of(request: str) -> str:
    """A faithful digest: what ``digest_system.j2`` asks for, in the rounds' own words."""
    lines = []
    for line in request.splitlines():
        body = line.split(": ", 1)[-1]
        if "] assistant: " in line:
            lines += re.findall(r"NOTE: [^.]*\.", body)
        elif "] result: " in line:
            if body.startswith("segment_phrase("):
                lines.append(body.split(". ")[0])
            elif body.startswith("examine_each_mask"):
                lines.append(". ".join(body.split(". ")[:2]))
            elif body.startswith(("There is no tool", "Refused:")):
                lines.append(body.split(". ")[0])
    return "<digest>" + "\n".join(lines) + "</digest>"


def attention_of(messages: Sequence[ChatMessage], world: World) -> list[float]:
    weights = []
    for m in messages:
        t = m.joined_text
        w = 1.0 + 4.0 * bool(m.images) + 3.0 * ("found" in t) + 3.0 * ("NOTE:" in t)
        weights.append(w + 2.0 * ("Accepted" in t) + 2.0 * (REFUSAL in t))
    total = sum(weights)
    return [w / total for w in weights]


# -- the floor, and the probe that scores every context -------------------------------


class PinnedOnlyPolicy(BudgetedPolicy):
    """The floor: system prompt, request, selectable masks and latest round; nothing else."""

    name = PINNED_ONLY

    def select(self, history: History, costs: Costs) -> Decision:
        return Decision(sorted(costs.protected()))


def facts_of(history: History, world: World) -> list[Fact]:
    """The key facts the history has established so far."""
    facts = [Fact("constraint", 0, needle=CONSTRAINT)]
    for step in history.steps:
        if step.round == 1:
            facts.append(Fact("note", 1, needle=world.note))
        if step.kind == "segment" and step.phrase:
            facts.append(Fact("tried", step.round, phrase=step.phrase))
            if step.phrase in world.candidates:
                count = len(world.finds[step.phrase])
                facts.append(Fact("count", step.round, phrase=step.phrase, count=count))
        if step.kind == "examine":
            accepted = ACCEPTED.search(step.observation.text)
            if accepted:
                facts.append(Fact("verdict", step.round, needle=accepted.group(0)))
        if step.kind == "correction" and REFUSAL in step.observation.text:
            facts.append(Fact("correction", step.round, needle=REFUSAL))
    return facts


@dataclass
class RecallProbe:
    """Wraps a policy; scores every context it builds against the facts established so far."""

    inner: Any
    world: World
    name: str = ""
    found: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    facts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
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
        text = context_text(context.messages)
        for fact in facts_of(history, self.world):
            self.facts[fact.kind] += 1
            self.found[fact.kind] += fact.present(text)
        return context

    async def save_state(self) -> dict[str, Any] | None:
        return await self.inner.save_state()

    def restore_state(self, state: dict[str, Any]) -> None:
        self.inner.restore_state(state)

    async def settle(self) -> None:
        await self.inner.settle()

    async def aclose(self) -> None:
        await self.inner.aclose()


class BenchAgent(Sam3Agent):
    """The real agent, with two probes: what each masks image shows, and recall."""

    def __init__(self, world: World, config: AgentConfig, pinned_only: bool = False) -> None:
        self.world = world
        self.perception = Perception()
        self.model = SimulatedModel(world, self.perception)
        super().__init__(WorldSegmenter(world), self.model, config)  # type: ignore[arg-type]
        self.pinned_only = pinned_only
        self.probe: RecallProbe | None = None

    def _new_session(
        self, image: ImageInput, query: str, out: Path | None, resume: bool = False
    ) -> tuple[Session, Checkpoint]:
        session, checkpoint = super()._new_session(image, query, out, resume)
        perception, original = self.perception, session.show_masks

        async def show_masks(detections: Detections) -> EncodedImage:
            image = await original(detections)
            perception.shown[image.sha256] = [
                self.world.thing_by_score(float(s)) for s in detections.scores
            ]
            return image

        session.show_masks = show_masks  # type: ignore[method-assign]
        self.model.session = session
        return session, checkpoint

    def _context_policy(self, session: Session) -> ContextPolicy:
        inner: Any = super()._context_policy(session)
        if self.pinned_only:
            c = self.config
            budget = Budget(c.max_context_tokens, c.context_reserve_tokens, c.context_watermark)
            inner = PinnedOnlyPolicy(budget, self.token_counter)
        self.probe = RecallProbe(inner, self.world)
        return self.probe


# -- the run ---------------------------------------------------------------------------


@dataclass
class Outcome:
    correct: bool
    rounds: int
    failed: bool
    found: dict[str, int]
    facts: dict[str, int]
    latency_s: list[float]
    digest_calls: int
    waited_digests: int
    tokens: int


def run_session(world: World, policy: str, budget: int) -> Outcome:
    """One session of ``world`` under ``policy`` (a registered name or ``pinned-only``)."""
    config = AgentConfig(
        context_policy="sam3" if policy == PINNED_ONLY else policy,
        max_context_tokens=budget,
        max_rounds=MAX_ROUNDS,
        max_corrections=MAX_CORRECTIONS,
        max_image_side=512,
    )
    agent = BenchAgent(world, config, pinned_only=policy == PINNED_ONLY)
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
    """``count`` worlds whose uninterrupted session (keep-all, unbounded) answers right."""
    worlds: list[World] = []
    seed = 0
    while len(worlds) < count:
        world = make_world(seed)
        seed += 1
        if run_session(world, "keep-all", UNBOUNDED).correct:
            worlds.append(world)
    return worlds


@dataclass
class Row:
    policy: str
    budget: int
    outcomes: list[Outcome]

    @property
    def accuracy(self) -> float:
        return sum(o.correct for o in self.outcomes) / len(self.outcomes)

    def recall(self, kind: str | None = None) -> float:
        kinds = KINDS if kind is None else (kind,)
        found = sum(o.found[k] for o in self.outcomes for k in kinds)
        facts = sum(o.facts[k] for o in self.outcomes for k in kinds)
        return found / facts if facts else 1.0

    def line(self) -> str:
        latencies = [x for o in self.outcomes for x in o.latency_s]
        budget = "∞" if self.budget >= UNBOUNDED else f"{self.budget / 1024:g}k"
        digests = (
            f"{statistics.mean(o.digest_calls for o in self.outcomes):.1f} "
            f"({statistics.mean(o.waited_digests for o in self.outcomes):.1f})"
        )
        kinds = " | ".join(f"{self.recall(k):>{max(5, len(k))}.0%}" for k in KINDS)
        return (
            f"| {self.policy:<12} | {budget:>6} | {self.accuracy:>8.0%} | {self.recall():>6.0%} | "
            f"{kinds} | {statistics.mean(o.tokens for o in self.outcomes):>14,.0f} | "
            f"{statistics.mean(latencies) * 1e3 if latencies else 0.0:>8.2f} | {digests:>10} | "
            f"{statistics.mean(o.rounds for o in self.outcomes):>6.1f} | "
            f"{sum(o.failed for o in self.outcomes):>6} |"
        )


def header() -> str:
    kinds = " | ".join(f"{k:>{max(5, len(k))}}" for k in KINDS)
    return (
        f"| {'policy':<12} | {'budget':>6} | {'accuracy':>8} | {'recall':>6} | {kinds} | "
        f"{'tokens/session':>14} | {'ms/round':>8} | {'digests':>10} | {'rounds':>6} | "
        f"{'failed':>6} |"
    )


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--budgets", type=int, nargs="+", default=[4096, 6144, 8192])
    parser.add_argument("--policies", nargs="+", default=list(CONTEXT_POLICIES))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    worlds = sessions(args.sessions)
    rows = [Row("keep-all", UNBOUNDED, [run_session(w, "keep-all", UNBOUNDED) for w in worlds])]
    floor_budget = min(args.budgets)
    rows.append(
        Row(PINNED_ONLY, floor_budget, [run_session(w, PINNED_ONLY, floor_budget) for w in worlds])
    )
    rounds = [o.rounds for o in rows[0].outcomes]
    print(
        f"{len(worlds)} sessions, {min(rounds)}-{max(rounds)} rounds each "
        f"(median {statistics.median(rounds):.0f}) when nothing is lost"
    )
    top = header()
    print(top)
    print("|" + "|".join("-" * len(c) for c in top.split("|")[1:-1]) + "|")
    for row in rows:
        print(row.line(), flush=True)
    for policy in args.policies:
        for budget in args.budgets:
            row = Row(policy, budget, [run_session(w, policy, budget) for w in worlds])
            rows.append(row)
            print(row.line(), flush=True)
    ceiling, floor = rows[0], rows[1]
    print(
        f"ceiling - floor: accuracy {100 * (ceiling.accuracy - floor.accuracy):.0f} points, "
        f"recall {100 * (ceiling.recall() - floor.recall()):.0f} points "
        f"({time.perf_counter() - started:.0f} s)"
    )
    return rows


if __name__ == "__main__":
    main()

"""The sam3 policy's three-part pruning as a pure function, property-tested over random histories."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sam3_agent.agent.context.sam3 import MAX_MESSAGES, anchor_index, build_context
from sam3_agent.agent.parsing import ToolCall
from sam3_agent.agent.steps import ActionStep, Observation, StepKind, TaskStep, current_masks_index
from sam3_agent.values.images import EncodedImage

SYSTEM = "system prompt"
_PIXELS = np.zeros((4, 4, 3), dtype=np.uint8)
TASK = TaskStep("the cat", EncodedImage.encode(_PIXELS, "input"))


def step(i: int, kind: StepKind, *, image: bool = False, phrase: str | None = None) -> ActionStep:
    shown = EncodedImage.encode(_PIXELS, f"r{i}") if image else None
    call = ToolCall("segment_phrase", {"text_prompt": phrase}) if phrase else None
    return ActionStep(
        round=i,
        reply=f"reply {i}",
        kind=kind,
        observation=Observation(f"result {i}", shown, f"[image {i} dropped]", f"[image {i} gone]"),
        call=call,
        phrase=phrase,
    )


def test_no_history_is_system_and_task() -> None:
    context = build_context(SYSTEM, TASK, [])
    assert [m.role for m in context.messages] == ["system", "user"]
    assert context.messages[1].images == [TASK.image]


def test_anchor_is_latest_executed_segment_not_a_refusal() -> None:
    steps = [
        step(1, "segment", image=True, phrase="dog"),
        step(2, "segment", image=True, phrase="cat"),
        step(3, "correction"),  # e.g. "cat" again, refused
    ]
    assert anchor_index(steps) == 1
    context = build_context(SYSTEM, TASK, steps)
    assert context.kept_rounds == [2, 3]
    assert context.dropped_rounds == [1]
    assert context.tried_phrases == ["dog"]
    assert '"dog"' in context.messages[1].joined_text
    assert sum(len(m.images) for m in context.messages) == 2
    assert context.messages[3].images  # the current masks' image is still shown


def test_older_images_become_text_after_examine() -> None:
    steps = [
        step(1, "segment", image=True, phrase="cat"),
        step(2, "examine", image=True),
        step(3, "examine", image=True),
    ]
    context = build_context(SYSTEM, TASK, steps)
    assert context.kept_rounds == [1, 3]
    assert context.images_replaced == [1]
    assert "[image 1 dropped]" in context.messages[3].joined_text
    assert context.messages[5].images


def test_no_stale_image_after_every_mask_was_rejected() -> None:
    steps = [
        step(1, "segment", image=True, phrase="cat"),
        step(2, "examine"),  # every mask rejected: no image, no current masks
        step(3, "correction"),
    ]
    context = build_context(SYSTEM, TASK, steps)
    assert context.kept_rounds == [1, 2, 3]
    assert sum(len(m.images) for m in context.messages) == 1  # the raw image only
    assert "[image 1 gone]" in context.messages[3].joined_text
    assert "dropped" not in context.messages[3].joined_text


def test_no_stale_image_after_a_phrase_found_nothing() -> None:
    steps = [step(1, "segment", image=True, phrase="cat"), step(2, "segment", phrase="dog")]
    context = build_context(SYSTEM, TASK, steps)
    assert sum(len(m.images) for m in context.messages) == 1


def test_corrections_before_any_segment_keep_only_the_latest() -> None:
    steps = [step(i, "correction") for i in range(1, 5)]
    context = build_context(SYSTEM, TASK, steps)
    assert context.kept_rounds == [4]
    assert len(context.messages) == 4


def test_no_note_when_only_the_anchor_phrase_was_tried() -> None:
    context = build_context(SYSTEM, TASK, [step(1, "segment", image=True, phrase="cat")])
    assert "already sent" not in context.messages[1].joined_text


def test_pruning_does_not_mutate_the_history() -> None:
    steps = [step(1, "segment", image=True, phrase="a"), step(2, "segment", phrase="b")]
    before = list(steps)
    build_context(SYSTEM, TASK, steps)
    assert steps == before


history = st.lists(
    st.tuples(
        st.sampled_from(["segment", "examine", "correction"]),
        st.booleans(),
    ),
    max_size=40,
)


def make_history(spec: list[tuple[str, bool]]) -> list[ActionStep]:
    steps = []
    for i, (kind, has_image) in enumerate(spec, start=1):
        phrase = f"phrase {i}" if kind == "segment" else None
        image = has_image and kind != "correction"
        steps.append(step(i, kind, image=image, phrase=phrase))  # type: ignore[arg-type]
    return steps


@settings(max_examples=300, deadline=None)
@given(history)
def test_invariants_over_random_histories(spec: list[tuple[str, bool]]) -> None:
    steps = make_history(spec)
    context = build_context(SYSTEM, TASK, steps)
    messages = context.messages
    # Part 1 always kept, byte for byte.
    assert messages[0].joined_text == SYSTEM
    assert messages[1].images == [TASK.image]
    # Bounded context: at most two images, at most MAX_MESSAGES messages.
    assert sum(len(m.images) for m in messages) <= 2
    assert len(messages) <= MAX_MESSAGES
    # Roles alternate after the system prompt.
    assert [m.role for m in messages[1:]] == ["user"] + ["assistant", "user"] * (
        (len(messages) - 2) // 2
    )
    # Kept rounds are in order; the anchor (if any) is kept and nothing before it is.
    assert context.kept_rounds == sorted(context.kept_rounds)
    anchor = anchor_index(steps)
    if anchor is not None:
        assert context.kept_rounds[0] == steps[anchor].round
        # The note lists exactly the phrases executed before the anchor, in order.
        expected = [s.phrase for s in steps[:anchor] if s.kind == "segment"]
        assert context.tried_phrases == expected
    # Every round is either kept or dropped.
    assert sorted(context.kept_rounds + context.dropped_rounds) == [s.round for s in steps]
    # The selectable masks' image is shown, and no other image of masks.
    shown = [img for m in messages[2:] for img in m.images]
    current = current_masks_index(steps)
    expected_images = [] if current is None else [steps[current].observation.image]
    assert shown == expected_images

"""The in-process SAM 3 backend, on a tiny random model (no weights needed)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sam3_agent.backends.base import ImageEmbedding, Segmenter
from sam3_agent.backends.sam3_common import preshrink
from sam3_agent.backends.sam3_local import Sam3Segmenter, upsample_masks
from sam3_agent.backends.segment_args import clean_phrase
from sam3_agent.backends.segmenters import build_segmenter
from sam3_agent.backends.torch_runtime import auto_dtype_name
from sam3_agent.values.detections import Detections
from sam3_agent.values.errors import SegmenterError, UserError, WeightsUnavailableError
from sam3_agent.values.images import image_digest

PHRASES = ["a cat", "the red car", "person on the left"]


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def segmenter(tiny_sam3_dir: Path, offline: None) -> Sam3Segmenter:
    # float32 explicitly: the reference post-processing below runs the model in float32,
    # and ``auto`` is bfloat16 on a CPU that computes it natively.
    return Sam3Segmenter.from_pretrained(tiny_sam3_dir, device="cpu", dtype="float32", cache_size=2)


def make_image(seed: int, height: int = 120, width: int = 90) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def count_backbone_runs(segmenter: Sam3Segmenter, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Wrap the model's ``get_vision_features``; the returned list grows by one per run."""
    model = segmenter._model
    original: Callable[..., Any] = model.get_vision_features
    runs: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(model, "get_vision_features", counted)
    return runs


def assert_same(a: Detections, b: Detections) -> None:
    assert len(a) == len(b)
    np.testing.assert_array_equal(a.masks, b.masks)
    np.testing.assert_allclose(a.boxes, b.boxes, rtol=0, atol=1e-3)
    np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-5)


def test_loads_offline_on_cpu_as_float32(segmenter: Sam3Segmenter) -> None:
    assert isinstance(segmenter, Segmenter)
    assert segmenter.device.type == "cpu"
    assert segmenter.dtype == torch.float32


def test_output_shapes_and_types(segmenter: Sam3Segmenter) -> None:
    embedding = segmenter.embed(make_image(0, 120, 90))
    assert isinstance(embedding, ImageEmbedding)
    assert embedding.image_size == (120, 90)
    results = embedding.segment(PHRASES, score_threshold=0.0)
    assert len(results) == len(PHRASES)
    for det in results:
        assert isinstance(det, Detections)
        assert len(det) == 8  # every query of the tiny model passes a 0.0 threshold
        assert det.masks.shape == (8, 120, 90)
        assert det.masks.dtype == np.bool_
        assert det.boxes.shape == (8, 4)
        assert det.boxes.dtype == np.float32
        assert ((det.scores > 0) & (det.scores <= 1)).all()
        x1, y1, x2, y2 = det.boxes.T
        assert (x1 <= x2).all() and (y1 <= y2).all()
        assert (det.boxes >= 0).all() and (x2 <= 90).all() and (y2 <= 120).all()


def test_threshold_drops_low_scores(segmenter: Sam3Segmenter) -> None:
    embedding = segmenter.embed(make_image(0))
    everything = embedding.segment(["a cat"], 0.0)[0]
    cut = float(np.median(everything.scores))
    kept = embedding.segment(["a cat"], cut)[0]
    assert len(kept) == int((everything.scores > cut).sum())
    assert embedding.segment(["a cat"], 1.0)[0].masks.shape == (0, 120, 90)


def test_backbone_runs_once_for_several_phrases(
    segmenter: Sam3Segmenter, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = count_backbone_runs(segmenter, monkeypatch)
    image = make_image(1)
    embedding = segmenter.embed(image)
    embedding.segment(PHRASES, 0.0)
    embedding.segment(["another phrase"], 0.0)
    segmenter.embed(image.copy()).segment(PHRASES, 0.0)  # same pixels: a cache hit
    assert len(runs) == 1


def test_cached_and_uncached_results_are_identical(
    segmenter: Sam3Segmenter, tiny_sam3_dir: Path
) -> None:
    image = make_image(2)
    first = segmenter.embed(image).segment(PHRASES, 0.0)
    cached = segmenter.embed(image).segment(PHRASES, 0.0)
    uncached = Sam3Segmenter.from_pretrained(
        tiny_sam3_dir, device="cpu", dtype="float32", cache_size=0
    )
    fresh = uncached.embed(image).segment(PHRASES, 0.0)
    assert uncached.cached_images == []
    for a, b, c in zip(first, cached, fresh, strict=True):
        assert_same(a, b)
        assert_same(a, c)


def test_phrase_batch_equals_phrases_one_by_one(segmenter: Sam3Segmenter) -> None:
    embedding = segmenter.embed(make_image(3))
    batched = embedding.segment(PHRASES, 0.0)
    for phrase, det in zip(PHRASES, batched, strict=True):
        assert_same(det, embedding.segment([phrase], 0.0)[0])


def test_long_phrase_lists_are_split_into_batches(tiny_sam3_dir: Path, offline: None) -> None:
    small = Sam3Segmenter.from_pretrained(tiny_sam3_dir, device="cpu", max_phrase_batch=2)
    embedding = small.embed(make_image(3))
    for det, phrase in zip(embedding.segment(PHRASES, 0.0), PHRASES, strict=True):
        assert_same(det, embedding.segment([phrase], 0.0)[0])


def test_lru_eviction(segmenter: Sam3Segmenter, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = count_backbone_runs(segmenter, monkeypatch)
    a, b, c = make_image(10), make_image(11), make_image(12)
    segmenter.embed(a)
    segmenter.embed(b)
    segmenter.embed(a)  # a becomes the most recently used
    segmenter.embed(c)  # evicts b (cache_size=2)
    assert segmenter.cached_images == [image_digest(a), image_digest(c)]
    assert len(runs) == 3
    segmenter.embed(a)
    assert len(runs) == 3
    segmenter.embed(b)
    assert len(runs) == 4


def test_embedding_outlives_eviction(segmenter: Sam3Segmenter) -> None:
    image = make_image(20)
    embedding = segmenter.embed(image)
    before = embedding.segment(["a cat"], 0.0)[0]
    segmenter.embed(make_image(21))
    segmenter.embed(make_image(22))
    assert image_digest(image) not in segmenter.cached_images
    assert_same(before, embedding.segment(["a cat"], 0.0)[0])


def test_concurrent_embeds_of_one_image_compute_once(
    segmenter: Sam3Segmenter, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = segmenter._model
    original = model.get_vision_features
    runs: list[int] = []
    entered = threading.Event()
    release = threading.Event()

    def slow(*args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        entered.set()
        release.wait(timeout=10)
        return original(*args, **kwargs)

    monkeypatch.setattr(model, "get_vision_features", slow)
    image = make_image(30)
    results: list[list[Detections]] = []

    def work() -> None:
        results.append(segmenter.embed(image).segment(["a cat"], 0.0))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    assert entered.wait(timeout=10)
    release.set()
    for t in threads:
        t.join(timeout=30)
    assert len(runs) == 1
    assert len(results) == 4
    for r in results[1:]:
        assert_same(results[0][0], r[0])


def test_failed_backbone_is_not_cached(
    segmenter: Sam3Segmenter, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = segmenter._model
    original = model.get_vision_features
    calls: list[int] = []

    def oom_once(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")
        return original(*args, **kwargs)

    monkeypatch.setattr(model, "get_vision_features", oom_once)
    image = make_image(40)
    with pytest.raises(SegmenterError, match="out of memory") as info:
        segmenter.embed(image)
    assert isinstance(info.value.__cause__, torch.OutOfMemoryError)
    assert segmenter.cached_images == []
    assert len(segmenter.embed(image).segment(["a cat"], 0.0)[0]) == 8


def test_oom_in_phrase_decoder_is_segmenter_error(
    segmenter: Sam3Segmenter, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedding = segmenter.embed(make_image(41))

    def oom(*args: Any, **kwargs: Any) -> Any:
        raise torch.OutOfMemoryError("out of memory")

    monkeypatch.setattr(segmenter, "_model", oom)
    with pytest.raises(SegmenterError, match="out of memory"):
        embedding.segment(["a cat"], 0.5)


@pytest.mark.parametrize(
    ("phrases", "threshold", "message"),
    [
        ("a cat", 0.5, "not one string"),
        (["a cat", "  "], 0.5, "non-empty"),
        (["a cat"], 1.5, r"\[0, 1\]"),
    ],
)
def test_bad_segment_arguments(
    segmenter: Sam3Segmenter, phrases: Any, threshold: float, message: str
) -> None:
    with pytest.raises(UserError, match=message):
        segmenter.embed(make_image(0)).segment(phrases, threshold)


@pytest.mark.parametrize(
    "image",
    [
        np.zeros((10, 10), np.uint8),
        np.zeros((10, 10, 3), np.float32),
        np.zeros((10, 10, 4), np.uint8),
    ],
)
def test_bad_images(segmenter: Sam3Segmenter, image: np.ndarray) -> None:
    with pytest.raises(UserError):
        segmenter.embed(image)


def test_empty_phrase_list(segmenter: Sam3Segmenter) -> None:
    assert segmenter.embed(make_image(0)).segment([], 0.5) == []


def test_missing_weights_offline_give_one_clear_error(offline: None) -> None:
    with pytest.raises(WeightsUnavailableError) as info:
        Sam3Segmenter.from_pretrained("sam3-agent-tests/no-such-model", device="cpu")
    message = str(info.value)
    assert "https://huggingface.co/facebook/sam3" in message
    assert "HF_TOKEN" in message
    assert "HF_HUB_OFFLINE" in message
    assert "local directory" in message


def test_missing_local_directory(tmp_path: Path, offline: None) -> None:
    with pytest.raises(WeightsUnavailableError, match="local directory"):
        Sam3Segmenter.from_pretrained(str(tmp_path / "nothing-here"), device="cpu")


@pytest.mark.parametrize(("device", "dtype"), [("tpu-9000", "auto"), ("cpu", "float8")])
def test_bad_device_or_dtype(tiny_sam3_dir: Path, device: str, dtype: str) -> None:
    with pytest.raises(UserError):
        Sam3Segmenter.from_pretrained(tiny_sam3_dir, device=device, dtype=dtype)


def test_build_segmenter_loads_in_process(tiny_sam3_dir: Path, offline: None) -> None:
    seg = build_segmenter(model=str(tiny_sam3_dir), device="cpu", cache_size=3)
    assert isinstance(seg, Sam3Segmenter)
    assert seg.embed(make_image(0)).image_size == (120, 90)


def test_plain_constructor_accepts_in_memory_model() -> None:
    from tests.support.tiny_sam3 import tiny_model_and_processor

    model, processor = tiny_model_and_processor()
    seg = Sam3Segmenter(model, processor, device="cpu", cache_size=1)
    (det,) = seg.embed(make_image(5)).segment(["a cat"], 0.0)
    assert det.masks.shape == (8, 120, 90)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only default")
def test_auto_device_without_cuda_is_cpu_in_its_auto_dtype(
    tiny_sam3_dir: Path, offline: None
) -> None:
    seg = Sam3Segmenter.from_pretrained(tiny_sam3_dir)
    expected = getattr(torch, auto_dtype_name("cpu"))  # bfloat16 where the CPU computes it
    assert (seg.device.type, seg.dtype) == ("cpu", expected)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_defaults_to_bfloat16_and_agrees_with_cpu(tiny_sam3_dir: Path, offline: None) -> None:
    gpu = Sam3Segmenter.from_pretrained(tiny_sam3_dir)
    assert (gpu.device.type, gpu.dtype) == ("cuda", torch.bfloat16)
    cpu = Sam3Segmenter.from_pretrained(tiny_sam3_dir, device="cpu")
    image = make_image(0)
    got = gpu.embed(image).segment(PHRASES, 0.0)
    want = cpu.embed(image).segment(PHRASES, 0.0)
    for g, w in zip(got, want, strict=True):
        assert g.masks.shape == w.masks.shape
        np.testing.assert_allclose(g.scores, w.scores, atol=0.02)
        agreement = (g.masks == w.masks).mean()
        assert agreement > 0.9


# ------------------------------------------------------- post-processing at mask resolution


@given(
    count=st.integers(1, 3),
    low=st.tuples(st.integers(1, 12), st.integers(1, 12)),
    out=st.tuples(st.integers(1, 80), st.integers(1, 80)),
    threshold=st.sampled_from([0.3, 0.5, 0.7]),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=60, deadline=None)
def test_banded_upsampling_equals_bilinear_interpolate(
    count: int, low: tuple[int, int], out: tuple[int, int], threshold: float, seed: int
) -> None:
    generator = torch.Generator().manual_seed(seed)
    probs = torch.rand((count, *low), generator=generator)
    expected = (
        torch.nn.functional.interpolate(
            probs[None], size=out, mode="bilinear", align_corners=False
        )[0]
        > threshold
    ).numpy()
    got = upsample_masks(probs, out, threshold)
    assert got.dtype == np.bool_ and got.shape == (count, *out)
    # Float rounding may flip a pixel whose value is within 1e-6 of the threshold.
    assert (got != expected).mean() <= 1e-3


def test_matches_the_processors_post_processing(segmenter: Sam3Segmenter) -> None:
    image = make_image(5, height=301, width=233)
    ours = segmenter.embed(image).segment(["a cat"], 0.0)[0]
    processor, model = segmenter._processor, segmenter._model
    with torch.inference_mode():
        inputs = processor(images=image, text=["a cat"], return_tensors="pt")
        outputs = model(**inputs)
        (ref,) = processor.post_process_instance_segmentation(
            outputs, threshold=0.0, mask_threshold=0.5, target_sizes=[image.shape[:2]]
        )
    nonempty = ref["masks"].flatten(1).any(dim=1)
    assert len(ours) == int(nonempty.sum())
    assert (ours.masks != ref["masks"][nonempty].numpy()).mean() <= 1e-4
    np.testing.assert_allclose(ours.scores, ref["scores"][nonempty].numpy(), atol=1e-5)
    np.testing.assert_allclose(
        ours.boxes, ref["boxes"][nonempty].numpy().clip(0, [233, 301, 233, 301]), atol=1e-3
    )


def test_only_kept_masks_are_resized_and_never_a_full_size_float(
    segmenter: Sam3Segmenter, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = make_image(6, height=400, width=300)
    embedding = segmenter.embed(image)
    resized: list[torch.Size] = []
    original = torch.nn.functional.interpolate

    def spy(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        result = original(tensor, *args, **kwargs)
        resized.append(result.shape)
        return result

    monkeypatch.setattr(torch.nn.functional, "interpolate", spy)
    detections = embedding.segment(["a cat"], 0.0)[0]
    to_image = [shape for shape in resized if shape[-1] == 300 or shape[-2] == 400]
    assert len(to_image) == len(detections) > 0  # one resize per kept mask, not per query
    assert all(shape.numel() < 400 * 300 for shape in to_image)  # never (H, W) floats
    assert detections.masks.dtype == np.bool_


# ------------------------------------------------------- phrases longer than the encoder reads

SHORT_TEXT = 8  # the tiny encoder's max_position_embeddings in these tests: 6 + start + end


@pytest.fixture(scope="module")
def short_text_segmenter() -> Sam3Segmenter:
    from tests.support.tiny_sam3 import tiny_model_and_processor

    model, processor = tiny_model_and_processor(text_positions=SHORT_TEXT)
    return Sam3Segmenter(model, processor, device="cpu")


@given(phrase=st.text(min_size=1, max_size=60).filter(lambda p: bool(clean_phrase(p))))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_phrase_is_cut_to_the_encoder_limit(
    short_text_segmenter: Sam3Segmenter, phrase: str
) -> None:
    segmenter = short_text_segmenter
    embedding = segmenter.embed(make_image(7, 32, 32))
    (detections,) = embedding.segment([phrase], 0.0)
    assert detections.image_size == (32, 32)
    used = embedding.used_phrase(phrase)
    tokenizer = segmenter._processor.tokenizer
    read = clean_phrase(phrase)  # the one sanitiser, which the service applies too
    assert read.startswith(used)
    assert len(tokenizer(used)["input_ids"]) <= SHORT_TEXT
    if len(tokenizer(read)["input_ids"]) <= SHORT_TEXT:
        assert used == read


def test_long_phrase_is_answered_like_its_cut_form(short_text_segmenter: Sam3Segmenter) -> None:
    embedding = short_text_segmenter.embed(make_image(8, 40, 40))
    long_phrase = "the small dog sitting on the left of the red sofa"
    used = embedding.used_phrase(long_phrase)
    assert used == "the sma"  # six tokens: one per character, spaces are not tokens
    # The encoder gets the first tokens and the end token, as SAM 3's own tokenizer does.
    tokenizer = short_text_segmenter._processor.tokenizer
    ids, mask = short_text_segmenter._tokenize([long_phrase])
    full = tokenizer(long_phrase)["input_ids"]
    assert ids[0].tolist() == [*full[: SHORT_TEXT - 1], tokenizer.eos_token_id]
    assert mask[0].tolist() == [1] * SHORT_TEXT
    assert len(embedding.segment([long_phrase], 0.0)) == 1
    assert embedding.used_phrase("a cat") == "a cat"


def test_full_size_limit_is_32_tokens(segmenter: Sam3Segmenter) -> None:
    assert segmenter.text_limit == 32
    words = " ".join(["dog"] * 40)
    (detections,) = segmenter.embed(make_image(9)).segment([words], 0.0)
    assert detections.image_size == (120, 90)
    # 30 content tokens, three per "dog" in the tiny vocabulary: ten words.
    assert segmenter.embed(make_image(9)).used_phrase(words) == " ".join(["dog"] * 10)


def test_any_library_failure_is_a_one_line_segmenter_error(
    segmenter: Sam3Segmenter, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedding = segmenter.embed(make_image(10))

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("Sequence length must be less than\nmax_position_embeddings")

    monkeypatch.setattr(segmenter, "_model", broken)
    with pytest.raises(SegmenterError, match="ValueError: Sequence length") as caught:
        embedding.segment(["a cat"], 0.5)
    assert "\n" not in str(caught.value)


def test_large_photos_are_shrunk_before_the_processor_with_nearly_the_same_input(
    segmenter: Sam3Segmenter,
) -> None:
    # A smooth scene, as photos are: area averaging then the processor's resize stays within
    # a few grey levels of the processor's resize alone.
    ys, xs = np.mgrid[0:1500, 0:1100]
    image = np.stack(
        [(ys * 255 // 1500), (xs * 255 // 1100), ((xs + ys) * 255 // 2600)], axis=-1
    ).astype(np.uint8)
    shrunk = preshrink(image, segmenter._processor.image_processor)
    assert shrunk.shape == (448, 448, 3)  # twice the tiny model's 224-pixel input
    processor = segmenter._processor
    direct = processor(images=image, return_tensors="pt")["pixel_values"]
    staged = processor(images=shrunk, return_tensors="pt")["pixel_values"]
    std = torch.tensor(processor.image_processor.image_std).view(1, 3, 1, 1)
    assert float(((direct - staged) * std).abs().max()) * 255 <= 3.0
    small = make_image(1)
    assert preshrink(small, segmenter._processor.image_processor) is small

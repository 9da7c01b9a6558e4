"""SAM 3 on video in this process, on a tiny random model loaded back through
``from_pretrained`` (no weights needed), tracking phrases through synthetic clips."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from transformers import Sam3VideoModel, Sam3VideoProcessor, Sam3ViTModel

from sam3_agent.backends import sam3_video
from sam3_agent.backends.base import VideoEmbedding, VideoSegmenter
from sam3_agent.backends.sam3_video import (
    DEFAULT_FEATURE_CACHE_BYTES,
    FeatureCache,
    Sam3VideoSegmenter,
)
from sam3_agent.backends.segmenters import DEFAULT_VIDEO_CACHE_MB
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.media.video import FrameSelection, VideoLoadError, VideoSource, open_video
from sam3_agent.values.errors import SegmenterError, UserError, WeightsUnavailableError
from sam3_agent.values.tracks import TrackBuilder, Tracks
from tests.support.clips import Square, write_frames, write_mp4

SIZE = (96, 128)
PHRASES = ["red square", "green square"]
STILL = (Square((230, 40, 40), (40, 30), (0, 0), side=24),)


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    # The tiny model's ops are too small to split: on two shared cores, two threads spin
    # against each other (about 10x slower here than one).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def segmenter(tiny_sam3_video_dir: Path) -> Sam3VideoSegmenter:
    return Sam3VideoSegmenter.from_pretrained(tiny_sam3_video_dir, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def mp4(tmp_path_factory: pytest.TempPathFactory) -> VideoSource:
    return open_video(write_mp4(tmp_path_factory.mktemp("clip") / "clip.mp4", 8, size=SIZE))


@pytest.fixture(scope="module")
def tracked(segmenter: Sam3VideoSegmenter, mp4: VideoSource) -> list[Tracks]:
    return segmenter.open(mp4).track(PHRASES, 0.0)


def fresh(directory: Path, cache_bytes: int = 0) -> Sam3VideoSegmenter:
    return Sam3VideoSegmenter.from_pretrained(
        directory, device="cpu", dtype="float32", feature_cache_bytes=cache_bytes
    )


@pytest.fixture
def vit_runs(segmenter: Sam3VideoSegmenter) -> Iterator[list[int]]:
    """Grows by one each time the detector's ViT really runs (a hook on the module itself,
    wherever the segmenter put it)."""
    runs: list[int] = []
    vits = [m for m in segmenter._model.modules() if isinstance(m, Sam3ViTModel)]
    handles = [v.register_forward_hook(lambda *_: runs.append(1)) for v in vits]
    yield runs
    for handle in handles:
        handle.remove()


def assert_valid(tracks: Tracks, video: VideoSource) -> None:
    assert tracks.frame_count == video.frame_count
    assert tracks.size == video.size
    for track in tracks:
        assert 0.0 <= track.score <= 1.0
        assert track.masks, "a track is present somewhere"
        assert all(0 <= p < video.frame_count for p in track.positions)
        for position in track.positions:
            mask = track.mask(position)
            assert mask is not None and mask.shape == video.size and mask.any()
            x0, y0, x1, y1 = track.boxes[position]
            assert 0 <= x0 < x1 <= video.size[1] and 0 <= y0 < y1 <= video.size[0]


def test_protocols_and_loading(segmenter: Sam3VideoSegmenter, mp4: VideoSource) -> None:
    assert isinstance(segmenter, VideoSegmenter)
    embedding = segmenter.open(mp4)
    assert isinstance(embedding, VideoEmbedding)
    assert embedding.video is mp4
    assert segmenter.device.type == "cpu" and segmenter.dtype == torch.float32


def test_tracks_a_phrase_list_through_an_mp4(tracked: list[Tracks], mp4: VideoSource) -> None:
    assert len(tracked) == len(PHRASES)
    for tracks in tracked:
        assert len(tracks) >= 1  # random weights, zero thresholds: something is tracked
        assert_valid(tracks, mp4)
        assert [t.track_id for t in tracks] == sorted(t.track_id for t in tracks)


def test_frame_folder_with_a_stride(segmenter: Sam3VideoSegmenter, tmp_path: Path) -> None:
    folder = write_frames(tmp_path / "frames", 9, size=SIZE)
    video = open_video(folder, FrameSelection(stride=2))
    assert video.frame_count == 5
    (tracks,) = segmenter.open(video).track(["red square"], 0.0)
    assert len(tracks) >= 1
    assert_valid(tracks, video)


def test_same_results_from_a_fresh_load_and_with_or_without_the_cache(
    tiny_sam3_video_dir: Path, tracked: list[Tracks], mp4: VideoSource
) -> None:
    again = fresh(tiny_sam3_video_dir, cache_bytes=0).open(mp4).track(PHRASES[:1], 0.0)
    assert again[0].to_json() == tracked[0].to_json()


def test_streamed_frames_match_the_whole_clip_inference(
    tiny_sam3_video_dir: Path, segmenter: Sam3VideoSegmenter, mp4: VideoSource
) -> None:
    # transformers' reference: every frame loaded into the session first, then
    # propagate_in_video_iterator (hotstart buffering and removal on, nothing trimmed).
    model = Sam3VideoModel.from_pretrained(tiny_sam3_video_dir).eval()
    processor = Sam3VideoProcessor.from_pretrained(tiny_sam3_video_dir)
    session = processor.init_video_session(inference_device="cpu", dtype=torch.float32)
    for frame in mp4.frames():
        session.add_new_frame(segmenter._pixel_values(frame.pixels)[0], frame_idx=frame.position)
    session.video_height, session.video_width = mp4.size
    processor.add_text_prompt(session, "red square")
    builder = TrackBuilder(mp4.frame_count, mp4.size)
    raw_ids: set[int] = set()
    for out in model.propagate_in_video_iterator(session):
        raw_ids.update(out.object_ids)
        found = processor.postprocess_outputs(session, out)
        builder.add(out.frame_idx, found["object_ids"].tolist(), found["masks"].numpy(),
                    found["scores"].tolist())  # fmt: skip
    reference = builder.build()

    (ours,) = segmenter.open(mp4).track(["red square"], 0.0)
    assert ours.to_json() == reference.to_json()
    # The hotstart heuristics removed tracks after they were output once: hidden from the
    # frames already buffered, as transformers' streaming mode (model(frame=...)) cannot.
    removed = session.hotstart_removed_obj_ids
    assert removed and removed <= raw_ids
    assert not removed & {t.track_id for t in ours}


def test_a_second_phrase_reuses_the_backbone_features(
    tiny_sam3_video_dir: Path, mp4: VideoSource
) -> None:
    segmenter = fresh(tiny_sam3_video_dir, cache_bytes=64 * 1024**2)
    embedding = segmenter.open(mp4)
    embedding.track(["red square"], 0.0)
    assert segmenter.backbone_runs == mp4.frame_count
    assert len(segmenter.feature_cache) == mp4.frame_count
    embedding.track(["green square", "a square"], 0.0)
    segmenter.open(mp4).track(["red"], 0.0)  # the same frames through another handle
    assert segmenter.backbone_runs == mp4.frame_count
    assert segmenter.feature_cache.hits == 2 * mp4.frame_count


def test_phrases_of_one_call_share_each_backbone_run(
    segmenter: Sam3VideoSegmenter, mp4: VideoSource, vit_runs: list[int]
) -> None:
    segmenter.feature_cache.clear()
    segmenter.open(mp4).track(["a", "b"], 0.0)
    assert len(vit_runs) == mp4.frame_count


def test_without_a_cache_every_call_recomputes(tiny_sam3_video_dir: Path, tmp_path: Path) -> None:
    segmenter = fresh(tiny_sam3_video_dir, cache_bytes=0)
    embedding = segmenter.open(open_video(write_mp4(tmp_path / "short.mp4", 3, size=SIZE)))
    embedding.track(["red square"], 0.0)
    embedding.track(["red square"], 0.0)
    assert segmenter.backbone_runs == 2 * 3
    assert len(segmenter.feature_cache) == 0


def _held(session: Any) -> tuple[int, int]:
    """(frames stored, tensors reachable) in a session's state."""
    seen: set[int] = set()
    tensors = 0
    stack: list[Any] = [vars(session)]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, torch.Tensor):
            tensors += 1
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set)):
            stack.extend(item)
        elif hasattr(item, "__dict__") and not isinstance(item, type):
            stack.append(vars(item))
    return len(session.processed_frames or {}), tensors


def _counts_per_frame(segmenter: Sam3VideoSegmenter, video: VideoSource) -> list[tuple[int, int]]:
    counts: list[tuple[int, int]] = []

    def count(_module: Any, _args: Any, kwargs: dict[str, Any], _out: Any) -> None:
        counts.append(_held(kwargs["inference_session"]))

    handle = segmenter._model.register_forward_hook(count, with_kwargs=True)
    try:
        segmenter.open(video).track(["red square"], 0.0)
    finally:
        handle.remove()
    return counts


def test_session_state_stays_bounded_as_the_clip_grows(
    tiny_sam3_video_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    segmenter = fresh(tiny_sam3_video_dir)
    # Recondition on every 4th frame: each one adds a conditioning frame per object.
    segmenter._model.high_conf_thresh = segmenter._model.high_iou_thresh = -1.0
    video = open_video(write_mp4(tmp_path / "still.mp4", 20, squares=STILL, size=SIZE))
    counts = _counts_per_frame(segmenter, video)
    assert len(counts) == 20
    assert all(frames <= 1 for frames, _ in counts)  # only the frame being run
    tensors = [t for _, t in counts]
    # Steady from about frame 8 (conditioning frames every 4th frame, 2 kept per object).
    assert max(tensors[12:]) <= max(tensors[:12])

    # The same count sees the growth when nothing is trimmed.
    monkeypatch.setattr(sam3_video, "trim_session", lambda *args: None)
    untrimmed = [t for _, t in _counts_per_frame(segmenter, video)]
    assert untrimmed[-1] > 2 * max(tensors)


def test_bad_phrases_and_thresholds_are_refused(
    segmenter: Sam3VideoSegmenter, mp4: VideoSource
) -> None:
    embedding = segmenter.open(mp4)
    for phrases, threshold in [
        ([""], 0.0),
        (["  \t\n "], 0.0),
        (["\x00\x07"], 0.0),
        ([3], 0.0),
        (["x" * 1001], 0.0),
        ("red square", 0.0),
        (["red square"], 1.5),
        (["red square"], -0.1),
    ]:
        with pytest.raises(UserError):
            embedding.track(phrases, threshold)  # type: ignore[arg-type]
    assert embedding.track([], 0.0) == []


def test_a_long_phrase_is_cut_to_the_text_encoder(
    segmenter: Sam3VideoSegmenter, tmp_path: Path
) -> None:
    video = open_video(write_mp4(tmp_path / "short.mp4", 3, size=SIZE))
    long = "the red square that moves to the left " * 10
    used = segmenter.open(video).used_phrase(long)
    assert long.startswith(used) and len(used) < len(long.strip())
    (tracks,) = segmenter.open(video).track([long], 0.0)
    assert tracks.frame_count == 3


def test_score_threshold_applies_to_the_track_score(
    tracked: list[Tracks], segmenter: Sam3VideoSegmenter, mp4: VideoSource
) -> None:
    scores = sorted(t.score for t in tracked[0])
    cut = scores[-1]
    (kept,) = segmenter.open(mp4).track(PHRASES[:1], cut)
    assert [t.score for t in kept] == [s for s in (t.score for t in tracked[0]) if s >= cut]
    (none,) = segmenter.open(mp4).track(PHRASES[:1], 1.0)
    assert len(none) == 0 and none.frame_count == mp4.frame_count


def test_a_corrupt_frame_is_a_video_load_error(
    segmenter: Sam3VideoSegmenter, tmp_path: Path
) -> None:
    folder = write_frames(tmp_path / "frames", 4, size=SIZE)
    video = open_video(folder)
    (folder / "00002.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    with pytest.raises(VideoLoadError, match="frame 2"):
        segmenter.open(video).track(["red square"], 0.0)


@pytest.mark.parametrize(
    "failure, message",
    [
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"), "out of memory"),
        (RuntimeError("shape mismatch\nsecond line"), "failed in the video tracker"),
    ],
)
def test_model_failures_are_one_line_segmenter_errors(
    tiny_sam3_video_dir: Path,
    mp4: VideoSource,
    monkeypatch: pytest.MonkeyPatch,
    failure: Exception,
    message: str,
) -> None:
    segmenter = fresh(tiny_sam3_video_dir)

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise failure

    monkeypatch.setattr(segmenter._model, "forward", fail)
    with pytest.raises(SegmenterError, match=message) as info:
        segmenter.open(mp4).track(["red square"], 0.0)
    assert "\n" not in str(info.value)
    assert info.value.__cause__ is failure


def test_open_needs_a_video_source(segmenter: Sam3VideoSegmenter) -> None:
    with pytest.raises(UserError, match="VideoSource"):
        segmenter.open("clip.mp4")  # type: ignore[arg-type]


def test_missing_weights_are_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(WeightsUnavailableError, match="local directory"):
        Sam3VideoSegmenter.from_pretrained(tmp_path / "nothing-here")
    with pytest.raises(WeightsUnavailableError, match="HF_HUB_OFFLINE"):
        Sam3VideoSegmenter.from_pretrained("nobody/not-a-cached-model")
    with pytest.raises(UserError, match="`feature_cache_bytes` must be >= 0"):
        Sam3VideoSegmenter.from_pretrained(tmp_path, feature_cache_bytes=-1)


def test_backend_spec_builds_it_from_the_same_sam3_option(tiny_sam3_video_dir: Path) -> None:
    options = BackendSpec(sam3=str(tiny_sam3_video_dir), device="cpu", dtype="float32")
    options.validate(chat=False)
    built = options.build_video_segmenter()
    assert isinstance(built, Sam3VideoSegmenter) and isinstance(built, VideoSegmenter)
    assert built.feature_cache.max_bytes == DEFAULT_VIDEO_CACHE_MB * 1024**2
    assert DEFAULT_FEATURE_CACHE_BYTES == DEFAULT_VIDEO_CACHE_MB * 1024**2
    small = BackendSpec(sam3=str(tiny_sam3_video_dir), device="cpu", video_cache_mb=0)
    assert small.build_video_segmenter().feature_cache.max_bytes == 0  # type: ignore[attr-defined]


def test_backend_spec_refuses_what_it_cannot_build() -> None:
    with pytest.raises(UserError, match="`video_cache_mb` must be >= 0"):
        BackendSpec(video_cache_mb=-1).validate(chat=False)
    # A service URL builds the service's client (tests/apps/service/test_videos.py).
    remote = BackendSpec(sam3_url="http://127.0.0.1:1").build_video_segmenter()
    assert isinstance(remote, VideoSegmenter) and not isinstance(remote, Sam3VideoSegmenter)


# -- the feature cache on its own ------------------------------------------------------------


def feature(megabytes: float) -> torch.Tensor:
    return torch.zeros(int(megabytes * 1024**2 / 4), dtype=torch.float32)


def test_feature_cache_is_bounded_in_bytes() -> None:
    cache = FeatureCache(3 * 1024**2)
    assert cache.put("a", feature(1), "clip") and cache.put("b", feature(1), "clip")
    assert not cache.put("big", feature(4), "clip")
    assert cache.put("c", feature(1), "clip")
    assert cache.bytes_used == 3 * 1024**2
    assert not cache.put("d", feature(1), "clip")  # full of this clip: keeps what it has
    assert cache.bytes_used <= cache.max_bytes and len(cache) == 3


def test_feature_cache_rereads_of_one_clip_hit_what_fits() -> None:
    cache = FeatureCache(3 * 1024**2)
    for _ in range(3):  # three passes over a 5-frame clip, as three phrases read it
        for frame in range(5):
            if cache.get(frame, "clip") is None:
                cache.put(frame, feature(1), "clip")
    assert (cache.hits, cache.misses) == (6, 9)


def test_feature_cache_makes_room_from_other_clips_least_recent_first() -> None:
    cache = FeatureCache(3 * 1024**2)
    for key in ("a", "b", "c"):
        cache.put(key, feature(1), "old clip")
    assert cache.get("a", "old clip") is not None  # now the most recent
    assert cache.put("x", feature(1), "new clip")
    assert cache.get("b", "old clip") is None
    assert cache.get("a", "old clip") is not None and cache.get("c", "old clip") is not None


def test_feature_cache_refuses_a_negative_size() -> None:
    with pytest.raises(UserError):
        FeatureCache(-1)


def test_masks_are_bool_at_video_resolution(tracked: list[Tracks], mp4: VideoSource) -> None:
    track = tracked[0][0]
    mask = track.mask(track.positions[0])
    assert mask is not None and mask.dtype == np.bool_ and mask.shape == mp4.size

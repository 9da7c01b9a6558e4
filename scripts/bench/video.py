"""Benchmark: the video agent against the clip's length.

Four figures, each side by side in one run:

1. **Peak memory of tracking a phrase** with the tiny random SAM 3 video model of
   ``tests/support/tiny_sam3_video.py`` (loaded from disk through ``from_pretrained``; no
   feature cache), for clips of 50 to 500 frames. Each length runs in a fresh subprocess;
   the peak is the process's ``VmHWM`` after a warm-up, minus the RSS before tracking. Goal:
   flat (the ratio 500 / 50 frames near 1: frames are streamed, masks kept as RLE).
2. **SAM 3 time per frame**, features cached versus recomputed: a second phrase with the
   backbone's features of every frame cached (``--video-cache-mb``) against the same phrase
   with no cache (the backbone runs again on every frame).
3. **Tokens per session** against the clip's length: the video agent with a scripted MLLM
   (select after one phrase, examine both tracks) on the same scene at every length. Goal:
   flat (what the model sees is a fixed number of frames).
4. **Frames decoded per second** by :meth:`VideoSource.frames` (640x480 MP4).

    python -m scripts.bench video [--lengths 50,200,500] [--skip-model]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def _clip(path: Path, frames: int, size: tuple[int, int] = (96, 128)) -> Path:
    from tests.support.clips import write_mp4

    return write_mp4(path, frames, size=size)


# --------------------------------------------------------------------------- 1 and 2: SAM 3


def _track_child(model_dir: str, clip: str) -> None:
    """In a subprocess: load, warm up, then peak RSS of tracking a phrase (JSON on stdout)."""
    from sam3_agent.backends.sam3_video import Sam3VideoSegmenter
    from sam3_agent.media.video import FrameSelection, open_video

    def load(cache_bytes: int) -> Sam3VideoSegmenter:
        return Sam3VideoSegmenter.from_pretrained(
            model_dir, device="cpu", dtype="float32", feature_cache_bytes=cache_bytes
        )

    cached_segmenter, uncached = load(1 << 30), load(0)
    warm = open_video(clip, FrameSelection(max_frames=4))
    for segmenter in (cached_segmenter, uncached):
        segmenter.open(warm).track(["square"], 0.0)
    video = open_video(clip)
    before = _status_bytes("VmRSS")
    _reset_peak()
    started = time.perf_counter()
    tracks = uncached.open(video).track(["square"], 0.0)[0]
    first = time.perf_counter() - started
    peak_total = _status_bytes("VmHWM")
    peak = peak_total - before
    # Features cached (a first phrase filled the cache) against recomputed (no cache), the
    # second phrase timed alternately three times each: the minimum is the least disturbed.
    embedding = cached_segmenter.open(video)
    embedding.track(["square"], 0.0)
    cached_runs, fresh_runs = [], []
    for _ in range(3):
        started = time.perf_counter()
        embedding.track(["red square"], 0.0)
        cached_runs.append(time.perf_counter() - started)
        started = time.perf_counter()
        uncached.open(video).track(["red square"], 0.0)
        fresh_runs.append(time.perf_counter() - started)
    cached, fresh = min(cached_runs), min(fresh_runs)
    frames = video.frame_count
    print(
        json.dumps(
            {
                "frames": frames,
                "peak_mb": peak / 1e6,
                "peak_total_mb": peak_total / 1e6,
                "tracks": len(tracks),
                "first_ms_per_frame": 1000 * first / frames,
                "cached_ms_per_frame": 1000 * cached / frames,
                "recomputed_ms_per_frame": 1000 * fresh / frames,
            }
        )
    )


def bench_sam3(lengths: list[int], work: Path) -> None:
    from tests.support.tiny_sam3_video import save_tiny_sam3_video

    model_dir = save_tiny_sam3_video(work / "tiny-video")
    rows = []
    for frames in lengths:
        clip = _clip(work / f"clip{frames}.mp4", frames)
        done = subprocess.run(
            [sys.executable, "-m", "scripts.bench.video", "--child", str(model_dir), str(clip)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print("\n1-2. SAM 3 video (tiny random model), one phrase tracked through the clip")
    header = ("frames", "peak RSS", "+tracking", "ms/frame", "cached", "recomputed", "ratio")
    print("{:>7} {:>9} {:>10} {:>9} {:>8} {:>11} {:>6}".format(*header))
    for r in rows:
        ratio = r["recomputed_ms_per_frame"] / max(r["cached_ms_per_frame"], 1e-9)
        print(
            f"{r['frames']:>7} {r['peak_total_mb']:>9.1f} {r['peak_mb']:>10.1f} "
            f"{r['first_ms_per_frame']:>9.1f} "
            f"{r['cached_ms_per_frame']:>8.1f} {r['recomputed_ms_per_frame']:>11.1f} {ratio:>5.2f}x"
        )
    first, last = rows[0], rows[-1]
    growth = last["peak_total_mb"] / first["peak_total_mb"]
    added = last["peak_mb"] - first["peak_mb"]
    print(
        f"peak RSS {last['frames']} vs {first['frames']} frames: {growth:.3f}x "
        f"({added:+.1f} MB) for {last['frames'] / first['frames']:.0f}x the frames (goal: flat; "
        "MB columns: the process's peak, and its rise while tracking)"
    )


# --------------------------------------------------------------------------- 3: tokens


def bench_tokens(lengths: list[int], work: Path) -> None:
    from sam3_agent.agent.video.agent import Sam3VideoAgent
    from tests.support.clips import LEFT_AND_RIGHT, write_frames
    from tests.support.fakes import FakeVideoSegmenter, ScriptedChatModel, tool

    print("\n3. Tokens per session (scripted MLLM: one phrase, examine, select)")
    print(f"{'frames':>7} {'main':>8} {'checks':>8} {'total':>8}")
    totals = []
    for frames in lengths:
        folder = write_frames(work / f"frames{frames}", frames, size=(48, 64))
        chat = ScriptedChatModel(
            replies=[
                tool("segment_phrase", text_prompt="square"),
                tool("examine_each_mask"),
                tool("select_masks_and_return", final_answer_masks=[1]),
            ]
        )
        agent = Sam3VideoAgent(FakeVideoSegmenter({"square": LEFT_AND_RIGHT}), chat)
        usage = agent.run(folder, "the square that moves left").usage.to_dict()
        estimated = usage["estimated_prompt_tokens"]
        main, checks = estimated["main"]["total"], estimated["checks"]["total"]
        totals.append(main + checks)
        print(f"{frames:>7} {main:>8} {checks:>8} {main + checks:>8}")
    print(
        f"tokens {lengths[-1]} vs {lengths[0]} frames: {totals[-1] / totals[0]:.2f}x (goal: flat)"
    )


# --------------------------------------------------------------------------- 4: decoding


def bench_decode(work: Path, frames: int = 300) -> None:
    from sam3_agent.media.video import open_video
    from tests.support.clips import write_mp4

    clip = write_mp4(work / "decode.mp4", frames, size=(480, 640), fps=30.0)
    video = open_video(clip)
    started = time.perf_counter()
    count = sum(1 for _ in video.frames())
    seconds = time.perf_counter() - started
    started = time.perf_counter()
    list(video.frames(list(range(0, video.frame_count, 10))))
    sparse = time.perf_counter() - started
    print(f"\n4. Decoding a {frames}-frame 640x480 MP4")
    print(
        f"every frame: {count / seconds:.0f} frames/s; every 10th: {seconds / sparse:.1f}x faster"
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _track_child(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="50,200,500", help="clip lengths in frames")
    parser.add_argument("--skip-model", action="store_true", help="skip the SAM 3 figures")
    args = parser.parse_args()
    lengths = [int(v) for v in args.lengths.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if not args.skip_model:
            bench_sam3(lengths, work)
        bench_tokens(lengths, work)
        bench_decode(work)


if __name__ == "__main__":
    main()

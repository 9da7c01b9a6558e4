"""A tiny, randomly initialised SAM 3 video model (detector + tracker), built offline.

The architecture is the real ``transformers`` ``Sam3VideoModel``: the tiny image detector
of :mod:`tests.support.tiny_sam3` at 112 px, and a tracker shrunk to one memory-attention
layer with a 3-frame memory bank, 4 object pointers and 2 conditioning frames, so its
windows fill within a few frames. Two widths cannot shrink: the memory attention reads
64-channel memories whatever the config says, and the tracker splits each object pointer
into memory-wide pieces, so the FPN and every layer after it are 128 wide.

Random weights give scores around 0.25: the detection thresholds are 0 so every frame
detects, ``max_num_objects`` keeps the tracks few, and the hotstart window is 2 frames so
the hotstart heuristics act (and buffer outputs) within a short clip. Conditioning frames
stay one per object (the reconditioning thresholds are out of reach of random scores);
tests that need more set ``model.high_conf_thresh`` / ``high_iou_thresh`` to 0.
"""

from __future__ import annotations

from pathlib import Path

from transformers import (
    Sam3ImageProcessor,
    Sam3VideoConfig,
    Sam3VideoModel,
    Sam3VideoProcessor,
)
from transformers.models.sam2_video.video_processing_sam2_video import Sam2VideoVideoProcessor

from tests.support.tiny_sam3 import tiny_config, tiny_tokenizer

TINY_VIDEO_IMAGE_SIZE = 112
PATCHES = TINY_VIDEO_IMAGE_SIZE // 14
TINY_VIDEO_MASK_SIZE = 4 * PATCHES
"""The detector's and the tracker's low-resolution masks: 4x the patch grid."""
HEAD_SIZE = 128
MEMORY_SIZE = 64  # fixed by Sam3TrackerVideoMemoryAttentionLayer (kv_in_dim=64)

TRACKER_WINDOWS = {"num_maskmem": 3, "max_object_pointers_in_encoder": 4, "max_cond_frame_num": 2}
HOTSTART = {"hotstart_delay": 2, "hotstart_unmatch_thresh": 2, "hotstart_dup_thresh": 2}


def tiny_video_processor() -> Sam3VideoProcessor:
    """``Sam3VideoProcessor`` around the tiny tokenizer and 112-pixel image/video processors."""
    size = {"height": TINY_VIDEO_IMAGE_SIZE, "width": TINY_VIDEO_IMAGE_SIZE}
    mask = {"height": TINY_VIDEO_MASK_SIZE, "width": TINY_VIDEO_MASK_SIZE}
    return Sam3VideoProcessor(
        image_processor=Sam3ImageProcessor(size=size, mask_size=mask),
        video_processor=Sam2VideoVideoProcessor(size=size),
        tokenizer=tiny_tokenizer(),
    )


def tiny_video_config(vocab_size: int, max_num_objects: int = 3) -> Sam3VideoConfig:
    """The tiny detector and tracker, with thresholds random weights can pass."""
    detector = tiny_config(vocab_size, image_size=TINY_VIDEO_IMAGE_SIZE, head_size=HEAD_SIZE)
    tracker = {
        "model_type": "sam3_tracker_video",
        "vision_config": detector.vision_config.to_dict(),
        "prompt_encoder_config": {
            "hidden_size": HEAD_SIZE,
            "image_size": TINY_VIDEO_IMAGE_SIZE,
            "patch_size": 14,
            "mask_input_channels": 4,
        },
        "mask_decoder_config": {
            "hidden_size": HEAD_SIZE,
            "mlp_dim": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 4,
            "iou_head_hidden_dim": 32,
        },
        **TRACKER_WINDOWS,
        "memory_attention_hidden_size": HEAD_SIZE,
        "memory_attention_num_layers": 1,
        "memory_attention_num_attention_heads": 1,
        "memory_attention_feed_forward_hidden_size": 64,
        "memory_attention_rope_feat_sizes": [PATCHES, PATCHES],
        "memory_encoder_hidden_size": HEAD_SIZE,
        "memory_encoder_output_channels": MEMORY_SIZE,
        "mask_downsampler_embed_dim": HEAD_SIZE,
        "memory_fuser_embed_dim": HEAD_SIZE,
        "memory_fuser_intermediate_dim": 64,
        "image_size": TINY_VIDEO_IMAGE_SIZE,
    }
    return Sam3VideoConfig(
        detector_config=detector.to_dict(),
        tracker_config=tracker,
        low_res_mask_size=TINY_VIDEO_MASK_SIZE,
        score_threshold_detection=0.0,
        new_det_thresh=0.0,
        max_num_objects=max_num_objects,
        recondition_every_nth_frame=4,
        **HOTSTART,
    )


def tiny_video_model_and_processor(seed: int = 0) -> tuple[Sam3VideoModel, Sam3VideoProcessor]:
    """A tiny random ``Sam3VideoModel`` (eval mode, float32) and its matching processor."""
    import torch

    processor = tiny_video_processor()
    torch.manual_seed(seed)
    model = Sam3VideoModel(tiny_video_config(len(processor.tokenizer)))
    model.eval()
    return model, processor


def save_tiny_sam3_video(directory: Path, seed: int = 0) -> Path:
    """Write the tiny video model and processor with ``save_pretrained``; returns
    ``directory``."""
    model, processor = tiny_video_model_and_processor(seed)
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory

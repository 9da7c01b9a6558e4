"""A tiny, randomly initialised SAM 3 that runs in milliseconds on a CPU, built offline.

The architecture is the real ``transformers`` ``Sam3Model``; only the sizes shrink (hidden
size 32, two backbone layers, 224 px images, 8 queries). The tokenizer is a ``CLIPTokenizer`` whose vocabulary is the byte-level alphabet
(each symbol also with CLIP's ``</w>`` end-of-word suffix) plus the two special tokens, with
no merges, so it tokenizes any text character by character without downloading anything.
Random weights give random scores: tests that need masks use ``score_threshold=0.0``.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers.pre_tokenizers import ByteLevel
from transformers import (
    CLIPTokenizer,
    Sam3Config,
    Sam3ImageProcessor,
    Sam3Model,
    Sam3Processor,
)

TINY_IMAGE_SIZE = 224
TINY_MASK_SIZE = 64
BOS_TOKEN = "<|startoftext|>"
EOS_TOKEN = "<|endoftext|>"
# The processor pads every phrase to 32 tokens; the text encoder must hold that many positions.
TEXT_POSITIONS = 32


def tiny_tokenizer() -> CLIPTokenizer:
    """A character-level CLIP tokenizer: byte alphabet (plain and ``</w>``) + BOS/EOS."""
    alphabet = sorted(ByteLevel.alphabet())
    vocab: dict[str, int] = {BOS_TOKEN: 0, EOS_TOKEN: 1}
    for symbol in alphabet:
        vocab[symbol] = len(vocab)
    for symbol in alphabet:
        vocab[symbol + "</w>"] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=[])


def tiny_processor(
    image_size: int = TINY_IMAGE_SIZE, mask_size: int = TINY_MASK_SIZE
) -> Sam3Processor:
    """``Sam3Processor`` around :func:`tiny_tokenizer` and a small image processor."""
    image_processor = Sam3ImageProcessor(
        size={"height": image_size, "width": image_size},
        mask_size={"height": mask_size, "width": mask_size},
    )
    return Sam3Processor(image_processor=image_processor, tokenizer=tiny_tokenizer())


def tiny_config(
    vocab_size: int,
    text_positions: int = TEXT_POSITIONS,
    *,
    image_size: int = TINY_IMAGE_SIZE,
    head_size: int = 32,
) -> Sam3Config:
    """SAM 3 with a 2-layer 32-wide ViT at 224 px and one 32-wide layer everywhere else.

    ``text_positions``: the text encoder's ``max_position_embeddings`` (its token limit).
    ``image_size``: the input side in pixels (a multiple of the 14-pixel patch).
    ``head_size``: width of the FPN and of every layer after it (the video tracker needs
    more than its 64-wide memory, see ``tiny_sam3_video``).
    """
    patches = image_size // 14
    small = {"hidden_size": head_size, "num_attention_heads": 4, "intermediate_size": 2 * head_size}
    return Sam3Config(
        vision_config={
            "backbone_config": {
                "model_type": "sam3_vit_model",
                "hidden_size": 32,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "intermediate_size": 64,
                "image_size": image_size,
                "patch_size": 14,
                "window_size": 8,
                "global_attn_indexes": [1],
                "pretrain_image_size": image_size,
            },
            "fpn_hidden_size": head_size,
            # FPN levels at scale factors 4, 2, 1 of the 16x16 patch grid.
            "backbone_feature_sizes": [[patches * 4] * 2, [patches * 2] * 2, [patches] * 2],
        },
        text_config={
            "model_type": "clip_text_model",
            "vocab_size": vocab_size,
            "hidden_size": 32,
            "intermediate_size": 64,
            "projection_dim": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 4,
            "max_position_embeddings": text_positions,
            "bos_token_id": 0,
            "eos_token_id": 1,
            "pad_token_id": 1,
        },
        geometry_encoder_config={**small, "num_layers": 1},
        detr_encoder_config={**small, "num_layers": 1},
        detr_decoder_config={**small, "num_layers": 1, "num_queries": 8},
        mask_decoder_config={"hidden_size": head_size, "num_attention_heads": 4},
    )


def tiny_model_and_processor(
    seed: int = 0, text_positions: int = TEXT_POSITIONS
) -> tuple[Sam3Model, Sam3Processor]:
    """A tiny random ``Sam3Model`` (eval mode, float32) and its matching processor."""
    import torch

    processor = tiny_processor()
    torch.manual_seed(seed)
    model = Sam3Model(tiny_config(len(processor.tokenizer), text_positions))
    model.eval()
    return model, processor


def save_tiny_sam3(directory: Path, seed: int = 0) -> Path:
    """Write the tiny model and processor with ``save_pretrained``; returns ``directory``."""
    model, processor = tiny_model_and_processor(seed)
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory

"""From SAM 3's raw outputs to :class:`~sam3_agent.values.detections.Detections`.

Thresholding happens at the model's mask resolution and only kept masks are upsampled, one at
a time and in bands of rows, so a round's memory grows with the masks kept, not with the
image area times the detector's query count.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

from sam3_agent.values.detections import Detections


def detections_at(
    scores: torch.Tensor,
    boxes: torch.Tensor,
    mask_logits: torch.Tensor,
    image_size: tuple[int, int],
    score_threshold: float,
    mask_threshold: float,
) -> Detections:
    """What ``Sam3Processor.post_process_instance_segmentation`` computes, but only the kept
    queries are resized, one at a time, straight into a bool array. Masks already empty at
    the model's resolution are dropped (a bilinear resize cannot light a pixel above the
    largest low-resolution value).

    ``scores``: ``(Q,)`` detection x presence; ``boxes``: ``(Q, 4)`` XYXY in ``[0, 1]``;
    ``mask_logits``: ``(Q, h, w)``.
    """
    height, width = image_size
    keep = scores > score_threshold
    if bool(keep.any()):
        probs = mask_logits[keep].float().sigmoid()  # (K, h, w): small
        keep_idx = keep.nonzero().flatten()
        lit = probs.flatten(1).amax(dim=1) > mask_threshold
        keep_idx, probs = keep_idx[lit], probs[lit]
    else:
        keep_idx = keep.nonzero().flatten()
    if keep_idx.numel() == 0:
        return Detections.empty(height, width)
    scale = torch.tensor([width, height, width, height], dtype=torch.float32)
    kept_boxes = (boxes[keep_idx].float().cpu() * scale).numpy()
    np.clip(kept_boxes[:, 0::2], 0, width, out=kept_boxes[:, 0::2])
    np.clip(kept_boxes[:, 1::2], 0, height, out=kept_boxes[:, 1::2])
    return Detections(
        masks=upsample_masks(probs.cpu(), image_size, mask_threshold),
        boxes=kept_boxes,
        scores=scores[keep_idx].float().cpu().numpy(),
    )


def upsample_masks(
    probs: torch.Tensor, image_size: tuple[int, int], threshold: float
) -> npt.NDArray[np.bool_]:
    """``(K, h, w)`` probabilities -> ``(K, H, W)`` bool, ``bilinear(probs) > threshold``
    (``align_corners=False``), computed separably, the height pass a band of rows at a time,
    so no ``H x W`` float array ever exists."""
    import torch.nn.functional as F

    height, width = image_size
    count, h, _ = probs.shape
    out = np.empty((count, height, width), dtype=np.bool_)
    out_t = torch.from_numpy(out)
    y0, y1, wy = _source_rows(h, height)
    band = max(1, _BAND_FLOATS // max(1, width))
    for i in range(count):
        rows = F.interpolate(
            probs[i][None, None], size=(h, width), mode="bilinear", align_corners=False
        )[0, 0]
        for top in range(0, height, band):
            sl = slice(top, min(height, top + band))
            lam = wy[sl, None]
            # (1 - lam) * upper + lam * lower, in place: two band buffers at a time.
            values = rows.index_select(0, y0[sl]).mul_(1.0 - lam)
            values.add_(rows.index_select(0, y1[sl]).mul_(lam))
            torch.gt(values, threshold, out=out_t[i, sl])
    return out


# Rows per band of the height pass: two buffers of about 4 MB of float32.
_BAND_FLOATS = 1_000_000


def _source_rows(size_in: int, size_out: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PyTorch's ``align_corners=False`` source rows and weights for a linear resize."""
    scale = torch.tensor(size_in / size_out, dtype=torch.float32)
    dst = torch.arange(size_out, dtype=torch.float32)
    src = torch.clamp(scale * (dst + 0.5) - 0.5, min=0.0)
    y0 = src.to(torch.int64)
    y1 = torch.clamp(y0 + 1, max=size_in - 1)
    return y0, y1, (src - y0.to(torch.float32))

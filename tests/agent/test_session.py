"""What a session's mask checks send: images sized for each mask, not for the photo."""

from __future__ import annotations

import numpy as np

from sam3_agent.agent.image import check_requests
from sam3_agent.media.render import ZOOM_GAP, ZOOM_PANEL_MAX, Renderer
from sam3_agent.values.detections import Detections
from tests.support.fakes import square_mask


def test_check_images_are_sized_for_their_mask() -> None:
    h, w = 1008, 1008
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    masks = np.stack(
        [
            square_mask(h, w, 100, 100, 400),
            square_mask(h, w, 600, 600, 10),
            square_mask(h, w, 700, 50, 20),
        ]
    )
    detections = Detections.from_masks(masks, [0.9, 0.8, 0.7])
    requests = check_requests(Renderer(image, 1024), detections, prefix="t", quality=90, workers=2)
    assert [r.number for r in requests] == [1, 2, 3]
    sides = [max(r.images[0].width, r.images[0].height) for r in requests]
    # A large mask is judged on small whole-image views; a tiny one keeps the display size.
    assert sides == [448, 1008, 672]
    for request in requests:
        raw = request.images[0]  # the plain image, then the mask drawn, then its close-up
        assert request.images[1:] == (request.mask_image, request.zoom_image)
        assert (raw.width, raw.height) == (
            request.mask_image.width,
            request.mask_image.height,
        )
        assert request.zoom_image.width <= 2 * ZOOM_PANEL_MAX + ZOOM_GAP
    # The plain image is encoded once per size and shared.
    again = check_requests(Renderer(image, 1024), detections[[0, 0]], prefix="u", quality=90)
    assert again[0].images[0] is again[1].images[0]

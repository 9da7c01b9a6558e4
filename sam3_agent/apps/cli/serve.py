"""``sam3-agent serve-sam3``: host SAM 3 over HTTP for agents on other machines.

Registered by ``sam3_agent.apps.cli.main`` as ``app.command("serve-sam3")(serve_sam3)``.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from sam3_agent.apps.cli.options import DeviceOpt, DtypeOpt
from sam3_agent.apps.service.limits import (
    DEFAULT_MAX_CONCURRENT_DECODES,
    DEFAULT_MAX_PIXELS,
    DEFAULT_MAX_STORED_BYTES,
    DEFAULT_MAX_STORED_IMAGES,
    DEFAULT_MAX_UPLOAD_BYTES,
    MIB,
)
from sam3_agent.apps.service.server import check_bind_security
from sam3_agent.backends.schemas import TOKEN_ENV
from sam3_agent.backends.segmenters import DEFAULT_SAM3_MODEL
from sam3_agent.values.errors import Sam3AgentError

SERVICE = "Service"

ModelOpt = Annotated[
    str,
    typer.Option(
        "--model",
        help="SAM 3 weights: a Hugging Face hub id (gated: accept the licence, set HF_TOKEN) "
        "or a local directory.",
    ),
]
HostOpt = Annotated[
    str,
    typer.Option(
        help="Address to listen on. Anything but loopback requires a token.",
        rich_help_panel=SERVICE,
    ),
]
PortOpt = Annotated[int, typer.Option(help="Port to listen on.", rich_help_panel=SERVICE)]
TokenOpt = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar=TOKEN_ENV,
        help=f"Bearer token clients must send (required unless listening on loopback). "
        f"Prefer the {TOKEN_ENV} environment variable: a flag is visible in `ps`.",
        rich_help_panel=SERVICE,
    ),
]
CacheSizeOpt = Annotated[
    int,
    typer.Option(
        "--cache-size",
        help="Images whose backbone features stay cached (LRU).",
        rich_help_panel=SERVICE,
    ),
]
MaxUploadOpt = Annotated[
    float,
    typer.Option(
        "--max-upload-mb", help="Largest image file accepted, in MiB.", rich_help_panel=SERVICE
    ),
]
MaxPixelsOpt = Annotated[
    int,
    typer.Option("--max-pixels", help="Largest width x height accepted.", rich_help_panel=SERVICE),
]


StoreImagesOpt = Annotated[
    int,
    typer.Option(
        "--store-images",
        help="Decoded images kept for later requests (LRU).",
        rich_help_panel=SERVICE,
    ),
]
StoreMbOpt = Annotated[
    float,
    typer.Option(
        "--store-mb",
        help="Memory for decoded images kept for later requests, in MiB (LRU).",
        rich_help_panel=SERVICE,
    ),
]
DecodesOpt = Annotated[
    int,
    typer.Option(
        "--max-concurrent-decodes",
        help="Uploaded images decoded at the same time; others wait.",
        rich_help_panel=SERVICE,
    ),
]


def serve_sam3(
    model: ModelOpt = DEFAULT_SAM3_MODEL,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8100,
    token: TokenOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    cache_size: CacheSizeOpt = 8,
    max_upload_mb: MaxUploadOpt = DEFAULT_MAX_UPLOAD_BYTES / MIB,
    max_pixels: MaxPixelsOpt = DEFAULT_MAX_PIXELS,
    store_images: StoreImagesOpt = DEFAULT_MAX_STORED_IMAGES,
    store_mb: StoreMbOpt = DEFAULT_MAX_STORED_BYTES / MIB,
    max_concurrent_decodes: DecodesOpt = DEFAULT_MAX_CONCURRENT_DECODES,
) -> None:
    """Serve SAM 3 over HTTP (agents use it with --sam3-url)."""
    from sam3_agent.apps.service import server
    from sam3_agent.backends.sam3_local import Sam3Segmenter

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        if min(max_upload_mb, max_pixels, store_images, store_mb, max_concurrent_decodes) <= 0:
            raise typer.BadParameter(
                "--max-upload-mb, --max-pixels, --store-images, --store-mb and "
                "--max-concurrent-decodes must be positive"
            )
        # Refuse an unsafe bind before spending a minute loading weights.
        check_bind_security(host, token)
        segmenter = Sam3Segmenter.from_pretrained(
            model, device=device, dtype=dtype, cache_size=cache_size
        )
        server.serve(
            segmenter,
            host=host,
            port=port,
            token=token or None,
            max_upload_bytes=int(max_upload_mb * MIB),
            max_pixels=max_pixels,
            max_stored_images=store_images,
            max_stored_bytes=int(store_mb * MIB),
            max_concurrent_decodes=max_concurrent_decodes,
        )
    except Sam3AgentError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(code=1) from e

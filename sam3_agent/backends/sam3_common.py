"""What the in-process SAM 3 backends (images, video) share: loading, one-line errors from
model work, phrase fitting and the pre-shrink of large frames."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, Self, TypeVar

import cv2
import numpy as np
import torch
from huggingface_hub.errors import HfHubHTTPError

from sam3_agent.backends.hub import first_line, hub_access, hub_offline
from sam3_agent.backends.identity import dtype_name, sam3_description
from sam3_agent.backends.segment_args import clean_phrase
from sam3_agent.backends.torch_runtime import resolve_device, resolve_dtype
from sam3_agent.values.errors import Sam3AgentError, SegmenterError, WeightsUnavailableError
from sam3_agent.values.images import RGBImage
from sam3_agent.values.text import one_line

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "facebook/sam3"  # holds the image and the video model
LICENCE_URL = "https://huggingface.co/facebook/sam3"
PROCESSOR_TEXT_TOKENS = 32  # SAM 3's processors pad every phrase to this

M = TypeVar("M")
P = TypeVar("P")


def weights_error(model: str, cause: BaseException) -> WeightsUnavailableError:
    hint = (
        "HF_HUB_OFFLINE is set, so only weights already in the local cache or a local "
        "directory can be used. "
        if hub_offline()
        else ""
    )
    return WeightsUnavailableError(
        f"cannot load SAM 3 weights from {model!r} ({type(cause).__name__}: "
        f"{first_line(cause, 'no detail')}). {hint}"
        f"The facebook/sam3 weights are gated: accept the licence on {LICENCE_URL}, then set "
        "HF_TOKEN to a token of that account (or run `hf auth login`); or pass the path of a "
        "local directory holding the weights and processor files."
    )


def load_sam3(
    model: str | Path,
    model_class: type[M],
    processor_class: type[P],
    *,
    device: str,
    dtype: str,
) -> tuple[M, P, torch.device]:
    """The model (in ``dtype``, not yet moved) and processor from a hub id or a local
    directory, and the device to move it to."""
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    name = str(model)
    if name.startswith((".", "/", "~")) and not Path(name).expanduser().is_dir():
        raise weights_error(name, FileNotFoundError(f"no directory {name}"))
    source = str(Path(name).expanduser()) if Path(name).expanduser().is_dir() else name
    offline = hub_access(source, what="SAM 3", setting="`sam3='DIR'`")
    loader: Any = processor_class
    builder: Any = model_class
    try:
        processor = loader.from_pretrained(source, local_files_only=offline)
        loaded = builder.from_pretrained(source, dtype=torch_dtype, local_files_only=offline)
    except (OSError, ValueError, HfHubHTTPError) as e:
        raise weights_error(name, e) from e
    logger.info(
        "loaded %s from %s on %s as %s", model_class.__name__, name, torch_device, torch_dtype
    )
    return loaded, processor, torch_device


class LoadedSam3(Generic[M, P]):
    """A SAM 3 model (image or video) and its processor on one device. A subclass names its
    classes, checks its options before any weights load, and says what to try when out of
    memory (``_oom_hint``)."""

    _classes: tuple[type[M], type[P]]
    _oom_hint: str
    _model: M
    _processor: Any
    device: torch.device
    dtype: torch.dtype
    _name: str | None
    text_limit: int  # tokens the text encoder reads, special tokens included (SAM 3: 32)
    _tokenizer_lock: threading.Lock

    def _adopt(
        self,
        model: M,
        processor: P,
        device: str | torch.device | None,
        name: str | None,
        text_config: object,
    ) -> None:
        """Hold ``model`` (moved to ``device`` unless ``None``, in eval mode, dtype kept)."""
        loaded: Any = model
        if device is not None:
            loaded = loaded.to(torch.device(device))
        self._model = loaded.eval()
        self._processor = processor
        self.device = next(loaded.parameters()).device
        self.dtype = next(loaded.parameters()).dtype
        self._name = name
        # Its position count, at most the 32 tokens the processors pad to.
        positions = getattr(text_config, "max_position_embeddings", None)
        self.text_limit = (
            min(int(positions), PROCESSOR_TEXT_TOKENS) if positions else PROCESSOR_TEXT_TOKENS
        )

    @classmethod
    def _check_options(cls, **options: Any) -> None:
        """Refuse bad constructor options before any weights load."""

    @classmethod
    def from_pretrained(
        cls,
        model: str | Path = DEFAULT_MODEL,
        *,
        device: str = "auto",
        dtype: str = "auto",
        **options: Any,
    ) -> Self:
        """Load SAM 3 from a hub id or a local directory; ``options`` go to the constructor."""
        cls._check_options(**options)
        sam3, processor, torch_device = load_sam3(model, *cls._classes, device=device, dtype=dtype)
        built: Any = cls
        made: Self = built(sam3, processor, device=torch_device, name=str(model), **options)
        return made

    def describe(self) -> dict[str, object]:
        return sam3_description(model=self._name, dtype=dtype_name(self.dtype))

    def used_phrase(self, phrase: str) -> str:
        with self._tokenizer_lock, self._failures("tokenizer"):
            return self._fit(phrase)

    def _fit(self, phrase: str) -> str:
        """The cleaned ``phrase``, or its longest prefix whose tokens fit :attr:`text_limit`
        with the start and end tokens. The caller holds the tokenizer lock."""
        tokenizer = self._processor.tokenizer
        phrase = clean_phrase(phrase)
        room = self.text_limit - tokenizer.num_special_tokens_to_add()
        fast = bool(getattr(tokenizer, "is_fast", False))
        encoded = tokenizer(phrase, add_special_tokens=False, return_offsets_mapping=fast)
        ids = encoded["input_ids"]
        if len(ids) <= room:
            return phrase
        if fast:
            # Up to where the first dropped token starts: a character split across tokens
            # counts as dropped.
            return str(phrase[: encoded["offset_mapping"][room][0]]).rstrip()
        return str(tokenizer.decode(ids[: max(room, 0)])).strip()

    @contextmanager
    def _failures(self, stage: str) -> Iterator[None]:
        """Any failure inside model work as a one-line :class:`SegmenterError`; the project's
        own errors pass unchanged."""
        try:
            yield
        except Sam3AgentError:
            raise
        except torch.OutOfMemoryError as e:
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            raise SegmenterError(
                f"SAM 3 ran out of memory on {self.device} in the {stage}; {self._oom_hint}, "
                "or a larger device"
            ) from e
        except Exception as e:
            raise SegmenterError(f"SAM 3 failed in the {stage}: {one_line(e)}") from e

    def _pixel_values(self, image: RGBImage) -> torch.Tensor:
        """``image`` as the model's ``(1, 3, h, w)`` input on its device and dtype."""
        pixels = preshrink(image, self._processor.image_processor)
        # torch warns on read-only arrays (PIL-backed ones are); the copy is small.
        pixels = pixels if pixels.flags.writeable else pixels.copy()
        inputs = self._processor(images=pixels, return_tensors="pt")
        values: torch.Tensor = inputs["pixel_values"].to(self.device, dtype=self.dtype)
        return values


class PhraseHandle:
    """An embedding (image or video) fitting phrases with its owner's tokenizer."""

    _owner: LoadedSam3[Any, Any]

    def used_phrase(self, phrase: str) -> str:
        return self._owner.used_phrase(phrase)


def preshrink(image: RGBImage, image_processor: object) -> RGBImage:
    """Shrink a large image to twice the model's input size by area averaging: the
    processor's own resize holds about 2.4x the image in temporaries (343 MB for 48 MP),
    and its antialiased resize still does the last factor of two."""
    size = getattr(image_processor, "size", None)
    target_h = getattr(size, "height", None) or (size or {}).get("height")
    target_w = getattr(size, "width", None) or (size or {}).get("width")
    if not target_h or not target_w:
        return image
    height, width = image.shape[:2]
    new_h, new_w = min(height, 2 * int(target_h)), min(width, 2 * int(target_w))
    if (new_h, new_w) == (height, width):
        return image
    return np.ascontiguousarray(cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_AREA))

"""An in-process vision-language model through ``transformers``: the embedded default. One
request at a time: ``generate`` runs in a worker thread behind a lock, so the event loop stays
free while concurrent callers queue up."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import torch

from sam3_agent.backends.generation import (
    DEFAULT_TEMPERATURE,
    IN_PROCESS_MAX_TOKENS,
    GenerationSettings,
)
from sam3_agent.backends.hub import first_line, hub_access
from sam3_agent.backends.identity import chat_description, dtype_name
from sam3_agent.backends.lru import Lru
from sam3_agent.backends.memory import GPU_DEFAULT_MLLM
from sam3_agent.backends.torch_runtime import resolve_device, resolve_dtype
from sam3_agent.values.errors import ChatModelError, UserError, WeightsUnavailableError
from sam3_agent.values.messages import (
    ChatMessage,
    ChatResponse,
    ImagePart,
    TextPart,
    TokenUsage,
    ToolSpec,
)

logger = logging.getLogger(__name__)

ATTENTION_REQUESTS_KEPT = 32  # recent requests whose attention is kept (checks run at once)


class TransformersChatModel:
    """A ``transformers`` image-text-to-text model (Qwen2.5-VL, Qwen3-VL, ...) as a ChatModel.
    ``temperature`` 0 is greedy; ``generation``'s ``max_tokens`` and ``temperature`` win over
    the arguments, its ``seed`` seeds torch before each generation."""

    def __init__(
        self,
        model: Any,
        processor: Any,
        *,
        name: str,
        max_new_tokens: int = IN_PROCESS_MAX_TOKENS,
        temperature: float = DEFAULT_TEMPERATURE,
        generation: GenerationSettings | None = None,
    ) -> None:
        settings = generation or GenerationSettings()
        temperature, max_new_tokens = settings.over(temperature, max_new_tokens)
        if max_new_tokens < 1:
            raise UserError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if temperature < 0:
            raise UserError(f"temperature must be >= 0, got {temperature}")
        self._model = model
        self._processor = processor
        self._name = name
        dtype = getattr(model, "dtype", None)
        self._dtype = dtype_name(dtype) if isinstance(dtype, torch.dtype) else None
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.generation = replace(settings, max_tokens=max_new_tokens, temperature=temperature)
        self._lock = threading.Lock()
        self._record_attention = False
        self._attention: Lru[tuple[int, ...], list[float]] = Lru(ATTENTION_REQUESTS_KEPT)

    @classmethod
    def from_pretrained(
        cls, model_id_or_dir: str, device: str = "auto", dtype: str = "auto", **options: Any
    ) -> TransformersChatModel:
        """Load model and processor from a hub id or a ``save_pretrained`` directory;
        ``options`` (``max_new_tokens``, ``temperature``, ``generation``) go to the constructor."""
        from transformers import AutoModelForImageTextToText, AutoProcessor

        torch_device = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, torch_device)
        local = Path(model_id_or_dir).expanduser()
        looks_local = model_id_or_dir.startswith((".", "/", "~")) or local.exists()
        if looks_local and not local.is_dir():
            raise WeightsUnavailableError(
                f"no model directory at {local}: pass a directory written by save_pretrained "
                f"(or `hf download <id> --local-dir DIR`), or a hub id such as {GPU_DEFAULT_MLLM}"
            )
        source = str(local) if looks_local else model_id_or_dir
        local_only = hub_access(source, what="the MLLM", setting="`llm='hf:DIR'`")
        try:
            processor = AutoProcessor.from_pretrained(source, local_files_only=local_only)
            model: Any = AutoModelForImageTextToText.from_pretrained(
                source, dtype=torch_dtype, local_files_only=local_only
            )
        except OSError as e:
            raise WeightsUnavailableError(
                f"cannot load the MLLM weights {source!r}: {first_line(e, type(e).__name__)}. "
                f"Download them where there is network access (`hf download {source}`; set "
                "HF_TOKEN and accept the licence on the hub for gated models), pass a local "
                "directory with `llm='hf:<dir>'`, or use an OpenAI-compatible endpoint with "
                "`llm_url`."
            ) from e
        except ValueError as e:
            raise WeightsUnavailableError(
                f"{source!r} is not an image-text-to-text model transformers can load: "
                f"{first_line(e, type(e).__name__)}"
            ) from e
        model = model.to(torch_device).eval()
        logger.info("loaded MLLM %s on %s as %s", source, torch_device, torch_dtype)
        return cls(model, processor, name=model_id_or_dir, **options)

    @property
    def name(self) -> str:
        return self._name

    @property
    def tokenizer(self) -> Any:
        return getattr(self._processor, "tokenizer", None)

    def record_attention(self) -> None:
        """From now on also measure each request's attention per message: one extra forward
        pass per call, with eager attention (fused kernels return no attention weights)."""
        if not self._record_attention:
            self._model.set_attn_implementation("eager")
            self._record_attention = True

    def last_message_attention(
        self, messages: Sequence[ChatMessage] | None = None
    ) -> list[float] | None:
        """Attention share per message (sums to 1) of the reply's first position, averaged
        over layers and heads, for ``messages`` (None: the latest); None when not recorded."""
        if messages is None:
            return self._attention.latest()
        return self._attention.get(_request_key(messages), touch=False)

    @property
    def generation_params(self) -> dict[str, Any]:
        return {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            **self.generation.key_params(),
        }

    def describe(self) -> dict[str, Any]:
        return chat_description(
            model=self._name,
            in_process=True,
            temperature=self.temperature,
            max_tokens=self.max_new_tokens,
            generation=self.generation,
            dtype=self._dtype,
        )

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        """Generate in a worker thread; ``tools`` are refused (tag protocol only)."""
        if tools:
            raise UserError(
                "the in-process transformers backend has no native tool calling; "
                "use `tool_protocol='tags'`"
            )
        try:
            return await asyncio.to_thread(self._generate, list(messages))
        except ChatModelError:
            raise
        except Exception as e:  # torch, the processor, the template: all one failure
            detail = first_line(e, type(e).__name__)
            raise ChatModelError(
                f"in-process MLLM {self._name}: {type(e).__name__}: {detail}"
            ) from e

    def _generate(self, messages: list[ChatMessage]) -> ChatResponse:
        # Images are decoded here, in the worker thread, not on the event loop.
        conversation = [_template_message(m) for m in messages]
        with self._lock:
            inputs = self._processor.apply_chat_template(
                conversation,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=True,
                return_tensors="pt",
                **self.generation.chat_template_kwargs,
            ).to(self._model.device)
            prompt_length = int(inputs["input_ids"].shape[1])
            sampling: dict[str, Any] = (
                {"do_sample": True, "temperature": self.temperature}
                if self.temperature > 0
                else {"do_sample": False}
            )
            if self.generation.seed is not None:
                torch.manual_seed(self.generation.seed)
            with torch.inference_mode():
                output = self._model.generate(
                    **inputs, max_new_tokens=self.max_new_tokens, **sampling
                )
                shares = self._message_attention(inputs, len(messages))
                if shares is not None:
                    self._attention.put(_request_key(messages), shares)
        generated = output[0, prompt_length:]
        text = self._processor.batch_decode(generated[None], skip_special_tokens=True)[0]
        finish_reason = "stop"
        if len(generated) >= self.max_new_tokens and not self._is_eos(int(generated[-1])):
            finish_reason = "length"
        return ChatResponse(
            text=text,
            usage=TokenUsage(
                prompt_tokens=prompt_length, completion_tokens=len(generated), calls=1
            ),
            finish_reason=finish_reason,
        )

    def _message_attention(self, inputs: Any, n_messages: int) -> list[float] | None:
        """Attention of the reply's first position on each message's tokens, normalised;
        None when not recorded."""
        if not self._record_attention:
            return None
        out = self._model(**inputs, output_attentions=True)
        if not out.attentions:
            return None
        last_row = torch.stack([a[0, :, -1, :].float() for a in out.attentions])  # (L, H, T)
        mass = last_row.mean(dim=(0, 1))  # (T,)
        start_id = self.tokenizer.convert_tokens_to_ids("<|im_start|>") if self.tokenizer else None
        ids = inputs["input_ids"][0].tolist()
        starts = [i for i, t in enumerate(ids) if t == start_id]
        # One <|im_start|> per message, plus the one opening the reply.
        if len(starts) != n_messages + 1:
            logger.debug("attention: %d message starts for %d messages", len(starts), n_messages)
            return None
        spans = [float(mass[a:b].sum()) for a, b in pairwise(starts)]
        total = sum(spans)
        return [x / total for x in spans] if total > 0 else None

    def _is_eos(self, token: int) -> bool:
        eos = self._model.generation_config.eos_token_id
        if eos is None:
            return False
        return token in (eos if isinstance(eos, (list, tuple)) else [eos])


def _request_key(messages: Sequence[ChatMessage]) -> tuple[int, ...]:
    return tuple(hash((m.role, m.joined_text, tuple(i.sha256 for i in m.images))) for m in messages)


def _template_message(message: ChatMessage) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            content.append({"type": "image", "image": part.image.to_pil()})
    return {"role": message.role, "content": content}

"""A Hugging Face hub that never touches the network, for :meth:`BackendSpec.plan`.

It knows the models of the known-models table (their ``config.json`` is an empty object:
the table gives their size) and the ones a test adds with their config; any other id is
"no such model". ``tests/conftest.py`` puts it in place of :class:`HfHub` for every test.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sam3_agent.backends.hub import ModelMissing
from sam3_agent.backends.memory import KNOWN_PARAMETERS


class FakeHub:
    """Answers like the hub at ``endpoint`` would, from ``repos`` (id -> config.json).

    Attributes:
        asked: every repo id whose config.json was fetched, in order.
        probes: how many times reachability was asked.
    """

    def __init__(
        self,
        folder: Path,
        repos: Mapping[str, dict[str, Any]] | None = None,
        *,
        reachable: bool = True,
        endpoint: str = "https://hub.test",
    ) -> None:
        self.folder = folder
        self.repos = {repo: {} for repo in KNOWN_PARAMETERS} | dict(repos or {})
        self._reachable = reachable
        self.endpoint = endpoint
        self.asked: list[str] = []
        self.probes = 0

    def reachable(self) -> bool:
        self.probes += 1
        return self._reachable

    def fetch_config(self, repo_id: str) -> Path:
        self.asked.append(repo_id)
        if repo_id not in self.repos:
            raise ModelMissing(f"no such model on the hub at {self.endpoint} (fake)")
        path = self.folder / repo_id / "config.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.repos[repo_id]), encoding="utf-8")
        return path


def use_fake_hub() -> None:
    """Make every ``HfHub()`` of this process a :class:`FakeHub` (for a test driver running
    in a process of its own, where ``tests/conftest.py`` does not reach)."""
    import tempfile

    from sam3_agent.backends import hub

    folder = Path(tempfile.mkdtemp(prefix="fake-hub-"))
    hub.HfHub = lambda **kwargs: FakeHub(folder)  # type: ignore[assignment,misc]


QWEN25_VL_72B_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "model_type": "qwen2_5_vl",
    "hidden_size": 8192,
    "intermediate_size": 29568,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "vocab_size": 152064,
    "max_position_embeddings": 128000,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "hidden_act": "silu",
    "vision_config": {
        "depth": 32,
        "hidden_act": "silu",
        "hidden_size": 1280,
        "intermediate_size": 3456,
        "num_heads": 16,
        "in_chans": 3,
        "out_hidden_size": 8192,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "spatial_patch_size": 14,
        "window_size": 112,
        "fullatt_block_indexes": [7, 15, 23, 31],
        "tokens_per_second": 2,
        "temporal_patch_size": 2,
    },
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "image_token_id": 151655,
    "video_token_id": 151656,
    "vision_start_token_id": 151652,
    "vision_end_token_id": 151653,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
}
"""The architecture fields of Qwen/Qwen2.5-VL-72B-Instruct's config.json (73.4 B parameters
when built): a model the known-models table does not hold."""

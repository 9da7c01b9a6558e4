"""Published video figures that ``report`` can set beside a run's, marked "published".

AgentRVOS (W. Jin, J. Lee, H. Shin, S. Jang, J. Heo, S. Kim, "AgentRVOS: Reasoning over
Object Tracks for Zero-Shot Referring Video Object Segmentation", arXiv 2603.23489, 2026) is
the training-free SAM 3 + MLLM method this product's video agent is closest to. Its J&F on
MeViS 73.1, ReasonVOS 75.5 and ReVOS 66.3 (ReVOS's "overall", the mean of its referring and
reasoning subsets) are the figures issue 18 quotes, and the paper's benchmark listing
(wizwand.com, paper 69c36c2c0636e5bf4afc6613) shows the same three.

Deliberately left out, because no source we could read confirms them: J and F apart, the
ReVOS referring / reasoning figures, any Ref-YouTube-VOS or Ref-DAVIS17 figure, and which
MLLM produced each number (the paper runs several backbones). So ``model`` is empty and
``match`` is empty: no run is compared with these as "the same MLLM". MeViS's split is not
stated either (its public-mask ``valid_u`` and its server-scored ``valid`` differ), so it is
left empty; ReVOS (``valid``) and ReasonVOS (``valid``, its only split) have one evaluated
split each. Add figures with their source once checked.

Values are percentages as printed.
"""

from __future__ import annotations

from sam3_agent.runs.evaluation.published import PublishedResult

AGENTRVOS_PAPER = "AgentRVOS (arXiv 2603.23489)"


def _agentrvos(dataset: str, split: str, value: float) -> PublishedResult:
    return PublishedResult(
        model="",
        match=(),
        dataset=dataset,
        split=split,
        metric="J&F",
        value=value,
        source=AGENTRVOS_PAPER,
        method="AgentRVOS",
    )


VIDEO_PUBLISHED: tuple[PublishedResult, ...] = (
    _agentrvos("mevis", "", 73.1),
    _agentrvos("reasonvos", "valid", 75.5),
    _agentrvos("revos", "valid", 66.3),
)


def video_published_for(dataset: str) -> list[PublishedResult]:
    """The published figures on ``dataset`` (a :data:`VIDEO_DATASETS` name)."""
    return [r for r in VIDEO_PUBLISHED if r.dataset == dataset]

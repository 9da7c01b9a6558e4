"""Shared fixtures. Test doubles themselves live in ``tests/support/``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from sam3_agent.values.detections import Detections
from tests.support.fake_hub import FakeHub
from tests.support.fakes import square_mask

H, W = 240, 320
REPO = Path(__file__).resolve().parents[1]

# No timed assertions (a busy 2-core machine is slow, not wrong): hypothesis's per-example
# deadline and its too-slow health check are off for every property test.
settings.register_profile("sam3-agent", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("sam3-agent")

PROCESS_SETTINGS = frozenset(
    {
        "OPENCV_FFMPEG_LOGLEVEL",  # media.video, media.video_writer: no FFmpeg log lines
        "GRADIO_ANALYTICS_ENABLED",  # apps.demo.server: no Gradio analytics
        "HF_HUB_DISABLE_TELEMETRY",  # Gradio, when its analytics are off
        "LD_LIBRARY_PATH",  # `import cv2` adds its bundled libraries
        "RAY_CLIENT_MODE",  # `import ray`
        "RAY_AUTH_MODE",  # ray.init, for its workers
        "RAY_USAGE_STATS_ENABLED",  # ray.init
        "TORCHINDUCTOR_CACHE_DIR",  # torch._inductor, the first time a model is built
        "PYTHONBREAKPOINT",  # ray.init points breakpoint() at its debugger
        "PYTEST_CURRENT_TEST",  # pytest: the test running
    }
)
"""Variables set for the whole process on purpose, by the code under test, by a library as
it is imported, or by pytest."""


@pytest.fixture(scope="module", autouse=True)
def environment_kept(request: pytest.FixtureRequest) -> Iterator[None]:
    """No test module leaves ``os.environ`` changed for the modules after it: a test sets a
    variable with ``monkeypatch.setenv`` (or in a child process's ``env``), and a fixture
    of a wider scope restores it before its module ends."""
    from sam3_agent.apps.cli.console import QUIET_MODEL_LIBRARIES

    before = dict(os.environ)
    yield
    # A command run in-process (in a fixture of module scope too) quiets the model libraries
    # for its process on purpose; the suite puts them back, see quiet_switches_put_back.
    for name in QUIET_MODEL_LIBRARIES:
        if name in before:
            os.environ[name] = before[name]
        else:
            os.environ.pop(name, None)
    after = dict(os.environ)
    changed = sorted(
        key
        for key in before.keys() | after.keys()
        if before.get(key) != after.get(key) and key not in PROCESS_SETTINGS
    )
    if changed:
        pytest.fail(
            f"{request.module.__name__} left os.environ changed ({', '.join(changed)}): set "
            "variables with monkeypatch, or restore them in the fixture that sets them"
        )


@pytest.fixture
def image() -> np.ndarray:
    """A deterministic ``(240, 320, 3)`` uint8 RGB test image."""
    rng = np.random.default_rng(0)
    return (rng.random((H, W, 3)) * 255).astype(np.uint8)


@pytest.fixture
def three_cats() -> Detections:
    """Three separate square masks scored 0.9, 0.8, 0.7 (so numbered 1, 2, 3)."""
    masks = np.stack(
        [
            square_mask(H, W, 10, 10, 40),
            square_mask(H, W, 100, 150, 50),
            square_mask(H, W, 180, 20, 30),
        ]
    )
    return Detections.from_masks(masks, [0.9, 0.8, 0.7])


@pytest.fixture(scope="session")
def tiny_sam3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding a tiny random SAM 3 model + processor (``save_pretrained``)."""
    from tests.support.tiny_sam3 import save_tiny_sam3

    return save_tiny_sam3(tmp_path_factory.mktemp("tiny_sam3"))


@pytest.fixture(scope="session")
def tiny_qwen_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding a tiny random Qwen2.5-VL model + processor (``save_pretrained``)."""
    import torch

    from tests.support.tiny_qwen import save_tiny_qwen

    torch.manual_seed(0)
    return save_tiny_qwen(tmp_path_factory.mktemp("tiny_qwen"))


@pytest.fixture
def hf_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline as ``HF_HUB_OFFLINE=1`` makes it (huggingface_hub reads it at import)."""
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


@pytest.fixture(autouse=True)
def quiet_switches_put_back() -> Iterator[None]:
    """The CLI quiets the model libraries through environment variables, for its process: a
    command run in-process by a test must not leave them to the next test's subprocesses."""
    from sam3_agent.apps.cli.console import QUIET_MODEL_LIBRARIES

    saved = {name: os.environ.get(name) for name in QUIET_MODEL_LIBRARIES}
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def fake_hub(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[FakeHub]]:
    """No test asks the real hub whether a model exists: every ``HfHub()`` built is a
    :class:`FakeHub` knowing the known-models table (yields those built, for a test to
    look at). A test of ``HfHub`` itself imports the class before this runs."""
    from sam3_agent.backends import hub

    folder = tmp_path_factory.getbasetemp() / "fake_hub"
    built: list[FakeHub] = []

    def make(**kwargs: object) -> FakeHub:
        built.append(FakeHub(folder))
        return built[-1]

    monkeypatch.setattr(hub, "HfHub", make)
    yield built


@pytest.fixture(scope="session")
def tiny_sam3_video_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding a tiny random SAM 3 video model + processor (``save_pretrained``)."""
    from tests.support.tiny_sam3_video import save_tiny_sam3_video

    return save_tiny_sam3_video(tmp_path_factory.mktemp("tiny_sam3_video"))


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """One local Ray for the session (each start costs seconds), shared by every module that
    runs on the Ray engine; its workers import this checkout (tests.support too) and stay
    offline. Ray's processes take the environment they start with, so it is set for
    ``ray.init`` alone and this process gets its own back at once."""
    import ray as ray_core

    with pytest.MonkeyPatch.context() as env:
        pythonpath = os.environ.get("PYTHONPATH")
        env.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(REPO), pythonpath) if p))
        env.setenv("HF_HUB_OFFLINE", "1")
        # address="local": a `ray start` cluster recorded on this machine must not be joined;
        # 8 logical CPUs: a 2-CPU Ray can deadlock an actor pool under backpressure.
        ray_core.init(address="local", num_cpus=8, include_dashboard=False, logging_level="WARNING")
    try:
        yield str(ray_core.get_runtime_context().gcs_address)
    finally:
        ray_core.shutdown()

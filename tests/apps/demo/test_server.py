"""The demo's app over HTTP with ``gradio_client``: the ``/run`` endpoint streams the rounds,
``/stop`` ends a session cleanly, sessions run at once, the token guards the page and the
SAM 3 API served beside it.

The real app, agent and OpenAI-compatible client; the MLLM is the scripted server on
127.0.0.1 and SAM 3 the fake segmenter (see ``demo_fixtures``).
"""

from __future__ import annotations

import html
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sam3_agent.agent.loop import STOPPED
from sam3_agent.apps.demo.server import create_app
from sam3_agent.values.config import AgentConfig
from tests.support.demo_fixtures import (
    COFFEE,
    QUERY,
    CoffeeScript,
    coffee_runner,
    is_check,
    serve_app,
    wait_for,
)
from tests.support.media_server import Route, media_server
from tests.support.openai_server import Rendezvous, ScriptedServer, serve

pytest.importorskip("gradio", reason="the demo extra is not installed (pip install .[demo])")
gradio_client = pytest.importorskip("gradio_client")

ROUNDS, STATUS, FINAL, FILES = range(4)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with serve() as state:
        yield state


def client(url: str, **kwargs: Any) -> Any:
    return gradio_client.Client(url + "/", verbose=False, download_files=False, **kwargs)


def run(c: Any, image: Path | str, query: str = QUERY) -> Any:
    return c.submit(gradio_client.handle_file(str(image)), query, api_name="/run")


def files_by_name(outputs: tuple[Any, ...]) -> dict[str, str]:
    """Download name -> URL of the files offered (the client leaves them on the server)."""
    return {f["orig_name"]: f["url"] for f in outputs[FILES] or []}


def test_run_streams_each_round_then_the_result(server: ScriptedServer, tmp_path: Path):
    server.responder = CoffeeScript()
    app = create_app(coffee_runner(server, tmp_path / "runs"))
    with serve_app(app) as url:
        job = run(client(url), COFFEE)
        updates = list(job)
        final = job.result()
        names = files_by_name(final)
        assert set(names) == {"result.json", "overlay.png", "01.png"}
        document = httpx.get(names["result.json"]).json()
        mask_png = httpx.get(names["01.png"]).content

    # One update per round as it finished, before the end.
    round_counts = [u[ROUNDS].count('class="s3a-round ') for u in updates]
    assert {1, 2, 3} <= set(round_counts)
    assert round_counts == sorted(round_counts)
    assert "s3a-status-done" in final[STATUS] and "1 mask(s)" in final[STATUS]
    assert 'segment_phrase {"text_prompt": "coffee"}' in html.unescape(final[ROUNDS])
    assert "This is the spoon, not coffee." in final[ROUNDS]  # the rejected check's reasoning
    assert final[ROUNDS].count("s3a-check s3a-reject") == 1
    assert [a["label"] for a in final[FINAL]["annotations"]] == ["1 (0.91)"]

    (run_dir,) = (tmp_path / "runs").iterdir()
    assert document == json.loads((run_dir / "result.json").read_text())
    assert mask_png.startswith(b"\x89PNG")
    assert document["status"] == "masks" and document["query"] == QUERY
    assert len(document["masks"]) == 1 and document["masks"][0]["score"] == 0.91
    assert document["rounds"] == 3 and document["phrases_tried"] == ["coffee"]


def test_the_run_directory_is_never_served_but_the_downloads_are(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # --out outside both the temp dir and the working directory (Gradio's own allowed places).
    elsewhere = tmp_path / "system-tmp"
    elsewhere.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))
    monkeypatch.delenv("GRADIO_TEMP_DIR", raising=False)
    runs = tmp_path / "runs"
    server.responder = CoffeeScript()
    app = create_app(coffee_runner(server, runs))
    with serve_app(app) as url:
        final = run(client(url), COFFEE).result()
        assert "s3a-status-done" in final[STATUS]
        offered = files_by_name(final)
        assert set(offered) == {"result.json", "overlay.png", "01.png"}
        for name, link in offered.items():
            answer = httpx.get(link)
            assert answer.status_code == 200, name
            assert str(runs) not in link
        (run_dir,) = runs.iterdir()
        assert httpx.get(offered["result.json"]).content == (run_dir / "result.json").read_bytes()
        for inside in ("trace.jsonl", "session.json", "result.json", "masks/01.png"):
            assert (run_dir / inside).is_file(), inside
            answer = httpx.get(f"{url}/gradio_api/file={run_dir / inside}")
            assert answer.status_code in (403, 404), inside


def test_an_unreadable_image_is_a_message(server: ScriptedServer, tmp_path: Path):
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 this is not a JPEG")
    app = create_app(coffee_runner(server, tmp_path / "runs"))
    with serve_app(app) as url:
        final = run(client(url), broken).result()
    assert "s3a-status-error" in final[STATUS]
    assert "cannot read image broken.jpg: " in final[STATUS]
    assert "Traceback" not in final[STATUS] and "/tmp" not in final[STATUS]
    assert server.completions == []  # refused before any model work
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_url_sent_as_the_upload_is_refused_and_never_fetched(
    server: ScriptedServer, tmp_path: Path, scheme: str
):
    """Gradio downloads a URL given as a file's path; the demo never fetches for a client."""
    app = create_app(coffee_runner(server, tmp_path / "runs"))
    with media_server() as photos, serve_app(app) as url:
        photos.routes["/coffee.jpg"] = Route(body=COFFEE.read_bytes())
        link = photos.url("/coffee.jpg").replace("http", scheme, 1)
        with pytest.raises(Exception, match="not URLs"):
            run(client(url), link).result()
        assert photos.paths == []
    assert server.completions == []
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_an_image_over_the_pixel_limit_is_refused_with_the_loaders_reason(
    server: ScriptedServer, tmp_path: Path
):
    from sam3_agent.values.config import AgentConfig

    limited = AgentConfig(max_rounds=6, max_image_pixels=100_000)  # demo --max-pixels 100000
    app = create_app(coffee_runner(server, tmp_path / "runs", config=limited))
    with serve_app(app) as url:
        final = run(client(url), COFFEE).result()
    status = html.unescape(final[STATUS])
    assert "s3a-status-error" in status
    assert "coffee.jpg is 600x400 = 240000 pixels, over the limit of 100000" in status
    assert "not an image file" not in status and "/tmp" not in status
    assert server.completions == []


def test_an_empty_query_is_a_message(server: ScriptedServer, tmp_path: Path):
    app = create_app(coffee_runner(server, tmp_path / "runs"))
    with serve_app(app) as url:
        final = run(client(url), COFFEE, "   ").result()
    assert "s3a-status-error" in final[STATUS] and "the query is empty" in final[STATUS]


def test_stop_ends_the_session_and_keeps_what_it_had(server: ScriptedServer, tmp_path: Path):
    server.responder = CoffeeScript(hold=2)  # round 2 never answers
    app = create_app(coffee_runner(server, tmp_path / "runs"))
    with serve_app(app) as url:
        c = client(url)
        job = run(c, COFFEE)
        wait_for(
            lambda: any('class="s3a-round ' in o[ROUNDS] for o in job.outputs()),
            what="round 1 in the stream",
        )
        assert c.predict(api_name="/stop") == "stopping"
        final = job.result()
        assert c.predict(api_name="/stop") == "nothing is running"

    assert "s3a-status-stopped" in final[STATUS]
    assert final[ROUNDS].count('class="s3a-round ') == 1
    (run_dir,) = (tmp_path / "runs").iterdir()
    document = json.loads((run_dir / "result.json").read_text())
    assert document["status"] == "failed" and document["failure"] == STOPPED
    assert document["phrases_tried"] == ["coffee"]
    assert set(files_by_name(final)) == {"result.json", "overlay.png"}


def test_a_second_run_of_one_client_is_refused_and_leaves_the_rounds(
    server: ScriptedServer, tmp_path: Path
):
    server.responder = CoffeeScript(hold=2)
    app = create_app(coffee_runner(server, tmp_path / "runs"))
    with serve_app(app) as url:
        c = client(url)
        job = run(c, COFFEE)
        wait_for(
            lambda: any('class="s3a-round ' in o[ROUNDS] for o in job.outputs()),
            what="round 1 in the stream",
        )
        second = run(c, COFFEE, "the spoon")
        refused = second.result()
        assert "already running" in refused[STATUS]
        # Every output but the status line is left as it was: the first session's rounds stay.
        assert all(not isinstance(o[ROUNDS], str) for o in second.outputs())
        assert refused[ROUNDS]["__type__"] == "update" and refused[FILES]["__type__"] == "update"
        assert c.predict(api_name="/stop") == "stopping"
        assert job.result()[ROUNDS].count('class="s3a-round ') == 1
    assert len(list((tmp_path / "runs").iterdir())) == 1


def first_main_call(body: dict[str, Any]) -> bool:
    """A session's first call to the model: not a mask check, no assistant turn yet."""
    return not is_check(body) and all(m["role"] != "assistant" for m in body["messages"])


def test_sessions_run_at_the_same_time(server: ScriptedServer, tmp_path: Path):
    server.responder = CoffeeScript(by_round=True)
    # Each session's first model call is answered only once both are waiting at once.
    server.rendezvous = Rendezvous(2, admits=first_main_call)
    app = create_app(coffee_runner(server, tmp_path / "runs"), concurrency=2)
    with serve_app(app) as url:
        jobs = [run(client(url), COFFEE) for _ in range(2)]
        finals = [job.result() for job in jobs]
    assert all("s3a-status-done" in f[STATUS] for f in finals), [f[STATUS] for f in finals]
    assert len(list((tmp_path / "runs").iterdir())) == 2
    assert server.rendezvous.met


def test_the_token_guards_the_page_and_the_sam3_api(server: ScriptedServer, tmp_path: Path):
    from tests.support.demo_fixtures import coffee_segmenter

    server.responder = CoffeeScript()
    segmenter = coffee_segmenter()
    app = create_app(
        coffee_runner(server, tmp_path / "runs", segmenter=segmenter),
        token="s3cret",
        service_segmenter=segmenter,
    )
    with serve_app(app) as url:
        with pytest.raises(Exception):  # noqa: B017 - gradio_client raises a plain ValueError
            client(url)
        final = run(client(url, auth=("anyone", "s3cret")), COFFEE).result()
        assert "s3a-status-done" in final[STATUS]
        assert httpx.get(f"{url}/health").json() == {"status": "ok"}
        segment = {"image": {"base64": ""}, "phrases": ["coffee"]}
        assert httpx.post(f"{url}/v1/segment", json=segment).status_code == 401
        answer = httpx.post(
            f"{url}/v1/images",
            content=COFFEE.read_bytes(),
            headers={"Authorization": "Bearer s3cret"},
        )
        assert answer.status_code == 200 and answer.json()["image_size"] == [400, 600]


def test_the_login_page_holds_no_api_description(server: ScriptedServer, tmp_path: Path):
    app = create_app(coffee_runner(server, tmp_path / "runs"), token="s3cret")
    with serve_app(app) as url, httpx.Client() as browser:
        login_page = browser.get(f"{url}/")
        assert login_page.status_code == 200 and '"auth_required":true' in login_page.text
        for hidden in ("named_endpoints", "/run", "image_path", "What to segment"):
            assert hidden not in login_page.text, hidden
        assert browser.get(f"{url}/gradio_api/info").status_code == 401

        login = browser.post(f"{url}/login", data={"username": "me", "password": "s3cret"})
        assert login.status_code == 200
        page = browser.get(f"{url}/")
        assert page.status_code == 200 and "named_endpoints" in page.text
        assert int(page.headers["content-length"]) == len(page.content)


def test_the_api_description_shows_the_pages_own_example(server: ScriptedServer, tmp_path: Path):
    app = create_app(coffee_runner(server, tmp_path / "runs"))
    with serve_app(app) as url:
        info = httpx.get(f"{url}/gradio_api/info").json()
    assert set(info["named_endpoints"]) == {"/run", "/stop"}
    image, query, tools = info["named_endpoints"]["/run"]["parameters"]
    assert (image["parameter_name"], query["parameter_name"]) == ("image_path", "query")
    assert (tools["parameter_name"], tools["parameter_default"]) == ("tool_set", "paper")
    assert tools["type"]["enum"] == ["paper", "extended"]
    assert image["example_input"]["path"] == "coffee.jpg"
    assert query["example_input"] == "the cup"
    assert "sample_file.pdf" not in json.dumps(info) and "Hello!!" not in json.dumps(info)


def _system_prompts(server: ScriptedServer) -> list[str]:
    """The system prompt of each main conversation's first call, in arrival order."""
    firsts = [
        r.body["messages"] for r in server.completions
        if not is_check(r.body) and not any(m["role"] == "assistant" for m in r.body["messages"])
    ]  # fmt: skip
    return [json.dumps(messages[0]["content"]) for messages in firsts]


def test_the_tool_set_is_a_control_of_the_page_defaulting_to_the_demos_flag(
    server: ScriptedServer, tmp_path: Path
):
    server.responder = CoffeeScript(by_round=True)
    flags = AgentConfig(max_rounds=6, tool_set="extended")  # sam3-agent demo --tools extended
    app = create_app(coffee_runner(server, tmp_path / "runs", config=flags))
    with serve_app(app) as url:
        page = httpx.get(f"{url}/config").json()
        c = client(url)
        image = gradio_client.handle_file(str(COFFEE))
        paper = c.submit(image, QUERY, "paper", api_name="/run").result()
        default = run(c, COFFEE).result()
        info = httpx.get(f"{url}/gradio_api/info").json()

    (radio,) = [x for x in page["components"] if x["props"].get("elem_id") == "s3a-tools"]
    assert radio["type"] == "radio" and radio["props"]["value"] == "extended"
    assert [value for _, value in radio["props"]["choices"]] == ["paper", "extended"]
    assert info["named_endpoints"]["/run"]["parameters"][2]["parameter_default"] == "extended"
    assert "s3a-status-done" in paper[STATUS] and "s3a-status-done" in default[STATUS]
    asked_paper, asked_default = _system_prompts(server)
    assert "`unlike`" not in asked_paper and "`unlike`" in asked_default

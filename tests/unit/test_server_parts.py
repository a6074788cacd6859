"""Unit tests of the server's small parts: settings, output clipping, tool specs, auth."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import ValidationError

from analyst_env.envs.sandbox import CellResult, ExecutionError
from analyst_env.server.auth import BearerTokenMiddleware
from analyst_env.server.rendering import clip, render_cell
from analyst_env.server.settings import Settings
from analyst_env.server.tools import TOOLS


def test_settings_from_environment_and_overrides():
    s = Settings.from_env(
        {
            "ANALYST_ENV_MAX_SESSIONS": "7",
            "ANALYST_ENV_CELL_TIMEOUT_S": "2.5",
            "ANALYST_ENV_TOKEN": "",
        }
    )
    assert s.max_sessions == 7 and s.cell_timeout_s == 2.5 and s.token is None
    s = Settings.from_env({"ANALYST_ENV_MAX_SESSIONS": "7"}, max_sessions=9, dataset=None)
    assert s.max_sessions == 9 and s.dataset == "starter"
    with pytest.raises(ValidationError):
        Settings.from_env({"ANALYST_ENV_MAX_SESSIONS": "0"})


def test_clip_keeps_head_and_tail_and_says_how_much_was_cut():
    text = "".join(f"line {i}\n" for i in range(10_000))
    out = clip(text, 1_000)
    assert out.startswith("line 0\n") and out.rstrip().endswith("line 9999")
    assert "output truncated" in out and len(out) < 1_200
    assert clip("short", 1_000) == "short"


def test_render_cell_layout():
    result = CellResult(
        stdout="hello\n",
        outputs=[{"text/plain": "42"}, {"image/png": "AAAA"}],
        error=ExecutionError(name="ValueError", value="bad", traceback="Traceback ..."),
    )
    text = render_cell(result, 10_000)
    assert text.splitlines()[:3] == ["hello", "42", "[Image output: 1 image(s) generated]"]
    assert "ERROR:\nValueError: bad" in text
    assert render_cell(CellResult(), 100) == "(no output)"


def test_tool_specs_are_what_the_model_reads():
    specs = {name: tool.spec() for name, tool in TOOLS.items()}
    assert specs["add_and_execute_code_cell"].input_schema == {
        "additionalProperties": False,
        "properties": {
            "code": {"description": "Python source to run in the notebook kernel", "type": "string"}
        },
        "required": ["code"],
        "type": "object",
    }
    assert (
        specs["get_notebook_state"].input_schema["properties"]["include_images"]["default"] is False
    )
    assert specs["list_files"].input_schema["properties"] == {}
    for spec in specs.values():
        first_line = spec.description.splitlines()[0]
        assert first_line.endswith(".") and len(first_line) < 100, spec.name
        assert "Returns:" in spec.description, spec.name


def test_bearer_token_accepts_a_header_and_leaves_health_open():
    inner = FastAPI()
    inner.get("/health")(lambda: {"ok": True})
    inner.get("/secret")(lambda: {"ok": True})
    client = TestClient(BearerTokenMiddleware(inner, token="abc"))
    assert client.get("/health").status_code == 200
    assert client.get("/secret").status_code == 401
    assert client.get("/secret").headers["www-authenticate"] == "Bearer"
    assert client.get("/secret", headers={"Authorization": "bearer abc"}).status_code == 200
    assert (
        client.get("/secret?token=abc").status_code == 401
    )  # a query token opens WebSocket upgrades only
    assert client.get("/secret?token=abd").status_code == 401


def test_rich_outputs_are_kept_as_shown_and_within_the_episode_budget():
    from analyst_env.server.episode import Episode, Limits
    from analyst_env.server.tools import _shown_outputs
    from analyst_env.task_format import Task, VerifierSpec

    task = Task(
        id="t", instruction="q", answer="a", oracle_answer="a", verifier=VerifierSpec(name="exact")
    )
    episode = Episode(
        "e", task, None, Limits(output_limit_chars=100, episode_output_limit_bytes=1_000)
    )
    first = _shown_outputs(episode, [{"text/html": "h" * 5_000, "text/plain": "p"}])
    assert (
        len(first[0]["text/html"]) < 300 and first[0]["text/plain"] == "p"
    )  # what the model reads, not 5,000
    image = {"image/png": "A" * 600}
    assert _shown_outputs(episode, [image]) == [image]
    later = _shown_outputs(episode, [image, {"text/plain": "small"}])
    assert "image/png" not in later[0] and "used its" in later[0]["text/plain"]
    assert later[1] == {"text/plain": "small"}
    assert episode.output_bytes <= 1_000

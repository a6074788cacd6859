"""The process-reward hook, in-process on the real runtime: per-step scores beside the outcome
reward."""

from __future__ import annotations

import sys
import types

import pytest
from pydantic import ValidationError
from support import SECRET_TOTAL, call

from analyst_env.server.environment import AnalystEnvironment
from analyst_env.server.runtime import Runtime
from analyst_env.server.settings import Settings

HOOKS = "hv_process_reward_hooks"
SEEN: list[tuple] = []


def _recording(task, tool_name, arguments, output_text, is_error, step_count):
    SEEN.append((task, tool_name, arguments, output_text, is_error, step_count))
    return step_count / 10


def _raising(*args):
    raise RuntimeError("hook exploded")


def _silly(*args):
    return "great step"


def _silent(*args):
    return None


@pytest.fixture(scope="module", autouse=True)
def hook_module():
    module = types.ModuleType(HOOKS)
    module.recording, module.raising, module.silly, module.silent = (
        _recording,
        _raising,
        _silly,
        _silent,
    )
    sys.modules[HOOKS] = module
    yield
    del sys.modules[HOOKS]


@pytest.fixture
def env_with(settings, runtime, tiny_dataset):
    """An environment whose settings name ``hook``; it shares the session's sandbox backend."""
    made = []

    def make(hook: str) -> AnalystEnvironment:
        hooked = Runtime(
            Settings(**{**settings.model_dump(), "process_reward": hook}),
            backend=runtime.backend,
            datasets=[tiny_dataset],
        )
        made.append(AnalystEnvironment(hooked))
        return made[-1]

    yield make
    for env in made:
        env.close()


def test_off_by_default(runtime):
    env = AnalystEnvironment(runtime)
    try:
        env.reset(task_id="tiny-csv")
        obs = call(env, "run_sql", query="SELEC 1")
        assert "process_reward" not in obs.metadata and "process_reward_error" not in obs.metadata
    finally:
        env.close()


def test_penalize_errors_scores_each_step_and_leaves_the_outcome_reward_alone(env_with):
    env = env_with("analyst_env.server.process_reward:penalize_errors")
    env.reset(task_id="tiny-csv")
    bad = call(env, "run_sql", query="SELEC 1")
    assert bad.result["is_error"] and bad.metadata["process_reward"] == -0.1 and bad.reward is None
    unknown = call(env, "no_such_tool")
    assert unknown.error is not None and unknown.metadata["process_reward"] == -0.1
    good = call(env, "add_and_execute_code_cell", code="print(1 + 1)")
    assert (
        not good.result["is_error"]
        and good.metadata["process_reward"] == 0.0
        and good.reward is None
    )
    final = call(env, "final_answer", answer=str(SECRET_TOTAL))
    assert final.done and final.reward == 1.0, "the outcome reward stays the verifier's"
    assert final.metadata["process_reward"] == 0.0 and "reward_breakdown" in final.metadata
    after = call(env, "list_files")
    assert after.error is not None and "process_reward" not in after.metadata, (
        "a step that does not count"
    )


def test_the_hook_sees_the_public_task_the_call_and_its_output(env_with):
    SEEN.clear()
    env = env_with(f"{HOOKS}:recording")
    env.reset(task_id="tiny-csv")
    obs = call(env, "run_sql", query="SELECT COUNT(*) AS n FROM sales")
    assert obs.metadata["process_reward"] == pytest.approx(0.1)
    (task, tool, arguments, text, is_error, step_count) = SEEN[-1]
    assert task["id"] == "tiny-csv" and "answer" not in task and "oracle_answer" not in task
    assert (tool, arguments, is_error, step_count) == (
        "run_sql",
        {"query": "SELECT COUNT(*) AS n FROM sales"},
        False,
        1,
    )
    assert "5" in text and text == obs.text
    assert call(env, "list_files").metadata["process_reward"] == pytest.approx(0.2)


@pytest.mark.parametrize(
    "hook, error",
    [
        ("raising", "RuntimeError: hook exploded"),
        ("silly", "hook returned 'great step', not a finite number"),
    ],
)
def test_a_broken_hook_is_reported_and_never_breaks_the_step(env_with, hook, error, caplog):
    env = env_with(f"{HOOKS}:{hook}")
    env.reset(task_id="tiny-csv")
    obs = call(env, "add_and_execute_code_cell", code="print(40 + 2)")
    assert "42" in obs.text and not obs.result["is_error"]
    assert obs.metadata["process_reward_error"] == error and "process_reward" not in obs.metadata
    assert any(hook in r.getMessage() or "process reward" in r.getMessage() for r in caplog.records)
    assert call(env, "final_answer", answer=str(SECRET_TOTAL)).reward == 1.0


def test_a_hook_returning_none_adds_nothing(env_with):
    env = env_with(f"{HOOKS}:silent")
    env.reset(task_id="tiny-csv")
    obs = call(env, "list_files")
    assert "process_reward" not in obs.metadata and "process_reward_error" not in obs.metadata


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no_colon_here", "must look like 'package.module:function'"),
        ("hv_no_such_module_xyz:f", "cannot import 'hv_no_such_module_xyz'"),
        ("analyst_env.server.process_reward:nope", "has no callable 'nope'"),
    ],
)
def test_a_bad_hook_spec_fails_when_settings_are_read(spec, message):
    with pytest.raises(ValidationError, match=message):
        Settings.from_env(environ={"ANALYST_ENV_PROCESS_REWARD": spec})
